//! Approvals in a gateway: a call that needs a person makes the session `awaiting_approval`
//! (in the list, its page and over SSE); a decision comes over HTTP (`POST
//! /v1/sessions/{id}/approvals/{call_id}`), from the CLI while the gateway holds the session or
//! after it was killed, or through a second gateway on PostgreSQL; an allowed call runs
//! exactly once, a denied one never.

mod serve_common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::json;
use serve_common::*;

/// Every session's first request asks for shell call `c1` appending to `effect`; after its
/// result the model says done.
fn script() -> Script {
    Script::new([
        Step::after_tool_result("c1", ScriptedResponse::text("all done")).repeat(),
        Step::reply(ScriptedResponse::tool_call(
            "c1",
            "shell",
            json!({"command": "echo ran >> effect"}),
        ))
        .when(When::LastUserContains {
            text: "append".into(),
        })
        .repeat(),
    ])
}

fn effect_lines(state: &Path, id: &str) -> usize {
    std::fs::read_to_string(state.join("workspaces").join(id).join("effect"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn with_config(mut c: Command, state: &Path) -> Command {
    c.env("XDG_CONFIG_HOME", state.join("config"));
    c
}

/// Creates session `id` and sends the message that leads to the shell call; waits until the
/// session waits for approval.
fn start_waiting(url: &str, id: &str) {
    let (st, v) = call(url, "POST", "/v1/sessions", Some(json!({"id": id})));
    assert_eq!(st, 201, "{v}");
    let (st, v) = call(
        url,
        "POST",
        &format!("/v1/sessions/{id}/messages"),
        Some(json!({"message_id": "m1", "text": "append a line"})),
    );
    assert_eq!(st, 202, "{v}");
    wait_session(url, id, Duration::from_secs(30), |v| {
        v["status"] == "awaiting_approval"
    });
}

#[test]
fn a_waiting_session_shows_everywhere_survives_kill_9_and_an_approval_from_the_cli_runs_it_once() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(ScriptedServer::start(script())).unwrap();
    let dir = tempdir();
    let serve = || {
        with_config(
            serve_cmd(
                dir.path(),
                &server.base_url(),
                &["--ask-for-approval", "untrusted"],
            ),
            dir.path(),
        )
    };
    let mut g = Gateway::start(&mut serve());
    start_waiting(&g.url, "a");
    assert_eq!(effect_lines(dir.path(), "a"), 0);
    // the list says so
    let (st, v) = call(&g.url, "GET", "/v1/sessions", None);
    assert_eq!(st, 200, "{v}");
    let listed = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "a")
        .cloned()
        .unwrap();
    assert_eq!(listed["status"], "awaiting_approval", "{listed}");
    // SSE: the request record, then the status
    let events = sse_events(
        &g.url,
        "/v1/sessions/a/stream",
        None,
        64,
        Duration::from_secs(5),
    );
    assert!(
        events
            .iter()
            .any(|(_, e)| e["status"] == "awaiting_approval" && e["call_id"] == "c1"),
        "{events:?}"
    );
    // the pending list
    let (st, v) = call(&g.url, "GET", "/v1/sessions/a/approvals", None);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["approvals"][0]["call_id"], "c1", "{v}");
    assert_eq!(v["approvals"][0]["tool"], "shell", "{v}");
    // an unknown call: 404, nothing written
    let ledger = session_path(dir.path(), "a");
    let before = std::fs::read(&ledger).unwrap();
    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/a/approvals/c9",
        Some(json!({"decision": "allow"})),
    );
    assert_eq!(st, 404, "{v}");
    assert_eq!(v["error"]["code"], "no_such_call", "{v}");
    assert_eq!(std::fs::read(&ledger).unwrap(), before);

    // kill -9 the gateway while the session waits; restart it: it still waits
    g.kill9();
    let g = Gateway::start(&mut serve());
    std::thread::sleep(Duration::from_millis(500));
    let v = wait_session(&g.url, "a", Duration::from_secs(10), |_| true);
    assert_eq!(v["status"], "awaiting_approval", "{v}");
    assert_eq!(effect_lines(dir.path(), "a"), 0);
    // approved from the CLI: the gateway goes on by itself, and the call runs once
    let o = with_config(Command::new(BIN), dir.path())
        .args(["sessions", "approve", "--session-dir"])
        .arg(dir.path().join("sessions"))
        .args(["a", "c1"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    wait_session(&g.url, "a", Duration::from_secs(30), |v| {
        v["status"] == "idle"
    });
    assert_eq!(effect_lines(dir.path(), "a"), 1);
}

#[test]
fn decisions_over_http_are_recorded_once_and_a_denied_call_never_runs() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(ScriptedServer::start(script())).unwrap();
    let dir = tempdir();
    let g = Gateway::start(&mut with_config(
        serve_cmd(
            dir.path(),
            &server.base_url(),
            &["--ask-for-approval", "untrusted"],
        ),
        dir.path(),
    ));
    start_waiting(&g.url, "d");
    // a malformed decision: 400, nothing written
    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/d/approvals/c1",
        Some(json!({"decision": "deny", "scope": "always"})),
    );
    assert_eq!(st, 400, "{v}");
    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/d/approvals/c1",
        Some(json!({"decision": "deny", "reason": "not today"})),
    );
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["result"], "recorded", "{v}");
    // delivered twice: recorded once
    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/d/approvals/c1",
        Some(json!({"decision": "deny", "reason": "not today"})),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["result"], "duplicate", "{v}");
    // a different decision: 409, naming the first
    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/d/approvals/c1",
        Some(json!({"decision": "allow"})),
    );
    assert_eq!(st, 409, "{v}");
    assert_eq!(v["error"]["code"], "conflicting_decision", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deny (once) by token:gateway"),
        "{v}"
    );
    wait_session(&g.url, "d", Duration::from_secs(30), |v| {
        v["status"] == "idle"
    });
    assert_eq!(effect_lines(dir.path(), "d"), 0, "denied: never ran");
    let text = std::fs::read_to_string(session_path(dir.path(), "d")).unwrap();
    assert_eq!(text.matches(r#""kind":"approval""#).count(), 1);
    assert!(text.contains(r#""status":"not_run""#), "{text}");
    assert!(!text.contains(r#""kind":"tool_intent""#), "{text}");
}

/// Needs `LAZARUS_TEST_PG` (skipped loudly without it, a failure under CI).
#[test]
fn an_approval_through_a_second_gateway_on_postgres_reaches_the_holder_and_runs_once() {
    let Some(base) = lazarus_testkit::pg::test_base("serve_approvals on PostgreSQL") else {
        return;
    };
    let url = lazarus_testkit::pg::fresh_schema_url(&base, "");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(ScriptedServer::start(script())).unwrap();
    let dir = tempdir();
    let serve = |name: &str| {
        with_config(
            serve_pg(
                dir.path(),
                &url,
                &server.base_url(),
                name,
                &["--ask-for-approval", "untrusted"],
            ),
            dir.path(),
        )
    };
    let a = Gateway::start(&mut serve("a"));
    let b = Gateway::start(&mut serve("b"));
    start_waiting(&a.url, "p");
    // B sees it waiting too (the listing is the store's)
    wait_session(&b.url, "p", Duration::from_secs(10), |v| {
        v["status"] == "awaiting_approval"
    });
    let (st, v) = call(
        &b.url,
        "POST",
        "/v1/sessions/p/approvals/c1",
        Some(json!({"decision": "allow", "scope": "once"})),
    );
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["result"], "queued", "A holds the session: {v}");
    wait_session(&a.url, "p", Duration::from_secs(30), |v| {
        v["status"] == "idle"
    });
    assert_eq!(effect_lines(dir.path(), "p"), 1);
    // the same decision again through either gateway: nothing more
    for g in [&a, &b] {
        let (st, v) = call(
            &g.url,
            "POST",
            "/v1/sessions/p/approvals/c1",
            Some(json!({"decision": "allow"})),
        );
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["result"], "duplicate", "{v}");
    }
    // and from the CLI on another "machine": through the session's inbox rows
    start_waiting(&a.url, "q");
    let o = with_config(Command::new(BIN), dir.path())
        .args([
            "sessions", "deny", "--store", &url, "q", "c1", "--reason", "not here",
        ])
        .env_remove("LAZARUS_SESSION_DIR")
        .env_remove("LAZARUS_STORE")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(said.contains("queued in its inbox"), "{said}");
    wait_session(&a.url, "q", Duration::from_secs(30), |v| {
        v["status"] == "idle"
    });
    assert_eq!(effect_lines(dir.path(), "q"), 0, "denied: never ran");
    let o = Command::new(BIN)
        .args(["sessions", "verify", "--store", &url, "p"])
        .env_remove("LAZARUS_SESSION_DIR")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert_eq!(effect_lines(dir.path(), "p"), 1);
}
