//! The native-ledger fixtures (`tests/fixtures/lazarus/*.jsonl`) are written by the real
//! code: records of the session crate, checked against a replayed state as the store checks
//! them, framed (seq, CRC-32C) by the ledger's own encoder, with fixed timestamps. This test
//! regenerates them and insists the committed files are exactly that
//! (`LAZARUS_BLESS=1 cargo test -p lazarus-boot-resume --test lazarus_fixtures` rewrites them).
//!
//! It also checks the boot-resume classifier against the session crate's own rule for
//! "does this session owe work", on every prefix of the shared histories
//! (`lazarus_session::conformance::owes_work_histories`).

use std::path::PathBuf;

use lazarus_boot_resume::tail::{TailOptions, classify_file};
use lazarus_boot_resume::{Format, Verdict};
use lazarus_ledger::frame::encode_line;
use lazarus_session::conformance::owes_work_histories;
use lazarus_session::record::*;
use lazarus_session::{FORMAT, SessionState};
use serde_json::json;

const ID: &str = "0199a3c2-7e10-7d3a-9b42-1e6c0d8f2a71";

fn ts(i: usize) -> String {
    format!("2026-09-20T08:00:{:02}.000Z", i.min(59))
}

/// The bytes of a session holding `records` (after the header), each checked against the
/// state first, exactly as a store writes them.
fn ledger(records: &[Record]) -> Vec<u8> {
    let mut header = lazarus_ledger::Header::new(FORMAT, ID);
    header.created_at = ts(0);
    header.meta = Some(json!({"workspace": "/home/dana/src/inventory-api"}));
    if records.iter().any(|r| matches!(r, Record::Fork(_))) {
        // a fork's header names its parent
        header.parent = Some(lazarus_ledger::Parent {
            id: "p".into(),
            seq: 1,
        });
    }
    let mut state = SessionState::new(header.clone());
    let mut out = Vec::new();
    let mut line = Vec::new();
    encode_line(
        &mut line,
        0,
        &ts(0),
        "header",
        &serde_json::to_vec(&header).unwrap(),
    );
    out.extend_from_slice(&line);
    for (i, rec) in records.iter().enumerate() {
        let seq = i as u64 + 1;
        state
            .check(rec)
            .unwrap_or_else(|e| panic!("fixture record {seq} is not a valid session: {e}"));
        encode_line(
            &mut line,
            seq,
            &ts(i + 1),
            rec.kind(),
            &rec.data_json().unwrap(),
        );
        out.extend_from_slice(&line);
        state.apply(seq, rec.clone());
    }
    out
}

fn input(id: &str, text: &str) -> Record {
    Record::Input(Input {
        input_id: id.into(),
        source: "user".into(),
        text: text.into(),
    })
}

fn turn(t: u64, prev: Option<u64>, inputs: Vec<u64>) -> Record {
    Record::TurnStart(TurnStart {
        turn: t,
        prev_seq: prev,
        inputs,
    })
}

fn answer(t: u64, items: Vec<Item>, failure: Option<Failure>) -> Record {
    Record::Response(Response {
        turn: t,
        items,
        usage: None,
        stop_reason: Some(if failure.is_some() { "error" } else { "stop" }.into()),
        failure,
        model: Some("m".into()),
        provider_extra: None,
        attempts: vec![],
    })
}

fn text(t: &str) -> Item {
    Item::Text { text: t.into() }
}

fn call() -> Item {
    Item::ToolCall {
        call_id: "c1".into(),
        name: "shell".into(),
        arguments: r#"{"command":"npm test"}"#.into(),
    }
}

fn intent() -> Record {
    Record::ToolIntent(ToolIntent {
        call_id: "c1".into(),
        turn: 1,
        tool: "shell".into(),
        arguments: r#"{"command":"npm test"}"#.into(),
        idempotent: false,
        idempotency_key: format!("{ID}:c1"),
        rerun_basis: None,
    })
}

