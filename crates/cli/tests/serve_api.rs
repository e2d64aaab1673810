//! `lazarus serve` over real HTTP: every route, auth refusals, malformed and oversized
//! bodies, hostile ids, duplicate message ids under concurrent retries, SSE resume with
//! Last-Event-ID, readiness and sd_notify, the loopback rule.

mod serve_common;

use std::time::Duration;

use lazarus_session::{LocalStore, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};
use serde_json::{Value, json};
use serve_common::*;

fn model(rt: &tokio::runtime::Runtime) -> ScriptedServer {
    rt.block_on(ScriptedServer::start(Script::new([Step::reply(
        ScriptedResponse::text("Hello from the model."),
    )
    .repeat()])))
        .unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn routes_auth_limits_dedup_and_stream() {
    let rt = rt();
    let server = model(&rt);
    let dir = tempdir();
    let g = Gateway::start(&mut serve_cmd(
        dir.path(),
        &server.base_url(),
        &["--max-body-bytes", "65536", "--max-text-bytes", "4096"],
    ));
    let url = g.url.as_str();

    // health, readiness, metrics need no token
    assert_eq!(get(url, "/healthz", None).unwrap().0, 200);
    assert_eq!(get(url, "/readyz", None).unwrap().0, 200);

    // auth
    for token in [None, Some("wrong"), Some("test-token-012345678")] {
        let (st, body) = get(url, "/v1/sessions", token).unwrap();
        assert_eq!(st, 401, "{token:?}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["error"]["code"], "unauthorized");
    }
    let (st, _) = request(
        url,
        "GET",
        "/v1/sessions",
        None,
        &[("Authorization", "Basic abc")],
        None,
    )
    .unwrap();
    assert_eq!(st, 401);

    // create
    let (st, v) = call(url, "POST", "/v1/sessions", Some(json!({"id": "alpha"})));
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["id"], "alpha");
    assert!(
        v["workspace"]
            .as_str()
            .unwrap()
            .ends_with("workspaces/alpha")
    );
    let (st, v) = call(url, "POST", "/v1/sessions", Some(json!({"id": "alpha"})));
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (409, Some("already_exists"))
    );
    let (st, v) = call(url, "POST", "/v1/sessions", None);
    assert_eq!(st, 201, "{v}");
    let generated = v["id"].as_str().unwrap().to_string();
    let (st, v) = call(
        url,
        "POST",
        "/v1/sessions",
        Some(json!({"id": "ws1", "workspace": "shared/one", "system_prompt": "Be brief."})),
    );
    assert_eq!(st, 201, "{v}");
    assert!(
        v["workspace"]
            .as_str()
            .unwrap()
            .ends_with("workspaces/shared/one")
    );

    // hostile workspaces
    for ws in ["../outside", "/etc", "a/../../b", ""] {
        let (st, v) = call(url, "POST", "/v1/sessions", Some(json!({"workspace": ws})));
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (400, Some("bad_workspace")),
            "{ws}: {v}"
        );
    }
    // hostile ids, in the body and in the path
    for id in [
        "../x",
        "a/b",
        ".hidden",
        "-rf",
        "with space",
        "",
        "é",
        &"x".repeat(200),
    ] {
        let (st, v) = call(url, "POST", "/v1/sessions", Some(json!({"id": id})));
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (400, Some("invalid_id")),
            "{id:?}: {v}"
        );
    }
    for p in [
        "/v1/sessions/..%2F..%2Fetc%2Fpasswd",
        "/v1/sessions/%2e%2e",
        "/v1/sessions/a%00b/records",
        "/v1/sessions/%20x/messages",
    ] {
        let method = if p.ends_with("messages") {
            "POST"
        } else {
            "GET"
        };
        let (st, v) = call(
            url,
            method,
            p,
            Some(json!({"text": "x"})).filter(|_| method == "POST"),
        );
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (400, Some("invalid_id")),
            "{p}: {v}"
        );
    }
    assert!(!dir.path().join("etc").exists());
    let (st, v) = call(url, "GET", "/v1/sessions/nope", None);
    assert_eq!((st, v["error"]["code"].as_str()), (404, Some("not_found")));
    let (st, v) = call(
        url,
        "POST",
        "/v1/sessions/nope/messages",
        Some(json!({"text": "hi"})),
    );
    assert_eq!((st, v["error"]["code"].as_str()), (404, Some("not_found")));
    let (st, _) = call(url, "GET", "/v1/nothing-here", None);
    assert_eq!(st, 404);
    let (st, v) = call(url, "DELETE", "/v1/sessions/alpha", None);
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (405, Some("method_not_allowed"))
    );

    // malformed JSON and unknown fields
    for body in [
        "{",
        "[]",
        "{\"text\": 5}",
        "{\"txt\": \"a\"}",
        "\u{0}\u{1}",
        "{\"text\":\"a\",\"extra\":1}",
        "",
    ] {
        let (st, text) = request(
            url,
            "POST",
            "/v1/sessions/alpha/messages",
            Some(TOKEN),
            &[],
            Some(body.as_bytes()),
        )
        .unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (400, Some("malformed_json")),
            "{body:?}: {v}"
        );
    }
    // oversized body and text
    let big = json!({"text": "x".repeat(100_000)}).to_string();
    let (st, text) = request(
        url,
        "POST",
        "/v1/sessions/alpha/messages",
        Some(TOKEN),
        &[],
        Some(big.as_bytes()),
    )
    .unwrap();
    assert_eq!(st, 413, "{text}");
    assert!(text.contains("body_too_large"), "{text}");
    let (st, v) = call(
        url,
        "POST",
        "/v1/sessions/alpha/messages",
        Some(json!({"text": "y".repeat(5000)})),
    );
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (413, Some("text_too_large"))
    );
    let (st, v) = call(
        url,
        "POST",
        "/v1/sessions/alpha/messages",
        Some(json!({"text": "hi", "message_id": "a\nb"})),
    );
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (400, Some("bad_input_id"))
    );
    // nothing of that reached the ledger
    let store = LocalStore::open(&dir.path().join("sessions")).unwrap();
    assert_eq!(store.load("alpha").unwrap().last_seq, 0);

    // a message: 202 once durable, 200 duplicate after; the session runs until idle
    let (st, v) = call(
        url,
        "POST",
        "/v1/sessions/alpha/messages",
        Some(json!({"message_id": "m1", "text": "Say hello"})),
    );
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["duplicate"], false);
    let seq = v["seq"].as_u64().unwrap();
    let (st, v) = call(
        url,
        "POST",
        "/v1/sessions/alpha/messages",
        Some(json!({"message_id": "m1", "text": "Say hello"})),
    );
    assert_eq!(
        (st, v["seq"].as_u64(), v["duplicate"].as_bool()),
        (200, Some(seq), Some(true))
    );
    let s = wait_session(url, "alpha", Duration::from_secs(20), |v| {
        v["status"] == "idle" && v["turns"] == 1
    });
    assert_eq!(s["pending_inputs"], json!([]));
    assert_eq!(s["open_tool_calls"], json!([]));

    // concurrent retries of one message id: one input
    let handles: Vec<_> = (0..16)
        .map(|_| {
            let url = url.to_string();
            std::thread::spawn(move || {
                call(
                    &url,
                    "POST",
                    "/v1/sessions/alpha/messages",
                    Some(json!({"message_id": "m2", "text": "again"})),
                )
            })
        })
        .collect();
    let results: Vec<(u16, Value)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let accepted = results.iter().filter(|(st, _)| *st == 202).count();
    assert_eq!(accepted, 1, "{results:?}");
    let seqs: std::collections::HashSet<u64> = results
        .iter()
        .map(|(_, v)| v["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs.len(), 1, "{results:?}");
    assert!(
        results
            .iter()
            .all(|(st, v)| *st == 202 || (*st == 200 && v["duplicate"] == true))
    );
    wait_session(url, "alpha", Duration::from_secs(20), |v| {
        v["status"] == "idle" && v["turns"] == 2
    });
    let st = store.load("alpha").unwrap();
    assert_eq!(st.input_ids.len(), 2);

    // records with after/limit
    let (code, v) = call(
        url,
        "GET",
        "/v1/sessions/alpha/records?after=1&limit=2",
        None,
    );
    assert_eq!(code, 200);
    let recs = v["records"].as_array().unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0]["seq"], 2);
    assert_eq!(v["next_after"], 3);
    let (code, v) = call(url, "GET", "/v1/sessions/alpha/records?after=x", None);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (400, Some("bad_query"))
    );

    // SSE: everything from the start, then resume after an id
    let total = st.last_seq;
    let evs = sse_events(
        url,
        "/v1/sessions/alpha/stream",
        None,
        total as usize,
        Duration::from_secs(10),
    );
    let ids: Vec<u64> = evs.iter().map(|e| e.0).collect();
    assert_eq!(ids, (1..=total).collect::<Vec<_>>());
    assert_eq!(evs[0].1["kind"], "input");
    let evs = sse_events(
        url,
        "/v1/sessions/alpha/stream?after=1",
        Some(3),
        2,
        Duration::from_secs(10),
    );
    assert_eq!(
        evs.iter().map(|e| e.0).collect::<Vec<_>>(),
        vec![4, 5],
        "Last-Event-ID wins over ?after"
    );
    // live: a stream opened at the end sees the next message's records as they land
    let url2 = url.to_string();
    let live = std::thread::spawn(move || {
        sse_events(
            &url2,
            "/v1/sessions/alpha/stream",
            Some(total),
            3,
            Duration::from_secs(20),
        )
    });
    std::thread::sleep(Duration::from_millis(300));
    let (code, _) = call(
        url,
        "POST",
        "/v1/sessions/alpha/messages",
        Some(json!({"message_id": "m3", "text": "live"})),
    );
    assert_eq!(code, 202);
    let evs = live.join().unwrap();
    assert_eq!(
        evs.iter().map(|e| e.0).collect::<Vec<_>>(),
        vec![total + 1, total + 2, total + 3]
    );
    assert_eq!(evs[0].1["data"]["input_id"], "m3");
    let (code, _) = request(
        url,
        "GET",
        "/v1/sessions/alpha/stream",
        Some(TOKEN),
        &[("Last-Event-ID", "abc")],
        None,
    )
    .unwrap();
    assert_eq!(code, 400);
    wait_session(url, "alpha", Duration::from_secs(20), |v| {
        v["status"] == "idle" && v["turns"] == 3
    });

    // events: resume of a finished session changes nothing
    let before = store.load("alpha").unwrap().last_seq;
    let (code, v) = call(
        url,
        "POST",
        "/v1/sessions/alpha/events",
        Some(json!({"type": "resume", "reason": "test", "idempotency_key": "k1"})),
    );
    assert_eq!((code, v["result"].as_str()), (200, Some("finished")), "{v}");
    assert_eq!(store.load("alpha").unwrap().last_seq, before);
    let (code, v) = call(
        url,
        "POST",
        "/v1/sessions/alpha/events",
        Some(json!({"type": "reboot"})),
    );
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (400, Some("unsupported_event"))
    );
    let (code, _) = call(
        url,
        "POST",
        "/v1/sessions/nope/events",
        Some(json!({"type": "resume"})),
    );
    assert_eq!(code, 404);

    // fork
    let (code, v) = call(
        url,
        "POST",
        "/v1/sessions/alpha/fork",
        Some(json!({"at_turn": 1, "id": "alpha-child"})),
    );
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["parent"], "alpha");
    let (code, v) = call(
        url,
        "POST",
        "/v1/sessions/alpha/fork",
        Some(json!({"at_turn": 1, "id": "alpha-child"})),
    );
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (409, Some("already_exists"))
    );
    let (code, v) = call(
        url,
        "POST",
        "/v1/sessions/alpha/fork",
        Some(json!({"at_turn": 99})),
    );
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (409, Some("bad_fork_point"))
    );
    let (code, v) = call(
        url,
        "POST",
        "/v1/sessions/alpha/fork",
        Some(json!({"at_turn": 1, "id": "../evil"})),
    );
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (400, Some("invalid_id"))
    );
    let (code, v) = call(url, "GET", "/v1/sessions/alpha-child", None);
    assert_eq!(code, 200);
    assert_eq!(v["turns"], 1);
    assert_eq!(v["parent"]["id"], "alpha");

    // listing
    let (code, v) = call(url, "GET", "/v1/sessions", None);
    assert_eq!(code, 200);
    let ids: Vec<&str> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    for id in ["alpha", "alpha-child", "ws1", generated.as_str()] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    let child = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "alpha-child")
        .unwrap();
    assert_eq!(child["parent"], "alpha");

    // metrics
    let (code, text) = get(url, "/metrics", None).unwrap();
    assert_eq!(code, 200);
    for needle in [
        "lazarus_append_fsync_seconds_bucket",
        "lazarus_sessions{status=\"idle\"}",
        "lazarus_model_requests_total{result=\"ok\"} 3",
        "lazarus_appends_total{kind=\"input\"} 3",
        "lazarus_http_requests_total{route=\"/v1/sessions/{id}/messages\",status=\"202\"} 3",
        "lazarus_http_requests_total{route=\"/v1/sessions\",status=\"401\"}",
        // known series exist from the start, at zero
        "lazarus_resumes_total{trigger=\"gateway-start\"} 0",
        "lazarus_tool_calls_total{outcome=\"in_doubt\"} 0",
    ] {
        assert!(text.contains(needle), "{needle} missing in\n{text}");
    }
    for id in ["alpha", "alpha-child"] {
        let r = lazarus_ledger::verify_file(&store.path_of(id).unwrap(), store.ledger_options())
            .unwrap();
        assert!(r.is_clean(), "{id}: {:?}", r.problems);
    }
    rt.block_on(server.shutdown());
}

