//! The shared table of session histories for the "does this session owe work" rule: not a
//! check of a store, but fixtures other tests (and other crates) replay prefix by prefix.

use crate::record::{
    Item, OutcomeStatus, Record, Response, ToolIntent, ToolOutcome, ToolStart, TurnStart,
};

/// Session histories whose every prefix is a fixture for the "does this session owe work"
/// rule: [`crate::SessionState::owes_work`] (full replay) and its tail-only twin
/// [`crate::state::owes_work_from_tail`] are both checked against them here, and any other
/// reader of native sessions (boot-resume's classifier) can be checked against the same
/// table. Each entry: a name and the records after the header, in order.
pub fn owes_work_histories() -> Vec<(&'static str, Vec<Record>)> {
    use crate::record::{Control, Failure, Input, Interrupted, ResumeReceipt};
    let input = |id: &str| {
        Record::Input(Input {
            input_id: id.into(),
            source: "user".into(),
            text: format!("please do {id}"),
        })
    };
    let turn = |t: u64, prev: Option<u64>, inputs: Vec<u64>| {
        Record::TurnStart(TurnStart {
            turn: t,
            prev_seq: prev,
            inputs,
        })
    };
    let answer = |t: u64, items: Vec<Item>, failure: Option<Failure>| {
        Record::Response(Response {
            turn: t,
            items,
            usage: None,
            stop_reason: None,
            failure,
            model: None,
            provider_extra: None,
            attempts: vec![],
        })
    };
    let call = |id: &str| Item::ToolCall {
        call_id: id.into(),
        name: "shell".into(),
        arguments: r#"{"command":"true"}"#.into(),
    };
    let text = || Item::Text {
        text: "done".into(),
    };
    let intent = |id: &str, t: u64| {
        Record::ToolIntent(ToolIntent {
            call_id: id.into(),
            turn: t,
            tool: "shell".into(),
            arguments: r#"{"command":"true"}"#.into(),
            idempotent: false,
            idempotency_key: format!("s:{id}"),
            rerun_basis: None,
        })
    };
    let start = |id: &str| {
        Record::ToolStart(ToolStart {
            call_id: id.into(),
            process: None,
        })
    };
    let outcome = |id: &str, status: OutcomeStatus| {
        Record::ToolOutcome(ToolOutcome {
            call_id: id.into(),
            status,
            result: "ok".into(),
            exit_code: Some(0),
            duration_ms: Some(1),
        })
    };
    let receipt = |open_turn: Option<u64>| {
        Record::Resume(ResumeReceipt {
            trigger: "event".into(),
            open_turn,
            every_call_has_one_result: true,
            ..ResumeReceipt::default()
        })
    };
    let ask = |id: &str| {
        Record::ApprovalRequest(crate::record::ApprovalRequest {
            call_id: id.into(),
            tool: "shell".into(),
            arguments: r#"{"command":"true"}"#.into(),
            mode: "untrusted".into(),
            reason: "shell is not read-only".into(),
            requested_at: "2026-12-02T10:00:00.000Z".into(),
        })
    };
    let decide = |id: &str, decision: crate::record::Decision| {
        Record::Approval(crate::record::Approval {
            input_id: crate::record::approval_input_id(id),
            call_id: id.into(),
            decision,
            scope: crate::record::Scope::Once,
            reason: None,
            by: "cli".into(),
            decided_at: "2026-12-02T10:00:01.000Z".into(),
        })
    };
    let host_item = |text: &str| {
        Record::from(crate::record::HostItem {
            item: serde_json::json!({"role": "user", "content": text}),
        })
    };
    vec![
        (
            "a host framework's history (the Python package): items, a call cut off, a pop, a clear",
            vec![
                host_item("hello"),
                Record::from(crate::record::HostCallIntent {
                    call_id: "h1".into(),
                    tool: "send_email".into(),
                    arguments: None,
                }),
                host_item("again"),
                Record::from(crate::record::HostPop { seq: 3 }),
                Record::from(crate::record::HostClear { through_seq: 4 }),
                Record::from(crate::record::HostCallOutcome {
                    call_id: "h1".into(),
                    result: "sent".into(),
                }),
            ],
        ),
        (
            "a host framework's graph (LangGraph through the Python package): a checkpoint, writes, a delete",
            {
                let blob = || crate::record::HostBlob {
                    type_tag: "msgpack".into(),
                    b64: "gA==".into(),
                };
                vec![
                    Record::from(crate::record::HostCheckpoint {
                        ns: String::new(),
                        checkpoint_id: "cp-1".into(),
                        parent_id: None,
                        checkpoint: blob(),
                        metadata: blob(),
                        channels: vec![],
                    }),
                    Record::from(crate::record::HostWrites {
                        ns: String::new(),
                        checkpoint_id: "cp-1".into(),
                        task_id: "t".into(),
                        task_path: String::new(),
                        writes: vec![crate::record::HostWrite {
                            idx: 0,
                            channel: "a".into(),
                            value: blob(),
                        }],
                    }),
                    Record::from(crate::record::HostClear { through_seq: 2 }),
                ]
            },
        ),
        (
            "a call that waited for approval and ran, then one denied",
            vec![
                input("m1"),
                turn(1, None, vec![1]),
                answer(1, vec![call("c1")], None),
                ask("c1"),
                input("m2"),
                decide("c1", crate::record::Decision::Allow),
                intent("c1", 1),
                start("c1"),
                outcome("c1", OutcomeStatus::Ok),
                turn(2, Some(2), vec![5]),
                answer(2, vec![call("c2")], None),
                ask("c2"),
                decide("c2", crate::record::Decision::Deny),
                outcome("c2", OutcomeStatus::NotRun),
                turn(3, Some(10), vec![]),
                answer(3, vec![text()], None),
            ],
        ),
        (
            "a tool turn, then an answer",
            vec![
                input("m1"),
                turn(1, None, vec![1]),
                answer(1, vec![text(), call("c1")], None),
                intent("c1", 1),
                start("c1"),
                outcome("c1", OutcomeStatus::Ok),
                turn(2, Some(2), vec![]),
                answer(2, vec![text()], None),
            ],
        ),
        (
            "a failed request",
            vec![
                input("m1"),
                turn(1, None, vec![1]),
                answer(
                    1,
                    vec![],
                    Some(Failure {
                        message: "HTTP 500".into(),
                        transient: true,
                        status: Some(500),
                    }),
                ),
            ],
        ),
        (
            "a call closed in doubt after a crash, then a resume event on an idle session",
            vec![
                input("m1"),
                turn(1, None, vec![1]),
                answer(1, vec![call("c1")], None),
                intent("c1", 1),
                start("c1"),
                outcome("c1", OutcomeStatus::InDoubt),
                receipt(None),
                turn(2, Some(2), vec![]),
                answer(2, vec![text()], None),
                Record::Control(Control {
                    input_id: "r1".into(),
                    action: "resume".into(),
                    reason: Some("gateway-restart".into()),
                }),
                receipt(None),
            ],
        ),
        (
            "stopped mid-turn, resumed",
            vec![
                input("m1"),
                turn(1, None, vec![1]),
                Record::Interrupted(Interrupted {
                    reason: "sigint".into(),
                    turn: Some(1),
                }),
                receipt(Some(1)),
                answer(1, vec![text()], None),
                input("m2"),
            ],
        ),
        (
            "compacted before a turn (work owed), then again when idle",
            vec![
                input("m1"),
                turn(1, None, vec![1]),
                answer(1, vec![text(), call("c1")], None),
                intent("c1", 1),
                start("c1"),
                outcome("c1", OutcomeStatus::Ok),
                compaction("auto", 1, 6),
                turn(2, Some(2), vec![]),
                answer(2, vec![text()], None),
                compaction("manual", 7, 9),
            ],
        ),
        (
            "an input recorded while a turn was in flight (a gateway's message)",
            vec![
                input("m1"),
                turn(1, None, vec![1]),
                input("m2"),
                answer(1, vec![text()], None),
                turn(2, Some(2), vec![3]),
                answer(2, vec![text()], None),
            ],
        ),
        (
            "forked at turn 0 with an input not yet answered (the header names a parent)",
            vec![
                input("m1"),
                Record::Fork(crate::record::ForkPoint {
                    parent: "p".into(),
                    parent_seq: 1,
                    at_turn: 0,
                }),
                turn(1, None, vec![1]),
                answer(1, vec![text()], None),
            ],
        ),
        (
            "a compact request on an idle session, answered",
            vec![
                input("m1"),
                turn(1, None, vec![1]),
                answer(1, vec![text()], None),
                Record::Control(Control {
                    input_id: "k1".into(),
                    action: crate::state::COMPACT_ACTION.into(),
                    reason: None,
                }),
                compaction("manual", 1, 4),
            ],
        ),
        (
            "a resume event while a failed turn waits, answered by a receipt",
            vec![
                input("m1"),
                turn(1, None, vec![1]),
                answer(
                    1,
                    vec![],
                    Some(Failure {
                        message: "HTTP 429".into(),
                        transient: true,
                        status: Some(429),
                    }),
                ),
                Record::Control(Control {
                    input_id: "r1".into(),
                    action: "resume".into(),
                    reason: Some("boot".into()),
                }),
                receipt(None),
            ],
        ),
    ]
}

fn compaction(trigger: &str, from_seq: u64, through_seq: u64) -> Record {
    Record::Compaction(crate::record::Compaction {
        trigger: trigger.into(),
        from_seq,
        through_seq,
        summary: "The user asked for c1; it ran.".into(),
        tokens_before: 900,
        tokens_after: 100,
        model: None,
        usage: None,
        attempts: vec![],
    })
}