fn start() -> Record {
    Record::ToolStart(ToolStart {
        call_id: "c1".into(),
        process: None,
    })
}

fn outcome() -> Record {
    Record::ToolOutcome(ToolOutcome {
        call_id: "c1".into(),
        status: OutcomeStatus::Ok,
        result: "1 failing\n[exit code 1]".into(),
        exit_code: Some(1),
        duration_ms: Some(900),
    })
}

/// input → turn 1 (a shell call) → intent → start → outcome → turn 2 (text).
fn tool_turn() -> Vec<Record> {
    vec![
        input("in-1", "Fix the failing date test."),
        turn(1, None, vec![1]),
        answer(1, vec![text("Running tests."), call()], None),
        intent(),
        start(),
        outcome(),
    ]
}

fn finished() -> Vec<Record> {
    let mut r = tool_turn();
    r.push(turn(2, Some(2), vec![]));
    r.push(answer(2, vec![text("Fixed.")], None));
    r
}

/// Every native fixture: name and records.
fn fixtures() -> Vec<(&'static str, Vec<u8>)> {
    let failure = |message: &str, transient: bool| {
        Some(Failure {
            message: message.into(),
            transient,
            status: None,
        })
    };
    let mut pending = finished();
    pending.push(input("in-2", "Now add a regression test."));
    let mut control = finished();
    control.push(Record::Control(Control {
        input_id: "r-1".into(),
        action: "resume".into(),
        reason: Some("operator".into()),
    }));
    let mut stopped = tool_turn()[..4].to_vec();
    stopped.push(Record::Interrupted(Interrupted {
        reason: "sigint".into(),
        turn: None,
    }));
    let mut restarted = tool_turn()[..5].to_vec();
    restarted.push(Record::Interrupted(Interrupted {
        reason: "sigterm".into(),
        turn: None,
    }));
    let mut torn = ledger(&tool_turn());
    // the outcome line cut mid-write
    let cut = torn.len() - 40;
    torn.truncate(cut);
    vec![
        ("finished", ledger(&finished())),
        ("pending-input", ledger(&pending)),
        ("control-resume", ledger(&control)),
        ("interrupted-stream", ledger(&tool_turn()[..2])),
        ("interrupted-tool-call", ledger(&tool_turn()[..3])),
        ("tool-intent", ledger(&tool_turn()[..4])),
        ("interrupted-after-tool-result", ledger(&tool_turn())),
        (
            "failed-transient",
            ledger(&[
                input("in-1", "Fix the failing date test."),
                turn(1, None, vec![1]),
                answer(
                    1,
                    vec![],
                    failure("HTTP 503 from the provider after 4 attempts", true),
                ),
            ]),
        ),
        (
            "failed",
            ledger(&[
                input("in-1", "Fix the failing date test."),
                turn(1, None, vec![1]),
                answer(1, vec![], failure("HTTP 401: invalid api key", false)),
            ]),
        ),
        ("user-stopped", ledger(&stopped)),
        ("restart-interrupted-tool-call", ledger(&restarted)),
        ("header-only", ledger(&[])),
        ("torn-last-line", torn),
    ]
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lazarus")
}

