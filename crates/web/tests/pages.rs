//! The view over HTTP (the router in process, a real local store): what every page must hold
//! whatever the browser — escaping, the Content-Security-Policy, the token rule, the damage
//! report instead of a blank page, the exact export, the read-only live tail's resumption.
//! The browser scenarios are in `crates/cli/tests/web_browser.rs`.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use lazarus_ledger::Payload;
use lazarus_session::record::Record;
use lazarus_session::{CreateOptions, LocalStore, SessionId, Store};
use lazarus_web::{Auth, Mode, WebConfig};
use serde_json::{Value, json};
use tower::ServiceExt;

const XSS: &str = "<script>alert(1)</script>";

fn rec(kind: &str, data: Value) -> Record {
    Record::deserialize_kind(kind, data).expect("a valid record")
}

/// A session killed inside a non-idempotent shell call, then resumed: the call closed as in
/// doubt. Its input and the tool's output hold a script.
fn killed_and_resumed(store: &LocalStore, id: &str) {
    let mut s = store
        .create(CreateOptions {
            id: Some(id.parse().unwrap()),
            meta: Some(json!({"workspace": "/srv/projects/demo"})),
        })
        .unwrap();
    s.append_input("m1", "user", &format!("run it {XSS}"))
        .unwrap();
    for (kind, data) in [
        ("turn_start", json!({"turn":1,"prev_seq":null,"inputs":[1]})),
        (
            "response",
            json!({"turn":1,"items":[{"type":"reasoning","text":"think"},{"type":"tool_call","call_id":"c1","name":"shell","arguments":"{\"command\":\"sleep 30\"}"}],"usage":{"prompt_tokens":10,"completion_tokens":5},"model":"m-1"}),
        ),
        (
            "tool_intent",
            json!({"call_id":"c1","turn":1,"tool":"shell","arguments":"{\"command\":\"sleep 30\"}","idempotent":false,"idempotency_key":"k"}),
        ),
        (
            "tool_start",
            json!({"call_id":"c1","process":{"pgid":42,"start_time_ticks":7}}),
        ),
        (
            "resume",
            json!({"trigger":"run","truncated_bytes":17,"truncated_saved_to":"demo.jsonl.cut-1","records_replayed":5,"calls_reused":0,"calls_rerun":0,"calls_in_doubt":1,"calls_not_started":0,"processes_terminated":1,"inputs_pending":0,"every_call_has_one_result":true}),
        ),
        (
            "tool_outcome",
            json!({"call_id":"c1","status":"in_doubt","result":"interrupted: effect unknown"}),
        ),
        ("turn_start", json!({"turn":2,"prev_seq":2,"inputs":[]})),
        (
            "response",
            json!({"turn":2,"items":[{"type":"tool_call","call_id":"c2","name":"shell","arguments":"{}"}]}),
        ),
        (
            "tool_intent",
            json!({"call_id":"c2","turn":2,"tool":"shell","arguments":"{}","idempotent":false,"idempotency_key":"k2"}),
        ),
        ("tool_start", json!({"call_id":"c2"})),
        (
            "tool_outcome",
            json!({"call_id":"c2","status":"ok","result":format!("out {XSS}")}),
        ),
        ("turn_start", json!({"turn":3,"prev_seq":8,"inputs":[]})),
        (
            "response",
            json!({"turn":3,"items":[{"type":"text","text":"done"}],"usage":{"total_tokens":20}}),
        ),
    ] {
        s.append(rec(kind, data)).unwrap();
    }
}

fn app(store: &LocalStore, auth: Auth) -> Router {
    let mut cfg = WebConfig::new(std::sync::Arc::new(store.clone()), auth, Mode::ReadOnly);
    cfg.local = Some(store.clone());
    lazarus_web::router(cfg)
}

async fn get(
    app: &Router,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, axum::http::HeaderMap, String) {
    let mut req = Request::get(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = app
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let h = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, h, String::from_utf8_lossy(&body).into_owned())
}

fn store() -> (tempfile::TempDir, LocalStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(&dir.path().join("sessions")).unwrap();
    (dir, store)
}

