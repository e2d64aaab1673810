//! `lazarus sessions show`: times, ids, tool-call states, the in-doubt notice, the resume
//! receipt with every count, and a damaged line reported after everything before it.

use std::path::Path;
use std::process::Command;

use lazarus_session::record::{
    Item, OutcomeStatus, Record, Response, ResumeReceipt, ToolIntent, ToolOutcome, ToolStart,
    TurnStart,
};
use lazarus_session::{CreateOptions, LocalStore, SessionId, Store};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn show(dir: &Path, id: &str) -> std::process::Output {
    Command::new(BIN)
        .args(["sessions", "show", "--session-dir"])
        .arg(dir)
        .arg(id)
        .output()
        .unwrap()
}

/// A session killed inside a non-idempotent shell call, then resumed: the call closed in
/// doubt, the receipt written.
fn resumed_session(store: &LocalStore) {
    let mut s = store
        .create(CreateOptions {
            id: Some(SessionId::literal("s")),
            meta: None,
        })
        .unwrap();
    let inp = s.append_input("m-42", "user", "deploy it").unwrap();
    s.append(Record::TurnStart(TurnStart {
        turn: 1,
        prev_seq: None,
        inputs: vec![inp.seq],
    }))
    .unwrap();
    s.append(Record::Response(Response {
        turn: 1,
        items: vec![
            Item::Text {
                text: "Deploying.".into(),
            },
            Item::ToolCall {
                call_id: "c1".into(),
                name: "shell".into(),
                arguments: r#"{"command":"./deploy"}"#.into(),
            },
        ],
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
        tool: "shell".into(),
        arguments: r#"{"command":"./deploy"}"#.into(),
        idempotent: false,
        idempotency_key: "s:c1".into(),
        rerun_basis: None,
    }))
    .unwrap();
    s.append(Record::ToolStart(ToolStart {
        call_id: "c1".into(),
        process: None,
    }))
    .unwrap();
    s.append(Record::Resume(ResumeReceipt {
        trigger: "run".into(),
        truncated_bytes: 17,
        truncated_saved_to: Some("s.jsonl.cut-20261203T140000Z".into()),
        records_replayed: 5,
        calls_in_doubt: 1,
        processes_terminated: 1,
        every_call_has_one_result: true,
        ..Default::default()
    }))
    .unwrap();
    s.append(Record::ToolOutcome(ToolOutcome {
        call_id: "c1".into(),
        status: OutcomeStatus::InDoubt,
        result: "IN DOUBT: the process was cut off; check before running it again".into(),
        exit_code: None,
        duration_ms: None,
    }))
    .unwrap();
}

#[test]
fn show_has_times_ids_call_states_in_doubt_and_the_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    resumed_session(&store);
    let o = show(dir.path(), "s");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let today = jiff::Timestamp::now().strftime("%Y-%m-%d").to_string();
    assert!(out.contains(&format!("-- {today} (UTC)")), "{out}");
    assert!(out.contains("> deploy it  [m-42 from user]"), "{out}");
    assert!(
        out.contains("-> shell {\"command\":\"./deploy\"}  (call c1)"),
        "{out}"
    );
    assert!(
        out.contains("call c1 shell: intent (not idempotent"),
        "{out}"
    );
    assert!(out.contains("call c1: started"), "{out}");
    assert!(out.contains("call c1: in_doubt  <-- IN DOUBT"), "{out}");
    assert!(out.contains("IN DOUBT: the process was cut off"), "{out}");
    assert!(
        out.contains("RESUMED (run): 5 records replayed; calls: 0 reused, 0 re-run, 1 in doubt, 0 not started; 1 process group(s) terminated"),
        "{out}"
    );
    assert!(
        out.contains("17 bytes of crash debris cut (saved to s.jsonl.cut-20261203T140000Z)"),
        "{out}"
    );
    assert!(out.contains("title: deploy it"), "{out}");
}