#[test]
fn native_fixtures_are_what_the_real_code_writes() {
    let bless = std::env::var_os("LAZARUS_BLESS").is_some();
    for (name, bytes) in fixtures() {
        let path = dir().join(format!("{name}.jsonl"));
        if bless {
            std::fs::write(&path, &bytes).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_default();
        assert!(
            committed == bytes,
            "{name}.jsonl differs from what the real code writes; rerun with LAZARUS_BLESS=1 and review the diff"
        );
    }
}

/// What a verdict says about whether the session is owed a resume.
fn resumable(v: &Verdict) -> bool {
    matches!(
        v,
        Verdict::PendingInput
            | Verdict::InterruptedToolCall
            | Verdict::InterruptedAfterToolResult
            | Verdict::InterruptedStream
    )
}

#[test]
fn the_classifier_agrees_with_the_session_rule_on_every_prefix_of_the_shared_histories() {
    let tmp = tempfile::tempdir().unwrap();
    let mut buf = Vec::new();
    let mut checked = 0;
    for (name, records) in owes_work_histories() {
        let mut state = SessionState::new(lazarus_ledger::Header::new(FORMAT, ID));
        for n in 1..=records.len() {
            let rec = records[n - 1].clone();
            state.apply(n as u64, rec.clone());
            let path = tmp.path().join(format!("{ID}.jsonl"));
            std::fs::write(&path, ledger(&records[..n])).unwrap();
            let got = classify_file(
                &path,
                Some(Format::Lazarus),
                None,
                TailOptions::default(),
                &mut buf,
            )
            .unwrap()
            .classification
            .verdict;
            let owes = state.owes_work();
            // Never leave owed work behind; where the tail cannot tell (a receipt, a stop)
            // the classifier may resume a session that owes nothing — the runner then just
            // writes a receipt.
            // A user's own stop (Ctrl-C) owes work but is left alone on purpose.
            let user_stop = matches!(&rec, Record::Interrupted(i) if i.reason == "sigint");
            if owes && user_stop {
                assert_eq!(got, Verdict::UserStopped, "{name}, {n} records");
            } else if owes {
                assert!(
                    resumable(&got),
                    "{name}, {n} records ({}): owes work, classified {got:?}",
                    rec.kind()
                );
            } else if !matches!(rec.kind(), "resume" | "interrupted" | "fork") {
                assert!(
                    !resumable(&got),
                    "{name}, {n} records ({}): owes nothing, classified {got:?}",
                    rec.kind()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 20);
}

/// A session a Python program writes (`meta.host`): its program resumes it, so boot-resume
/// skips it (`sdk_owned`); a call it announced with no outcome is in doubt, as a native call's
/// start without an outcome is (the same status rule), and the report names it.
#[test]
fn a_python_programs_session_with_a_call_in_doubt_is_named_and_left_to_its_program() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("py.jsonl");
    let mut header = lazarus_ledger::Header::new(FORMAT, "py");
    header.created_at = ts(0);
    header.meta = Some(json!({"host": "openai-agents"}));
    let records = [
        Record::from(HostItem {
            item: json!({"role": "user", "content": "mail bob"}),
        }),
        Record::from(HostCallIntent {
            call_id: "call_m".into(),
            tool: "send_email".into(),
            arguments: Some("{\"to\":\"bob\"}".into()),
        }),
    ];
    let mut state = SessionState::new(header.clone());
    let mut out = Vec::new();
    let mut line = Vec::new();
    encode_line(
        &mut line,
        0,
        &ts(0),
        "header",
        &serde_json::to_vec(&header).unwrap(),
    );
    out.extend_from_slice(&line);
    for (i, rec) in records.iter().enumerate() {
        state.check(rec).unwrap();
        state.apply(i as u64 + 1, rec.clone());
        encode_line(
            &mut line,
            i as u64 + 1,
            &ts(i + 1),
            rec.kind(),
            &rec.data_json().unwrap(),
        );
        out.extend_from_slice(&line);
    }
    assert_eq!(state.status(), lazarus_session::Status::InDoubt);
    std::fs::write(&path, out).unwrap();
    let mut buf = Vec::new();
    let c = classify_file(
        &path,
        Some(Format::Lazarus),
        None,
        TailOptions::default(),
        &mut buf,
    )
    .unwrap()
    .classification;
    assert_eq!(
        c.verdict,
        Verdict::Skipped(lazarus_boot_resume::SkipWhy::SdkOwned),
        "{}",
        c.reason
    );
    assert!(
        c.reason.contains("in doubt") && c.reason.contains("send_email"),
        "{}",
        c.reason
    );
    assert!(c.reason.contains("host: openai-agents"), "{}", c.reason);
    assert_eq!(c.interrupted_call.as_deref(), Some("send_email (call_m)"));
}