/// No code of the page's own but the one embedded script; no inline styles or handlers.
fn assert_no_inline_code(html: &str) {
    assert_eq!(html.matches("<script").count(), 1, "{html}");
    assert!(html.contains("<script src=\"/assets/app.js?v="), "{html}");
    assert!(!html.contains(" style="), "inline style: {html}");
    assert!(!html.contains(" onclick="), "inline handler: {html}");
}

#[tokio::test]
async fn pages_escape_session_text_and_carry_a_strict_csp() {
    let (_d, store) = store();
    killed_and_resumed(&store, "demo");
    let app = app(&store, Auth::None);
    for path in [
        "/",
        "/sessions/demo",
        "/sessions/demo/tree",
        "/?q=script&text=1",
    ] {
        let (st, h, html) = get(&app, path, &[]).await;
        assert_eq!(st, StatusCode::OK, "{path}: {html}");
        let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
            "{csp}"
        );
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(h[header::CACHE_CONTROL], "no-store");
        assert!(!html.contains(XSS), "{path}: raw script in the page");
        assert_no_inline_code(&html);
    }
    let (_, _, html) = get(&app, "/sessions/demo", &[]).await;
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{html}"
    );
    // the search over record text found it (the title is shortened but holds it too)
    let (_, _, html) = get(&app, "/?q=effect+unknown&text=1", &[]).await;
    assert!(html.contains("data-id=\"demo\""), "{html}");
    let (_, _, html) = get(&app, "/?q=effect+unknown", &[]).await;
    assert!(
        !html.contains("data-id=\"demo\""),
        "a cheap search read record text: {html}"
    );
}

#[tokio::test]
async fn the_session_page_shows_receipt_in_doubt_card_and_every_count() {
    let (_d, store) = store();
    killed_and_resumed(&store, "demo");
    let app = app(&store, Auth::None);
    let (st, _, html) = get(&app, "/sessions/demo", &[]).await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("class=\"entry receipt\""), "{html}");
    for needle in [
        "records replayed",
        "calls reused",
        "calls re-run",
        "calls in doubt",
        "calls not started",
        "processes terminated",
        "inputs pending",
        "every call has one result",
        "17 bytes",
        "demo.jsonl.cut-1",
        "interrupted: effect unknown",
        "process group 42",
        "m1",
        "reasoning",
    ] {
        assert!(html.contains(needle), "missing {needle:?}");
    }
    assert!(
        html.contains("class=\"call stage-done in-doubt out-other\""),
        "{html}"
    );
    assert!(html.contains("The model received this notice"), "{html}");
}