#[test]
fn readiness_after_recovery_scan_and_sd_notify() {
    use std::os::unix::net::UnixDatagram;
    let rt = rt();
    let server = model(&rt);
    let dir = tempdir();
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut cmd = serve_cmd(dir.path(), &server.base_url(), &[]);
    cmd.env("NOTIFY_SOCKET", &sock_path);
    let mut g = Gateway::spawn(&mut cmd);
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).unwrap();
    let msg = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(msg.starts_with("READY=1"), "{msg}");
    // READY=1 is sent only after the scan: /readyz answers 200 at once
    assert_eq!(get(&g.url, "/readyz", None).unwrap().0, 200);
    assert!(g.ready_line.starts_with("ready:"), "{}", g.ready_line);
    // SIGTERM: clean exit 0
    let st = g.term();
    assert_eq!(st.code(), Some(0));
    rt.block_on(server.shutdown());
}

#[test]
fn refuses_non_loopback_without_allow_remote() {
    let dir = tempdir();
    let out = std::process::Command::new(BIN)
        .args(["serve", "--listen", "0.0.0.0:0", "--session-dir"])
        .arg(dir.path().join("sessions"))
        .arg("--workspace-root")
        .arg(dir.path().join("ws"))
        .env("LAZARUS_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--allow-remote"), "{err}");
}

#[test]
fn token_file_created_private() {
    use std::os::unix::fs::PermissionsExt;
    let rt = rt();
    let server = model(&rt);
    let dir = tempdir();
    let mut cmd = serve_cmd(dir.path(), &server.base_url(), &[]);
    cmd.env_remove("LAZARUS_TOKEN");
    let g = Gateway::start(&mut cmd);
    let tf = dir.path().join("gateway.token");
    let token = std::fs::read_to_string(&tf).unwrap().trim().to_string();
    assert_eq!(
        std::fs::metadata(&tf).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(get(&g.url, "/v1/sessions", Some(&token)).unwrap().0, 200);
    assert_eq!(get(&g.url, "/v1/sessions", Some(TOKEN)).unwrap().0, 401);
    drop(g);
    rt.block_on(server.shutdown());
}
