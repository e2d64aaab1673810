//! Steering: `lazarus sessions send` to a session that a running `lazarus run` holds goes
//! through the session's inbox, and that run records and answers it — once.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lazarus_session::{LocalStore, SessionId, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

/// Waits for `path` to appear while `child` runs; on a timeout or an early exit, fails with
/// the child's output.
fn wait_for(path: &Path, child: &mut std::process::Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        let exited = child.try_wait().unwrap().is_some();
        if exited || Instant::now() > deadline {
            let _ = child.kill();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("no {what} (exited early: {exited}); the run said:\n{err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn send(dir: &Path, text: &str, message_id: &str) -> std::process::Output {
    Command::new(BIN)
        .args(["sessions", "send", "--session-dir"])
        .arg(dir)
        .args(["--message-id", message_id, "s", text])
        .output()
        .unwrap()
}

#[test]
fn a_message_sent_to_a_running_session_is_answered_by_that_run_once() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::text("banana it is")).when(When::LastUserContains {
                text: "banana".into(),
            }),
            Step::after_tool_result("c1", ScriptedResponse::text("slept well")),
            Step::reply(ScriptedResponse::tool_call(
                "c1",
                "shell",
                json!({"command": "touch started && while [ ! -e go ]; do sleep 0.05; done"}),
            ))
            .when(When::RequestNumber { n: 1 }),
        ])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut run = Command::new(BIN)
        .args(["run", "--session", "s", "--session-dir"])
        .arg(dir.path())
        .arg("--workspace")
        .arg(ws.path())
        .args(["--base-url", &server.base_url(), "-p", "take a nap"])
        .env("OPENAI_API_KEY", "test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The run is inside its tool call: it holds the session.
    wait_for(&ws.path().join("started"), &mut run, "tool start");
    let first = send(dir.path(), "also say banana", "steer-1");
    assert!(
        first.status.success(),
        "send: {}",
        String::from_utf8_lossy(&first.stderr)
    );
    let said = String::from_utf8_lossy(&first.stdout);
    assert!(said.contains("queued in the inbox of s"), "{said}");
    // A double send (a retry) is the same message.
    let again = send(dir.path(), "also say banana", "steer-1");
    assert!(again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("already"),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
    std::fs::write(ws.path().join("go"), "").unwrap();
    let out = run.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("banana it is"),
        "the run answered: {stdout}"
    );

    let store = LocalStore::open(dir.path()).unwrap();
    let id = SessionId::literal("s");
    let st = store.load(&id).unwrap();
    let steered: Vec<_> = store
        .records(&id, 0, 1000)
        .unwrap()
        .into_iter()
        .filter(|r| r.kind == "input" && r.data["input_id"] == "steer-1")
        .collect();
    assert_eq!(steered.len(), 1, "recorded once");
    assert!(!st.owes_work(), "every input answered");
    assert!(store.inbox(&id, 10).unwrap().is_empty(), "inbox drained");
    assert!(
        !dir.path().join("s.inbox").exists(),
        "the empty spool directory is removed"
    );
    // The model saw the steering message.
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.to_string().contains("also say banana"))
    );
}

#[test]
fn a_message_to_a_session_nobody_holds_is_recorded_directly() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    drop(
        store
            .create(lazarus_session::CreateOptions {
                id: Some(SessionId::literal("s")),
                meta: None,
            })
            .unwrap(),
    );
    let out = send(dir.path(), "hello", "m1");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    // the doorbell for a gateway serving the directory: an empty inbox
    let bell = dir.path().join("s.inbox");
    assert!(bell.is_dir() && std::fs::read_dir(&bell).unwrap().next().is_none());
    // the next writer drains nothing and takes the doorbell down
    let mut s = store.open(&SessionId::literal("s")).unwrap();
    assert!(s.drain_inbox().unwrap().is_empty());
    assert!(!bell.exists());
}
