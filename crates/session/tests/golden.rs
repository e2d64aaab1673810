//! Golden files pin the exact bytes of every record kind. `docs/FORMAT.md` shows the same
//! lines, and this test checks that too. Regenerate after an intended format change with
//! `LAZARUS_BLESS=1 cargo test -p lazarus-session --test golden` and review the diff.

use std::path::PathBuf;

use lazarus_ledger::frame::{Envelope, decode_line, encode_line};
use lazarus_ledger::{Header, Parent};
use lazarus_session::SessionId;
use lazarus_session::record::*;
use lazarus_session::{LocalStore, Record, Status, Store};
use serde_json::json;

const TS: &str = "2026-12-02T10:00:00.000Z";

fn records() -> Vec<Record> {
    vec![
        Record::Fork(ForkPoint {
            parent: "golden-parent".into(),
            parent_seq: 0,
            at_turn: 0,
        }),
        Record::Input(Input {
            input_id: "msg-1".into(),
            source: "user".into(),
            text: "Count the files in src/.".into(),
        }),
        Record::TurnStart(TurnStart {
            turn: 1,
            prev_seq: None,
            inputs: vec![2],
        }),
        Record::Response(Response {
            turn: 1,
            items: vec![
                Item::Reasoning {
                    text: "A shell call answers this.".into(),
                },
                Item::Text {
                    text: "Counting.".into(),
                },
                Item::ToolCall {
                    call_id: "call_1".into(),
                    name: "shell".into(),
                    arguments: r#"{"command":"ls src | wc -l"}"#.into(),
                },
            ],
            usage: Some(Usage {
                prompt_tokens: Some(120),
                completion_tokens: Some(18),
                total_tokens: Some(138),
                cached_tokens: None,
            }),
            stop_reason: Some("tool_calls".into()),
            failure: None,
            model: Some("gemma-3-270m".into()),
            provider_extra: json!({"system_fingerprint": "b1-fp", "x_vendor": {"cached": true}})
                .as_object()
                .cloned(),
            attempts: vec![Attempt {
                status: Some(429),
                error: Some("rate limited".into()),
                waited_ms: 0,
            }],
        }),
        Record::ToolIntent(ToolIntent {
            call_id: "call_1".into(),
            turn: 1,
            tool: "shell".into(),
            arguments: r#"{"command":"ls src | wc -l"}"#.into(),
            idempotent: false,
            idempotency_key: "golden:call_1".into(),
            rerun_basis: None,
        }),
        Record::ToolStart(ToolStart {
            call_id: "call_1".into(),
            process: Some(ProcessRef {
                pgid: 4242,
                start_time_ticks: 987654,
            }),
        }),
        Record::Interrupted(Interrupted {
            reason: "sigterm".into(),
            turn: Some(1),
        }),
        Record::Control(Control {
            input_id: "boot-resume-7f3a".into(),
            action: "resume".into(),
            reason: Some("gateway-restart".into()),
        }),
        Record::ToolOutcome(ToolOutcome {
            call_id: "call_1".into(),
            status: OutcomeStatus::InDoubt,
            result: "The call was interrupted; its effect is unknown. Check before retrying."
                .into(),
            exit_code: None,
            duration_ms: None,
        }),
        Record::Resume(ResumeReceipt {
            trigger: "event".into(),
            truncated_bytes: 97,
            truncated_saved_to: Some("golden.jsonl.cut-20261202T100003.000000Z".into()),
            records_replayed: 8,
            calls_reused: 0,
            calls_rerun: 0,
            calls_in_doubt: 1,
            calls_not_started: 0,
            processes_terminated: 1,
            inputs_pending: 0,
            open_turn: None,
            every_call_has_one_result: true,
            sandbox: None,
        }),
        Record::TurnStart(TurnStart {
            turn: 2,
            prev_seq: Some(3),
            inputs: vec![],
        }),
        Record::Response(Response {
            turn: 2,
            items: vec![
                Item::ProviderReasoning {
                    api: "anthropic".into(),
                    text: "The call is in doubt; look before acting.".into(),
                    item: json!({"type": "thinking",
                        "thinking": "The call is in doubt; look before acting.",
                        "signature": "EqQBCkYIBxgCKkBsaWtlIGEgcmVhbCBzaWduYXR1cmU="}),
                },
                Item::Text {
                    text: "The count may not have run; I will check first.".into(),
                },
            ],
            usage: Some(Usage {
                prompt_tokens: Some(2150),
                completion_tokens: Some(40),
                total_tokens: Some(2190),
                cached_tokens: Some(2048),
            }),
            stop_reason: Some("end_turn".into()),
            failure: None,
            model: None,
            provider_extra: None,
            attempts: vec![],
        }),
        Record::Compaction(Compaction {
            trigger: "manual".into(),
            from_seq: 1,
            through_seq: 12,
            summary: "The user asked to count the files in src/; the count call was \
                      interrupted (in doubt) and the assistant chose to check first."
                .into(),
            tokens_before: 2190,
            tokens_after: 160,
            model: Some("claude-haiku-4-5".into()),
            usage: Some(Usage {
                prompt_tokens: Some(2300),
                completion_tokens: Some(38),
                total_tokens: Some(2338),
                cached_tokens: None,
            }),
            attempts: vec![],
        }),
    ]
}

