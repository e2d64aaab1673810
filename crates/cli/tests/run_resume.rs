//! `lazarus run` resume rules on hand-made crash states, signals, retries and text tool calls.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lazarus_agent::process::ProcessGroupRef;
use lazarus_session::SessionId;
use lazarus_session::record::{
    Item, OutcomeStatus, ProcessRef, Record, Response, ToolIntent, ToolStart, TurnStart,
};
use lazarus_session::{CreateOptions, LocalStore, Session, Status, Store};
use lazarus_testkit::{Reply, Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn lazarus(dir: &Path, ws: &Path, url: &str) -> Command {
    let mut c = Command::new(BIN);
    c.args(["run", "--session", "s"])
        .arg("--session-dir")
        .arg(dir)
        .arg("--workspace")
        .arg(ws)
        .args(["--base-url", url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// A session whose turn 1 asked for one call of `tool` with `args`, intent recorded.
fn session_with_call(store: &LocalStore, tool: &str, args: Value, idempotent: bool) -> Session {
    let mut s = store
        .create(CreateOptions {
            id: Some(SessionId::literal("s")),
            meta: None,
        })
        .unwrap();
    let inp = s.append_input("m1", "user", "go").unwrap();
    s.append(Record::TurnStart(TurnStart {
        turn: 1,
        prev_seq: None,
        inputs: vec![inp.seq],
    }))
    .unwrap();
    s.append(Record::Response(Response {
        turn: 1,
        items: vec![Item::ToolCall {
            call_id: "c1".into(),
            name: tool.into(),
            arguments: args.to_string(),
        }],
        usage: None,
        stop_reason: Some("tool_calls".into()),
        failure: None,
        model: None,
        provider_extra: None,
        attempts: vec![],
    }))
    .unwrap();
    s.append(Record::ToolIntent(ToolIntent {
        call_id: "c1".into(),
        turn: 1,
        tool: tool.into(),
        arguments: args.to_string(),
        idempotent,
        idempotency_key: "s:c1".into(),
        rerun_basis: None,
    }))
    .unwrap();
    s
}

fn final_text_server(rt: &tokio::runtime::Runtime) -> ScriptedServer {
    rt.block_on(ScriptedServer::start(Script::new([
        Step::after_tool_result("c1", ScriptedResponse::text("ok, finished")).repeat(),
    ])))
    .unwrap()
}

#[test]
fn started_idempotent_call_is_rerun_with_the_same_key() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = final_text_server(&rt);
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "remember the milk").unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let mut s = session_with_call(&store, "read_file", json!({"path": "notes.txt"}), true);
    s.append(Record::ToolStart(ToolStart {
        call_id: "c1".into(),
        process: None,
    }))
    .unwrap();
    drop(s);
    let out = lazarus(dir.path(), ws.path(), &server.base_url())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st = store.load(&SessionId::literal("s")).unwrap();
    let r = st.last_receipt.clone().unwrap();
    assert_eq!((r.calls_rerun, r.calls_in_doubt), (1, 0));
    let outcome = st.call("c1").unwrap().outcome.clone().unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Ok);
    assert!(outcome.result.contains("remember the milk"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 re-run"));
}

#[test]
fn intent_only_call_runs_once_and_not_started_is_not_in_doubt() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = final_text_server(&rt);
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    drop(session_with_call(
        &store,
        "shell",
        json!({"command": "echo once >> side.txt"}),
        false,
    ));
    let out = lazarus(dir.path(), ws.path(), &server.base_url())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let st = store.load(&SessionId::literal("s")).unwrap();
    let r = st.last_receipt.clone().unwrap();
    assert_eq!((r.calls_not_started, r.calls_in_doubt), (1, 0));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("side.txt")).unwrap(),
        "once\n"
    );
}

#[test]
fn in_doubt_call_kills_its_leftover_process_group_and_tells_the_model() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = final_text_server(&rt);
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    // The "leftover" of a killed runner: a shell in its own process group, still running.
    let mut leftover = Command::new("sh")
        .args(["-c", "sleep 60"])
        .process_group(0)
        .spawn()
        .unwrap();
    let group = ProcessGroupRef::of_leader(leftover.id() as i32).unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let mut s = session_with_call(&store, "shell", json!({"command": "sleep 60"}), false);
    s.append(Record::ToolStart(ToolStart {
        call_id: "c1".into(),
        process: Some(ProcessRef {
            pgid: group.pgid,
            start_time_ticks: group.start_time_ticks,
        }),
    }))
    .unwrap();
    drop(s);
    let out = lazarus(dir.path(), ws.path(), &server.base_url())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st = store.load(&SessionId::literal("s")).unwrap();
    let r = st.last_receipt.clone().unwrap();
    assert_eq!((r.calls_in_doubt, r.processes_terminated), (1, 1));
    assert_eq!(
        st.call("c1").unwrap().outcome.as_ref().unwrap().status,
        OutcomeStatus::InDoubt
    );
    let exit = leftover.wait().unwrap();
    assert!(!exit.success(), "the leftover group was terminated");
    let reqs = rt.block_on(async { server.requests() });
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].to_string().contains("Its effect is unknown"));
}

