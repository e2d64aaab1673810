//! A local gateway holds a session; `lazarus sessions send` from another process cannot take
//! the writer, so it puts the message in the session's inbox — and the gateway notices it,
//! records it once and answers it, with no HTTP call at all.

mod serve_common;

use std::process::Command;
use std::time::Duration;

use lazarus_session::{LocalStore, SessionId, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::json;
use serve_common::*;

#[test]
fn sessions_send_to_a_session_a_gateway_holds_is_answered_by_the_gateway() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::text("pong from the gateway"))
                .when(When::LastUserContains {
                    text: "ping".into(),
                })
                .repeat(),
            Step::reply(ScriptedResponse::text("hello")).repeat(),
        ])))
        .unwrap();
    let dir = tempdir();
    let g = Gateway::start(&mut serve_cmd(dir.path(), &server.base_url(), &[]));
    let (st, v) = call(&g.url, "POST", "/v1/sessions", Some(json!({"id": "held"})));
    assert_eq!(st, 201, "{v}");
    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/held/messages",
        Some(json!({"message_id": "m1", "text": "hi"})),
    );
    assert_eq!(st, 202, "{v}");
    wait_session(&g.url, "held", Duration::from_secs(30), |v| {
        v["status"] == "idle" && v["turns"] == 1
    });

    // The gateway keeps the session open: another process cannot write it.
    let sessions = dir.path().join("sessions");
    let out = Command::new(BIN)
        .args(["sessions", "send", "--session-dir"])
        .arg(&sessions)
        .args(["--message-id", "from-cli", "held", "ping"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("queued in the inbox of held"), "{said}");

    wait_session(&g.url, "held", Duration::from_secs(30), |v| {
        v["status"] == "idle" && v["turns"] == 2
    });
    let store = LocalStore::open(&sessions).unwrap();
    let id = SessionId::literal("held");
    let records = store.records(&id, 0, 1000).unwrap();
    let from_cli: Vec<_> = records
        .iter()
        .filter(|r| r.kind == "input" && r.data["input_id"] == "from-cli")
        .collect();
    assert_eq!(from_cli.len(), 1, "recorded once");
    let answer = records
        .iter()
        .filter(|r| r.seq > from_cli[0].seq && r.kind == "response")
        .any(|r| r.data.to_string().contains("pong from the gateway"));
    assert!(answer, "the gateway answered the message from the inbox");
    assert!(store.inbox(&id, 10).unwrap().is_empty(), "inbox drained");
    drop(g);
    rt.block_on(server.shutdown());
}

/// `--idle-close`: an idle session is closed (its writer lock released), a message sent by
/// `lazarus sessions send` meanwhile is recorded directly, and the gateway — told by the
/// session's doorbell — reopens the session and answers it.
#[test]
fn an_idle_session_is_closed_and_reopened_by_the_next_message() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::text("welcome back"))
                .when(When::LastUserContains {
                    text: "later".into(),
                })
                .repeat(),
            Step::reply(ScriptedResponse::text("hello")).repeat(),
        ])))
        .unwrap();
    let dir = tempdir();
    let g = Gateway::start(&mut serve_cmd(
        dir.path(),
        &server.base_url(),
        &["--idle-close", "1s"],
    ));
    let (st, v) = call(&g.url, "POST", "/v1/sessions", Some(json!({"id": "nap"})));
    assert_eq!(st, 201, "{v}");
    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/nap/messages",
        Some(json!({"message_id": "m1", "text": "hi"})),
    );
    assert_eq!(st, 202, "{v}");
    let sessions = dir.path().join("sessions");
    let lock = lazarus_ledger::lock_path(&sessions, "nap");
    // closed after a second idle: nobody holds its writer lock
    let t0 = std::time::Instant::now();
    loop {
        let idle = store_turns(&sessions) == 1;
        if idle && lazarus_ledger::lock::held_by(&lock).is_none() {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "never closed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = Command::new(BIN)
        .args(["sessions", "send", "--session-dir"])
        .arg(&sessions)
        .args(["--message-id", "m2", "nap", "see you later"])
        .output()
        .unwrap();
    assert!(out.status.success());
    // recorded at once (nobody held it), then answered by the gateway
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "4");
    let t0 = std::time::Instant::now();
    while store_turns(&sessions) < 2 {
        assert!(t0.elapsed() < Duration::from_secs(30), "not answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let store = LocalStore::open(&sessions).unwrap();
    let st = store.load(&SessionId::literal("nap")).unwrap();
    assert!(!st.owes_work());
    assert!(
        store
            .records(&SessionId::literal("nap"), 0, 100)
            .unwrap()
            .iter()
            .any(|r| r.kind == "response" && r.data.to_string().contains("welcome back"))
    );
    drop(g);
    rt.block_on(server.shutdown());
}

/// Turns answered in session `nap` (read without the writer).
fn store_turns(sessions: &std::path::Path) -> usize {
    let store = LocalStore::open(sessions).unwrap();
    store
        .records(&SessionId::literal("nap"), 0, 1000)
        .map(|r| r.iter().filter(|r| r.kind == "response").count())
        .unwrap_or(0)
}