fn render() -> String {
    let header = Header {
        format: FORMAT.into(),
        version: 1,
        id: "golden".into(),
        created_at: TS.into(),
        parent: Some(Parent {
            id: "golden-parent".into(),
            seq: 0,
        }),
        meta: Some(json!({"workspace": "/home/dana/project"})),
        unsynced_bytes_max: None,
    };
    let mut out = Vec::new();
    let mut line = Vec::new();
    encode_line(
        &mut line,
        0,
        TS,
        "header",
        &serde_json::to_vec(&header).unwrap(),
    );
    out.extend_from_slice(&line);
    for (i, rec) in records().iter().enumerate() {
        encode_line(
            &mut line,
            i as u64 + 1,
            TS,
            rec.kind(),
            &rec.data_json().unwrap(),
        );
        out.extend_from_slice(&line);
    }
    String::from_utf8(out).unwrap()
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/golden.jsonl")
}

#[test]
fn golden_session_is_pinned() {
    let rendered = render();
    if std::env::var_os("LAZARUS_BLESS").is_some() {
        std::fs::write(golden_path(), &rendered).unwrap();
    }
    let golden = std::fs::read_to_string(golden_path()).unwrap();
    assert_eq!(
        rendered, golden,
        "record encoding changed; bless and review if intended"
    );
    // every kind is covered
    let kinds: std::collections::BTreeSet<_> = records().iter().map(|r| r.kind()).collect();
    for k in KINDS {
        assert!(kinds.contains(k), "golden file lacks kind {k}");
    }
    // each golden line decodes to the same typed record, and re-encodes to the same bytes
    for (line, rec) in golden.lines().skip(1).zip(records()) {
        let env: Envelope<Record> = decode_line(line.as_bytes()).unwrap();
        assert_eq!(env.data, rec);
    }
}

#[test]
fn golden_session_replays_as_a_valid_session() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("golden.jsonl"), render()).unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let st = store.load(&SessionId::literal("golden")).unwrap();
    assert_eq!(st.last_seq, 13);
    assert_eq!(st.compaction.as_ref().map(|c| c.through_seq), Some(12));
    assert!(st.every_call_has_one_result());
    assert_eq!(st.status(), Status::Idle);
    assert_eq!(st.forked_at_turn, Some(0));
}

#[test]
fn format_doc_shows_every_golden_line() {
    let doc_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/FORMAT.md");
    let doc = std::fs::read_to_string(doc_path).unwrap();
    for line in render().lines() {
        assert!(
            doc.contains(line),
            "docs/FORMAT.md lacks the golden line:\n{line}"
        );
    }
}

#[test]
fn unknown_kinds_and_fields_are_named_errors() {
    let mut line = Vec::new();
    encode_line(&mut line, 1, TS, "teleport", b"{}");
    let err = decode_line::<Record>(&line[..line.len() - 1]).unwrap_err();
    assert!(
        err.to_string().contains("unknown record kind \"teleport\""),
        "{err}"
    );
    encode_line(
        &mut line,
        1,
        TS,
        "input",
        br#"{"input_id":"a","source":"user","text":"t","priority":9}"#,
    );
    let err = decode_line::<Record>(&line[..line.len() - 1]).unwrap_err();
    assert!(err.to_string().contains("priority"), "{err}");
}