#[test]
fn show_of_a_session_with_a_damaged_line_shows_what_is_before_it_and_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    resumed_session(&store);
    // flip one byte inside record 3 (the response): a middle record, so corruption
    let path = dir.path().join("s.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            bytes
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    let target = starts[3] + 20; // line 4 = record seq 3
    bytes[target] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let o = show(dir.path(), "s");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("> deploy it"),
        "records before the damage: {out}"
    );
    assert!(out.contains("turn 1 starts"), "{out}");
    assert!(
        !out.contains("Deploying."),
        "the damaged record is not shown: {out}"
    );
    assert!(out.contains("DAMAGED after seq 2"), "{out}");
    assert!(out.contains("line 4"), "where: {out}");
    assert!(
        out.contains("lazarus sessions repair s"),
        "what to do: {out}"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("damaged after seq 2"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn rename_changes_the_title_of_list_and_show_and_clear_brings_the_first_input_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    resumed_session(&store);
    let run = |args: &[&str]| {
        let o = Command::new(BIN)
            .args(["sessions", "--session-dir"])
            .arg(dir.path())
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).to_string(),
        )
    };
    assert_eq!(run(&["rename", "s", "Deploy v2"]).0, Some(0));
    let (_, list) = run(&["list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(list.trim()).unwrap();
    assert_eq!(v["title"], "Deploy v2", "{list}");
    assert!(String::from_utf8_lossy(&show(dir.path(), "s").stdout).contains("title: Deploy v2"));
    let (code, out) = run(&["rename", "s", "--clear", "--json"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()["title"],
        "deploy it"
    );
    // a mistake: nothing written
    let before = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(run(&["rename", "nope", "x"]).0, Some(1));
    assert_eq!(run(&["rename", "s", "   "]).0, Some(1));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), before);
}

/// Copies the sessions the real frameworks wrote through the `lazarus` package
/// (`crates/session/tests/fixtures/host`, made by `scripts/python-fixtures.py`).
fn host_fixtures() -> tempfile::TempDir {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../session/tests/fixtures/host");
    let d = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), d.path().join(e.file_name())).unwrap();
    }
    d
}

/// A LangGraph thread: each record's values decoded as JSON, then the thread as it is now,
/// each step with its node, channels, writes and interrupts; a value outside the allowlist
/// (someone else's `os.system`) labelled as it is, and the command succeeds.
#[test]
fn a_langgraph_thread_shows_its_steps_with_values_as_json() {
    let d = host_fixtures();
    let out = show(
        d.path(),
        "h.user_42_weather.fa0736964c72c6c2605d483556f23d98",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "thread user:42/weather now: 10 checkpoint(s)",
        "step 0 (loop) after __start__",
        "step 1 (loop) after agent",
        "in subgraph search:",
        "writes of approve against checkpoint",
        r#""content":"Is it sunny in Paris?""#,
        r#""content":"Sent (yes).""#,
        r#"facts = {"when":"2026-12-02","id":"01234567-89ab-cdef-0123-456789abcdef"}"#,
        r#"INTERRUPTED: [{"$type":"langgraph.types.Interrupt","value":{"question":"Send the answer?""#,
        r#""$not_decoded":"it constructs os.system, which is outside the allowlist""#,
        r#""$not_decoded":"it constructs __main__.Reading, which is outside the allowlist""#,
    ] {
        assert!(text.contains(needle), "{needle}:\n{text}");
    }
    assert!(!text.contains("\"b64\""), "a raw blob:\n{text}");
}

/// An Agents SDK session: its items as a conversation, and the call its program announced
/// without an outcome named in doubt.
#[test]
fn an_agents_session_shows_a_conversation_and_its_call_in_doubt() {
    let d = host_fixtures();
    let out = show(d.path(), "chat-paris");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for needle in [
        "> What is the weather in Paris?",
        r#"call get_weather {"city":"Paris"}  [call_w]"#,
        "= sunny, 21 C  [call_w]",
        "< It is sunny, 21 C.",
        "> Book a table outside <b>tonight</b>.",
        r#"CALL book_table {"when":"20:00"} announced  [call_b]"#,
        "history now: 5 item(s)",
        r#"IN DOUBT: book_table {"when":"20:00"}  [call_b, announced at #3] may have run"#,
        "status: in_doubt",
    ] {
        assert!(text.contains(needle), "{needle}:\n{text}");
    }
}