#[test]
fn sigterm_stops_cleanly_and_the_session_resumes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call(
                "c1",
                "shell",
                json!({"command": "echo started >> side.txt; sleep 30"}),
            ))
            .when(When::LastUserContains { text: "go".into() }),
            Step::after_tool_result("c1", ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut child = lazarus(dir.path(), ws.path(), &server.base_url())
        .args(["-p", "go", "--json"])
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !ws.path().join("side.txt").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "shell never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(t0.elapsed() < Duration::from_secs(15), "stopped promptly");
    let store = LocalStore::open(dir.path()).unwrap();
    let st = store.load(&SessionId::literal("s")).unwrap();
    assert_eq!(st.status(), Status::Stopped);
    assert_eq!(
        st.interrupted.as_ref().map(|i| i.reason.as_str()),
        Some("sigterm"),
        "the stop says the system stopped it (boot-resume resumes those, not a user's Ctrl-C)"
    );
    // run again: the interrupted call is in doubt (it started), the session finishes
    let out = lazarus(dir.path(), ws.path(), &server.base_url())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let st = store.load(&SessionId::literal("s")).unwrap();
    assert_eq!(st.status(), Status::Idle);
    assert_eq!(st.last_receipt.as_ref().unwrap().calls_in_doubt, 1);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("side.txt")).unwrap(),
        "started\n"
    );
}

#[test]
fn retries_are_recorded_and_text_tool_calls_recognised() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(Reply::rate_limited(0)).when(When::RequestNumber { n: 1 }),
            Step::reply(
                ScriptedResponse::text(
                    "I will list it.\n```json\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \".\"}}\n```",
                )
                .with_extra("x_vendor_field", json!({"kept": true})),
            )
            .when(When::LastUserContains { text: "list".into() }),
            Step::reply(ScriptedResponse::text("There is one file.")).when(When::LastToolResult {
                call_id: None,
                contains: Some("a.txt".into()),
            }),
        ])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "x").unwrap();
    let out = lazarus(dir.path(), ws.path(), &server.base_url())
        .args(["-p", "list the files"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = LocalStore::open(dir.path()).unwrap();
    let recs = store.records(&SessionId::literal("s"), 0, 100).unwrap();
    let first = recs.iter().find(|r| r.kind == "response").unwrap();
    assert_eq!(first.data["attempts"][0]["status"], 429, "{}", first.data);
    assert_eq!(first.data["provider_extra"]["x_vendor_field"]["kept"], true);
    let st = store.load(&SessionId::literal("s")).unwrap();
    assert_eq!(st.calls.len(), 1);
    assert_eq!(st.calls[0].name, "list_dir");
    assert_eq!(st.status(), Status::Idle);
}

#[test]
fn continue_resumes_the_latest_session_of_the_workspace() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::text("hi"),
        )
        .repeat()])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(BIN)
            .arg("run")
            .arg("--session-dir")
            .arg(dir.path())
            .arg("--workspace")
            .arg(ws.path())
            .args(["--base-url", &server.base_url()])
            .args(args)
            .output()
            .unwrap()
    };
    assert_eq!(
        run(&["--session", "old", "-p", "one"]).status.code(),
        Some(0)
    );
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(
        run(&["--session", "new", "-p", "two"]).status.code(),
        Some(0)
    );
    let out = run(&["--continue", "-p", "three"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("session new"));
    let store = LocalStore::open(dir.path()).unwrap();
    assert_eq!(
        store
            .load(&SessionId::literal("new"))
            .unwrap()
            .input_ids
            .len(),
        2
    );
    assert_eq!(
        store
            .load(&SessionId::literal("old"))
            .unwrap()
            .input_ids
            .len(),
        1
    );
    // nothing to do without a prompt, session or --continue: usage error, exit 2
    assert_eq!(run(&[]).status.code(), Some(2));
}