#[tokio::test]
async fn a_damaged_log_shows_verify_report_not_a_blank_page() {
    let (dir, store) = store();
    killed_and_resumed(&store, "demo");
    // flip a byte inside line 4 (not the tail): corruption
    let path = dir.path().join("sessions/demo.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(
            bytes
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    let at = line_starts[3] + 20;
    bytes[at] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let app = app(&store, Auth::None);
    let (st, _, html) = get(&app, "/sessions/demo", &[]).await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert!(html.contains("Damaged log"), "{html}");
    assert!(html.contains("class=\"damage-lines\""), "{html}");
    assert!(html.contains("lazarus sessions repair demo"), "{html}");
    // the good records before the bad line are shown
    assert!(html.contains("id=\"r1\""), "{html}");
    // its page calls it corrupt (a listing reads only each file's first line and tail, so
    // the sessions page cannot know of damage in the middle before the page is opened)
    assert!(html.contains("class=\"status st-corrupt\""), "{html}");
}

#[tokio::test]
async fn a_token_is_needed_for_everything_but_the_assets_and_never_read_from_a_url() {
    let (_d, store) = store();
    killed_and_resumed(&store, "demo");
    let app = app(&store, Auth::Token("sekrit-token".into()));
    let (st, h, html) = get(&app, "/sessions/demo", &[]).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert_eq!(h[header::WWW_AUTHENTICATE], "Bearer");
    assert!(html.contains("id=\"token-form\""), "the token page: {html}");
    assert!(
        !html.contains("alert(1)"),
        "session text shown without the token"
    );
    let (st, _, _) = get(&app, "/sessions/demo?token=sekrit-token", &[]).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED, "a token in the URL was taken");
    let (st, _, _) = get(&app, "/sessions/demo", &[("authorization", "Bearer wrong")]).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    for path in ["/", "/sessions/demo", "/sessions/demo/tree"] {
        let (st, _, _) = get(&app, path, &[("authorization", "Bearer sekrit-token")]).await;
        assert_eq!(st, StatusCode::OK, "{path}");
    }
    for path in [
        "/sessions/demo/export.jsonl",
        "/sessions/demo/live",
        "/sessions/demo/timeline?after=0",
    ] {
        let (st, _, body) = get(&app, path, &[]).await;
        assert_eq!(st, StatusCode::UNAUTHORIZED, "{path}");
        assert!(!body.contains("alert(1)"), "{path}");
    }
    let (st, h, js) = get(&app, "/assets/app.js", &[]).await;
    assert_eq!(st, StatusCode::OK);
    assert!(
        h[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(js.contains("sessionStorage"));
}

#[tokio::test]
async fn export_is_the_exact_file() {
    let (dir, store) = store();
    killed_and_resumed(&store, "demo");
    let app = app(&store, Auth::None);
    let (st, h, body) = get(&app, "/sessions/demo/export.jsonl", &[]).await;
    assert_eq!(st, StatusCode::OK);
    assert!(
        h[header::CONTENT_DISPOSITION]
            .to_str()
            .unwrap()
            .contains("demo.jsonl")
    );
    let file = std::fs::read_to_string(dir.path().join("sessions/demo.jsonl")).unwrap();
    assert_eq!(body, file);
}

#[tokio::test]
async fn the_read_only_live_tail_resumes_after_last_event_id() {
    let (_d, store) = store();
    killed_and_resumed(&store, "demo");
    let app = app(&store, Auth::None);
    let resp = app
        .clone()
        .oneshot(
            Request::get("/sessions/demo/live")
                .header("last-event-id", "12")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body();
    let mut text = String::new();
    // records 13 and 14 are there already; then one appended while the tail is open
    let id: SessionId = "demo".parse().unwrap();
    let writer = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || {
            std::thread::sleep(Duration::from_millis(300));
            let mut s = store.open(&id).unwrap();
            s.append_input("m2", "user", "later").unwrap();
        })
    };
    while text.matches("\n\n").count() < 3 {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("the live tail stalled")
            .unwrap()
            .unwrap();
        if let Ok(d) = frame.into_data() {
            text.push_str(&String::from_utf8_lossy(&d));
        }
    }
    writer.await.unwrap();
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    assert_eq!(ids, ["13", "14", "15"], "{text}");
    let (st, _, _) = get(&app, "/sessions/demo/live", &[("last-event-id", "x")]).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_compaction_is_a_marker_with_its_summary_and_provider_reasoning_is_shown() {
    let (_d, store) = store();
    let mut s = store
        .create(CreateOptions {
            id: Some("long".parse().unwrap()),
            meta: None,
        })
        .unwrap();
    s.append_input("m1", "user", "first question").unwrap();
    for (kind, data) in [
        ("turn_start", json!({"turn":1,"prev_seq":null,"inputs":[1]})),
        (
            "response",
            json!({"turn":1,"items":[{"type":"text","text":"first answer"}]}),
        ),
        (
            "compaction",
            json!({"trigger":"manual","from_seq":1,"through_seq":3,"summary":format!("they asked {XSS}"),"tokens_before":900,"tokens_after":120,"model":"m-1"}),
        ),
    ] {
        s.append(rec(kind, data)).unwrap();
    }
    s.append_input("m2", "user", "second question").unwrap();
    for (kind, data) in [
        ("turn_start", json!({"turn":2,"prev_seq":2,"inputs":[5]})),
        (
            "response",
            json!({"turn":2,"items":[
                {"type":"provider_reasoning","api":"anthropic","text":"weighing it","item":{"type":"thinking","thinking":"weighing it","signature":"sig"}},
                {"type":"provider_reasoning","api":"anthropic","text":"","item":{"type":"redacted_thinking","data":"opaque"}},
                {"type":"text","text":"second answer"}],
              "usage":{"prompt_tokens":130,"completion_tokens":9,"cached_tokens":100}}),
        ),
    ] {
        s.append(rec(kind, data)).unwrap();
    }
    drop(s);
    let app = app(&store, Auth::None);
    let (st, _, html) = get(&app, "/sessions/long", &[]).await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert!(html.contains("class=\"entry compaction\""), "{html}");
    for needle in [
        "Compacted",
        "#1–#3 summarised",
        "900 → 120 tokens sent",
        "they asked &lt;script&gt;",
        "reasoning (anthropic, sent back verbatim)",
        "weighing it",
        "redacted",
        "(100 cached)",
        "first answer",
        "second answer",
    ] {
        assert!(html.contains(needle), "missing {needle:?}: {html}");
    }
    assert!(!html.contains(XSS));
    assert!(!html.contains("entry unreadable"), "{html}");
    assert!(!html.contains("breaks the session"), "{html}");
}

/// A session a Python program wrote (the `lazarus` package): the list shows it with its
/// title, and its page shows each host record read (an item as a message, a call announced, a
/// checkpoint), escaped, never as unreadable.
#[tokio::test]
async fn a_python_programs_session_shows_its_records_as_they_are() {
    let (_d, store) = store();
    let id: SessionId = "chat-1".parse().unwrap();
    let mut s = store
        .create(CreateOptions {
            id: Some(id.clone()),
            meta: Some(json!({"host": "openai-agents"})),
        })
        .unwrap();
    for (kind, data) in [
        (
            "host_item",
            json!({"item":{"role":"user","content":format!("weather? {XSS}")}}),
        ),
        (
            "host_call_intent",
            json!({"call_id":"call_w","tool":"get_weather","arguments":"{\"city\":\"Paris\"}"}),
        ),
        (
            "host_checkpoint",
            json!({"ns":"","checkpoint_id":"cp-1","checkpoint":{"type":"msgpack","b64":"gA=="},"metadata":{"type":"msgpack","b64":"gA=="}}),
        ),
    ] {
        s.append(rec(kind, data)).unwrap();
    }
    drop(s);
    store.rename(&id, Some("weather in Paris")).unwrap();
    let app = app(&store, Auth::None);
    let (st, _, list) = get(&app, "/", &[]).await;
    assert_eq!(st, StatusCode::OK, "{list}");
    assert!(
        list.contains("chat-1") && list.contains("weather in Paris"),
        "{list}"
    );
    let (st, _, html) = get(&app, "/sessions/chat-1", &[]).await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert_eq!(html.matches("class=\"entry host\"").count(), 3, "{html}");
    for needle in [
        "history item",
        "weather?",
        "call announced",
        "get_weather",
        "checkpoint",
        "cp-1",
        "Conversation now: 1 item",
    ] {
        assert!(html.contains(needle), "{needle}: {html}");
    }
    assert!(!html.contains(XSS), "unescaped: {html}");
    assert!(!html.contains("entry unreadable"), "{html}");
    // its program's call announced without an outcome is in doubt, as a native call's is:
    // in the list's status, the page's badge and its in-doubt card
    assert!(list.contains("data-status=\"in_doubt\""), "{list}");
    assert!(html.contains("data-status=\"in_doubt\""), "{html}");
    assert!(html.contains("1 in doubt"), "{html}");
    assert!(
        html.contains("host-in-doubt") && html.contains("get_weather"),
        "{html}"
    );
    assert_no_inline_code(&html);
}

/// A session a gateway left to its owner: its page shows why and the command that resumes
/// it, and the world it runs with (its workspace, MCP servers with their trust, policy).
#[tokio::test]
async fn a_session_left_to_its_owner_says_why_and_what_resumes_it() {
    let (_d, store) = store();
    let id: SessionId = "left".parse().unwrap();
    let world = json!({
        "reason": "created", "by": "run", "workspace": "/home/dana/app",
        "tools": {"builtin": ["shell"], "mcp": [{"name": "files", "fingerprint": "sha256:00", "transport": "stdio",
            "command": "npx", "args": ["-y", "srv"], "trusted": false, "sandbox": false, "source": "/home/dana/app/.mcp.json"}]},
        "approval": {"mode": "untrusted"},
        "sandbox": {"mode": "workspace-write", "network": false, "max_processes": 1024},
        "provider": {"api": "chat", "base_url": "http://127.0.0.1:8080/v1", "model": "gemma"},
    });
    let mut s = store
        .create(CreateOptions {
            id: Some(id.clone()),
            meta: Some(json!({"workspace": "/home/dana/app", "world": world})),
        })
        .unwrap();
    s.append_input("m1", "api", "go on").unwrap();
    s.append(rec(
        "needs_owner",
        json!({"by": "serve gw:1", "reason": format!("workspace /home/dana/app is outside this gateway's roots {XSS}"), "resume_with": "lazarus run --session left"}),
    ))
    .unwrap();
    drop(s);
    let app = app(&store, Auth::None);
    let (st, _, list) = get(&app, "/", &[]).await;
    assert_eq!(st, StatusCode::OK, "{list}");
    assert!(list.contains("data-status=\"needs_owner\""), "{list}");
    let (st, _, html) = get(&app, "/sessions/left", &[]).await;
    assert_eq!(st, StatusCode::OK, "{html}");
    for needle in [
        "Left to its owner",
        "outside this gateway",
        "lazarus run --session left",
        "npx -y srv",
        "not trusted",
        "workspace-write",
        "untrusted",
    ] {
        assert!(html.contains(needle), "{needle}: {html}");
    }
    assert!(!html.contains(XSS), "unescaped: {html}");
    assert_no_inline_code(&html);
}

#[tokio::test]
async fn a_calls_task_shows_its_status_and_age_and_the_receipt_counts_it() {
    let (_d, store) = store();
    let mut s = store
        .create(CreateOptions {
            id: Some("tasks".parse().unwrap()),
            meta: None,
        })
        .unwrap();
    s.append_input("m1", "user", "build it").unwrap();
    let call = |id: &str| json!({"call_id": id, "turn": 1, "tool": "mcp__reports__build", "arguments": "{}", "idempotent": false, "idempotency_key": id});
    let task = |id: &str, t: &str, created: &str| json!({"call_id": id, "server": "reports", "fingerprint": "sha256:ab", "task_id": t, "status": "working", "ttl_ms": 900000, "poll_interval_ms": 500, "created_at": created});
    for (kind, data) in [
        ("turn_start", json!({"turn":1,"prev_seq":null,"inputs":[1]})),
        (
            "response",
            json!({"turn":1,"items":[
                {"type":"tool_call","call_id":"done","name":"mcp__reports__build","arguments":"{}"},
                {"type":"tool_call","call_id":"live","name":"mcp__reports__build","arguments":"{}"}]}),
        ),
        ("tool_intent", call("done")),
        ("tool_start", json!({"call_id":"done"})),
        (
            "tool_task",
            task("done", "task-finished", "2026-12-02T10:00:00.000Z"),
        ),
        (
            "tool_task_status",
            json!({"call_id":"done","task_id":"task-finished","status":"completed"}),
        ),
        (
            "tool_outcome",
            json!({"call_id":"done","status":"ok","result":"built"}),
        ),
        (
            "resume",
            json!({"trigger":"run","truncated_bytes":0,"records_replayed":7,"calls_reused":0,"calls_rerun":0,"calls_in_doubt":0,"calls_not_started":0,"inputs_pending":0,"every_call_has_one_result":true,"mcp":{"calls_reused":0,"calls_rerun":0,"calls_in_doubt":0,"tasks_reattached":1,"tasks_finished_while_away":1}}),
        ),
        ("tool_intent", call("live")),
        ("tool_start", json!({"call_id":"live"})),
        (
            "tool_task",
            task("live", "task-working", "2026-12-02T10:00:00.000Z"),
        ),
    ] {
        s.append(rec(kind, data)).unwrap();
    }
    drop(s);
    let app = app(&store, Auth::None);
    let (st, _, html) = get(&app, "/sessions/tasks", &[]).await;
    assert_eq!(st, StatusCode::OK);
    // the finished task: its id, its last status, and how long it took (its records' times)
    assert!(html.contains("task-finished"), "{html}");
    assert!(
        html.contains("<strong class=\"task-status\">completed</strong>"),
        "{html}"
    );
    // the one cut off while working: its status, its age from when it was recorded, and that
    // a resume asks for it again
    assert!(html.contains("task-working"), "{html}");
    assert!(
        html.contains("<strong class=\"task-status\">working</strong>"),
        "{html}"
    );
    assert!(html.contains(" min "), "its age, from 2026-12-02: {html}");
    assert!(html.contains("Its task is recorded"), "{html}");
    assert!(html.contains("MCP tasks reattached"), "{html}");
    assert!(html.contains("1 finished while away"), "{html}");
}
