//! Claude Code shapes the real captures do not hold yet (no capture has a thinking block or a
//! compaction; see docs/boot-resume.md): a thinking block, text and a tool call written as
//! three lines of one API message; a compaction (`compact_boundary`, then the
//! `isCompactSummary` user line). Lines shaped as session-formats.md §3 and the 2.1.332
//! captures show them.

use lazarus_boot_resume::Format;
use lazarus_boot_resume::formats::{self, Event, Part, ReadOptions};
use lazarus_session::record::{Item, Record};
use lazarus_session::{LocalStore, SessionId, Store};
use serde_json::json;

fn line(v: serde_json::Value) -> String {
    let mut v = v;
    let o = v.as_object_mut().unwrap();
    o.insert("sessionId".into(), json!("5e55"));
    o.insert("version".into(), json!("2.1.332"));
    o.insert("cwd".into(), json!("/home/dana/app"));
    o.insert("isSidechain".into(), json!(false));
    format!("{v}\n")
}

fn transcript() -> String {
    let msg = |content: serde_json::Value| json!({"id": "msg_01", "model": "claude-opus-5-5", "role": "assistant", "content": content, "stop_reason": null});
    [
        line(json!({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "fix the tests"}})),
        line(json!({"type": "assistant", "uuid": "a1", "message": msg(json!([{"type": "thinking", "thinking": "Run them first.", "signature": "sig"}]))})),
        line(json!({"type": "assistant", "uuid": "a2", "message": msg(json!([{"type": "text", "text": "Running the tests."}]))})),
        line(json!({"type": "assistant", "uuid": "a3", "message": msg(json!([{"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "npm test"}}]))})),
        line(json!({"type": "user", "uuid": "u2", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": [{"type": "text", "text": "1 failing"}], "is_error": false}]}})),
        line(json!({"type": "system", "subtype": "compact_boundary", "uuid": "s1", "compactMetadata": {"trigger": "manual", "preTokens": 9000}})),
        line(json!({"type": "user", "uuid": "u3", "isCompactSummary": true, "message": {"role": "user", "content": "This session is being continued from a previous conversation: the tests were run, 1 failing."}})),
        line(json!({"type": "user", "uuid": "u4", "message": {"role": "user", "content": "go on"}})),
        line(json!({"type": "assistant", "uuid": "a4", "message": {"id": "msg_02", "model": "claude-opus-5-5", "role": "assistant", "content": [{"type": "text", "text": "Fixing it."}], "stop_reason": "end_turn"}})),
    ]
    .concat()
}

#[test]
fn thinking_and_compaction_are_read_and_imported() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("5e55.jsonl");
    std::fs::write(&src, transcript()).unwrap();
    let conv = formats::read(Format::ClaudeCode, &src, &ReadOptions::default()).unwrap();
    // three lines of one API message are one answer: thinking, text, call
    let Event::Answer(a) = &conv.events[1] else {
        panic!("{:?}", conv.events)
    };
    assert_eq!(
        a.parts,
        [
            Part::Reasoning("Run them first.".into()),
            Part::Text("Running the tests.".into()),
            Part::Call {
                id: "toolu_9".into(),
                name: "Bash".into(),
                arguments: r#"{"command":"npm test"}"#.into()
            }
        ]
    );
    assert!(
        matches!(&conv.events[3], Event::Compaction { summary } if summary.contains("1 failing"))
    );
    assert_eq!(conv.model.as_deref(), Some("claude-opus-5-5"));
    assert_eq!(conv.dropped["system/compact_boundary"].0, 1);

    let store = LocalStore::open(&tmp.path().join("s")).unwrap();
    let got =
        lazarus_interchange::import(&store, &conv, Some(SessionId::parse("c").unwrap())).unwrap();
    assert_eq!(got.counts.compactions, 1);
    let st = store.load(&SessionId::parse("c").unwrap()).unwrap();
    // what is sent next: the summary, then what followed it
    let (summary, live) = st.live_context();
    assert!(summary.is_some_and(|s| s.contains("1 failing")));
    assert_eq!(
        live.len(),
        2,
        "the prompt after the compaction and its answer"
    );
    let records = store
        .records(&SessionId::parse("c").unwrap(), 0, 100)
        .unwrap();
    let kinds: Vec<&str> = records.iter().map(|r| r.kind.as_str()).collect();
    assert!(kinds.contains(&"compaction"), "{kinds:?}");
    // the thinking is kept readable, never as something a provider must get back
    use lazarus_ledger::Payload;
    let first = records
        .iter()
        .find(|r| r.kind == "response")
        .map(|r| Record::deserialize_kind(&r.kind, r.data.clone()).unwrap())
        .unwrap();
    let Record::Response(r) = first else {
        unreachable!()
    };
    assert_eq!(
        r.items[0],
        Item::Reasoning {
            text: "Run them first.".into()
        }
    );
}
