//! Replay checks the meaning of every record before it is written: each misplaced record is
//! refused with its own named error, and the status a session shows follows from its history.
//! (Mutation testing found these rules unpinned: a check replaced by `true` passed the suite.)

use lazarus_ledger::Header;
use lazarus_ledger::header::Parent;
use lazarus_session::record::{
    Control, FORMAT, Failure, ForkPoint, Input, Interrupted, Item, OutcomeStatus, Response,
    ResumeReceipt, ToolIntent, ToolOutcome, ToolStart, TurnStart,
};
use lazarus_session::{Record, ReplayError, SessionState, Status};

fn input(id: &str) -> Record {
    Record::Input(Input {
        input_id: id.into(),
        source: "user".into(),
        text: format!("please do {id}"),
    })
}

fn turn(t: u64, prev_seq: Option<u64>, inputs: Vec<u64>) -> Record {
    Record::TurnStart(TurnStart {
        turn: t,
        prev_seq,
        inputs,
    })
}

fn answer(t: u64, items: Vec<Item>) -> Record {
    Record::Response(Response {
        turn: t,
        items,
        usage: None,
        stop_reason: None,
        failure: None,
        model: None,
        provider_extra: None,
        attempts: vec![],
    })
}

fn failed(t: u64) -> Record {
    Record::Response(Response {
        turn: t,
        items: vec![],
        usage: None,
        stop_reason: None,
        failure: Some(Failure {
            message: "HTTP 500".into(),
            transient: true,
            status: Some(500),
        }),
        model: None,
        provider_extra: None,
        attempts: vec![],
    })
}

fn call(id: &str) -> Item {
    Item::ToolCall {
        call_id: id.into(),
        name: "shell".into(),
        arguments: r#"{"command":"true"}"#.into(),
    }
}

fn text() -> Item {
    Item::Text {
        text: "done".into(),
    }
}

fn intent_for(id: &str, tool: &str) -> Record {
    Record::ToolIntent(ToolIntent {
        call_id: id.into(),
        turn: 1,
        tool: tool.into(),
        arguments: r#"{"command":"true"}"#.into(),
        idempotent: false,
        idempotency_key: format!("s:{id}"),
        rerun_basis: None,
    })
}

fn intent(id: &str) -> Record {
    intent_for(id, "shell")
}

fn start(id: &str) -> Record {
    Record::ToolStart(ToolStart {
        call_id: id.into(),
        process: None,
    })
}

fn outcome(id: &str, status: OutcomeStatus) -> Record {
    Record::ToolOutcome(ToolOutcome {
        call_id: id.into(),
        status,
        result: "ok".into(),
        exit_code: Some(0),
        duration_ms: Some(1),
    })
}

/// Replays `records` (each must pass its check) into a fresh state.
fn replay(header: Header, records: &[Record]) -> SessionState {
    let mut st = SessionState::new(header);
    for (i, rec) in records.iter().enumerate() {
        st.check(rec)
            .unwrap_or_else(|e| panic!("record {} of the history: {e}", i + 1));
        st.apply(i as u64 + 1, rec.clone());
    }
    st
}

fn plain() -> Header {
    Header::new(FORMAT, "s")
}

/// input, turn 1 asking for call c1.
fn one_call() -> Vec<Record> {
    vec![
        input("m1"),
        turn(1, None, vec![1]),
        answer(1, vec![call("c1")]),
    ]
}

#[test]
fn every_misplaced_record_is_refused_with_its_own_error() {
    let with = |mut h: Vec<Record>, more: Vec<Record>| {
        h.extend(more);
        h
    };
    // (what, history, the record that must be refused, the error it must get)
    type Case = (&'static str, Vec<Record>, Record, fn(&ReplayError) -> bool);
    let cases: Vec<Case> = vec![
        (
            "the same input id twice",
            vec![input("m1")],
            input("m1"),
            |e| matches!(e, ReplayError::DuplicateInputId { first: 1, .. }),
        ),
        (
            "turn 2 before turn 1",
            vec![input("m1")],
            turn(2, None, vec![1]),
            |e| {
                matches!(
                    e,
                    ReplayError::TurnOutOfOrder {
                        expected: 1,
                        found: 2
                    }
                )
            },
        ),
        (
            "a turn while one is open",
            vec![input("m1"), turn(1, None, vec![1])],
            turn(2, Some(2), vec![]),
            |e| matches!(e, ReplayError::TurnStillOpen { turn: 2, open: 1 }),
        ),
        (
            "a turn that does not chain to the previous one",
            with(
                one_call(),
                vec![intent("c1"), start("c1"), outcome("c1", OutcomeStatus::Ok)],
            ),
            turn(2, Some(1), vec![]),
            |e| matches!(e, ReplayError::BrokenTurnChain { turn: 2, .. }),
        ),
        (
            "a first turn that claims a previous one",
            vec![input("m1")],
            turn(1, Some(1), vec![1]),
            |e| matches!(e, ReplayError::BrokenTurnChain { turn: 1, .. }),
        ),
        (
            "a turn answering an input that is not pending",
            vec![input("m1")],
            turn(1, None, vec![7]),
            |e| matches!(e, ReplayError::InputNotPending { turn: 1, seq: 7 }),
        ),
        (
            "a response with no open turn",
            vec![input("m1")],
            answer(1, vec![text()]),
            |e| {
                matches!(
                    e,
                    ReplayError::ResponseWithoutOpenTurn {
                        turn: 1,
                        open: None
                    }
                )
            },
        ),
        (
            "a response to another turn than the open one",
            vec![input("m1"), turn(1, None, vec![1])],
            answer(2, vec![text()]),
            |e| {
                matches!(
                    e,
                    ReplayError::ResponseWithoutOpenTurn {
                        turn: 2,
                        open: Some(1)
                    }
                )
            },
        ),
        (
            "one response naming a call id twice",
            vec![input("m1"), turn(1, None, vec![1])],
            answer(1, vec![call("c1"), call("c1")]),
            |e| matches!(e, ReplayError::DuplicateCallId { call_id } if call_id == "c1"),
        ),
        (
            "a later response reusing an earlier call id",
            with(
                one_call(),
                vec![
                    intent("c1"),
                    start("c1"),
                    outcome("c1", OutcomeStatus::Ok),
                    turn(2, Some(2), vec![]),
                ],
            ),
            answer(2, vec![call("c1")]),
            |e| matches!(e, ReplayError::DuplicateCallId { call_id } if call_id == "c1"),
        ),
        (
            "an intent for a call no response made",
            one_call(),
            intent("c9"),
            |e| matches!(e, ReplayError::UnknownCall { call_id } if call_id == "c9"),
        ),
        (
            "a second intent for a call",
            with(one_call(), vec![intent("c1")]),
            intent("c1"),
            |e| matches!(e, ReplayError::DuplicateIntent { .. }),
        ),
        (
            "an intent naming another tool than the call",
            one_call(),
            intent_for("c1", "read_file"),
            |e| matches!(e, ReplayError::IntentMismatch { .. }),
        ),
        ("a start before the intent", one_call(), start("c1"), |e| {
            matches!(e, ReplayError::StartWithoutIntent { .. })
        }),
        (
            "a start for an unknown call",
            one_call(),
            start("c9"),
            |e| matches!(e, ReplayError::StartWithoutIntent { .. }),
        ),
        (
            "a second start",
            with(one_call(), vec![intent("c1"), start("c1")]),
            start("c1"),
            |e| matches!(e, ReplayError::DuplicateStart { .. }),
        ),
        (
            "an outcome before the intent",
            one_call(),
            outcome("c1", OutcomeStatus::Ok),
            |e| matches!(e, ReplayError::OutcomeWithoutIntent { .. }),
        ),
        (
            "an outcome for an unknown call",
            one_call(),
            outcome("c9", OutcomeStatus::Ok),
            |e| matches!(e, ReplayError::OutcomeWithoutIntent { .. }),
        ),
        (
            "a second outcome",
            with(
                one_call(),
                vec![intent("c1"), outcome("c1", OutcomeStatus::Ok)],
            ),
            outcome("c1", OutcomeStatus::Ok),
            |e| matches!(e, ReplayError::CallFinishedTwice { .. }),
        ),
        (
            "a fork point in a session that has no parent",
            vec![input("m1")],
            Record::Fork(ForkPoint {
                parent: "p".into(),
                parent_seq: 1,
                at_turn: 0,
            }),
            |e| matches!(e, ReplayError::MisplacedFork),
        ),
        (
            "a header after the first line",
            vec![input("m1")],
            Record::Header,
            |e| matches!(e, ReplayError::MisplacedHeader),
        ),
    ];
    for (what, history, bad, is_expected) in cases {
        let st = replay(plain(), &history);
        match st.check(&bad) {
            Ok(()) => panic!("{what}: accepted"),
            Err(e) => assert!(
                is_expected(&e),
                "{what}: refused with the wrong error: {e:?}"
            ),
        }
    }
}

#[test]
fn a_fork_point_is_accepted_once_and_only_in_a_child() {
    let mut child = plain();
    child.parent = Some(Parent {
        id: "p".into(),
        seq: 1,
    });
    let fork = Record::Fork(ForkPoint {
        parent: "p".into(),
        parent_seq: 1,
        at_turn: 0,
    });
    let st = replay(child, &[input("m1"), fork.clone()]);
    assert!(
        matches!(st.check(&fork), Err(ReplayError::MisplacedFork)),
        "a second fork point is refused"
    );
}

#[test]
fn the_status_follows_the_history() {
    let ok = || outcome("c1", OutcomeStatus::Ok);
    let table: Vec<(&str, Vec<Record>, Status)> = vec![
        ("header only", vec![], Status::New),
        ("an input", vec![input("m1")], Status::Pending),
        (
            "a turn started",
            vec![input("m1"), turn(1, None, vec![1])],
            Status::Interrupted,
        ),
        ("a call asked for", one_call(), Status::Interrupted),
        (
            "a call with an intent",
            [one_call(), vec![intent("c1")]].concat(),
            Status::Interrupted,
        ),
        (
            "a call started, no outcome",
            [one_call(), vec![intent("c1"), start("c1")]].concat(),
            Status::InDoubt,
        ),
        (
            "a call done, its result not yet seen by the model",
            [one_call(), vec![intent("c1"), start("c1"), ok()]].concat(),
            Status::Interrupted,
        ),
        (
            "a call done and answered",
            [
                one_call(),
                vec![
                    intent("c1"),
                    start("c1"),
                    ok(),
                    turn(2, Some(2), vec![]),
                    answer(2, vec![text()]),
                ],
            ]
            .concat(),
            Status::Idle,
        ),
        (
            "an answer",
            vec![input("m1"), turn(1, None, vec![1]), answer(1, vec![text()])],
            Status::Idle,
        ),
        (
            "a failed request",
            vec![input("m1"), turn(1, None, vec![1]), failed(1)],
            Status::Failed,
        ),
        (
            "an input after an answer",
            vec![
                input("m1"),
                turn(1, None, vec![1]),
                answer(1, vec![text()]),
                input("m2"),
            ],
            Status::Pending,
        ),
        (
            "a resume event answered by its receipt, before any turn",
            vec![
                Record::Control(Control {
                    input_id: "r1".into(),
                    action: "resume".into(),
                    reason: Some("boot".into()),
                }),
                Record::Resume(ResumeReceipt {
                    trigger: "event".into(),
                    every_call_has_one_result: true,
                    ..ResumeReceipt::default()
                }),
            ],
            Status::Idle,
        ),
        (
            "stopped mid-turn",
            vec![
                input("m1"),
                turn(1, None, vec![1]),
                Record::Interrupted(Interrupted {
                    reason: "sigint".into(),
                    turn: Some(1),
                }),
            ],
            Status::Stopped,
        ),
    ];
    for (what, history, expected) in table {
        let st = replay(plain(), &history);
        assert_eq!(st.status(), expected, "{what}");
        assert_eq!(
            st.status().to_string(),
            serde_json::to_value(expected)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            "{what}: the word printed is the JSON word"
        );
    }
}

#[test]
fn a_turn_is_complete_when_answered_and_every_call_has_an_outcome() {
    let mut history = one_call();
    let st = replay(plain(), &history);
    assert!(st.turn_is_complete(0), "before the first turn");
    assert!(!st.turn_is_complete(1), "a call without outcome");
    assert!(!st.turn_is_complete(2), "a turn that never started");
    history.extend([intent("c1"), start("c1"), outcome("c1", OutcomeStatus::Ok)]);
    let st = replay(plain(), &history);
    assert!(st.turn_is_complete(1), "every call has its outcome");
    history.push(turn(2, Some(2), vec![]));
    let st = replay(plain(), &history);
    assert!(!st.turn_is_complete(2), "an open turn");
    assert!(st.turn_is_complete(1));
}

#[test]
fn only_calls_closed_in_doubt_are_in_doubt() {
    let mut history = vec![
        input("m1"),
        turn(1, None, vec![1]),
        answer(1, vec![call("c1"), call("c2")]),
    ];
    history.extend([
        intent("c1"),
        start("c1"),
        outcome("c1", OutcomeStatus::InDoubt),
    ]);
    history.extend([intent("c2"), start("c2"), outcome("c2", OutcomeStatus::Ok)]);
    let st = replay(plain(), &history);
    let ids: Vec<&str> = st.in_doubt_calls().map(|c| c.call_id.as_str()).collect();
    assert_eq!(ids, ["c1"]);
}

#[test]
fn the_state_answers_with_what_was_replayed() {
    let mut history = one_call();
    let st = replay(Header::new(FORMAT, "named-7"), &history);
    assert_eq!(st.id(), "named-7");
    assert_eq!(st.tool_result_text("c1"), "", "no outcome yet");
    history.extend([intent("c1"), start("c1"), outcome("c1", OutcomeStatus::Ok)]);
    let st = replay(plain(), &history);
    assert_eq!(st.tool_result_text("c1"), "ok");
    assert_eq!(st.tool_result_text("c9"), "", "an unknown call");
}

#[test]
fn the_listing_status_of_each_last_record() {
    use lazarus_session::state::status_from_tail;
    use serde_json::json;
    let table = [
        ("header", json!({}), Status::New),
        ("input", json!({}), Status::Pending),
        ("control", json!({}), Status::Pending),
        ("turn_start", json!({}), Status::Interrupted),
        ("tool_intent", json!({}), Status::Interrupted),
        ("tool_start", json!({}), Status::InDoubt),
        ("tool_outcome", json!({}), Status::Interrupted),
        ("resume", json!({}), Status::Interrupted),
        ("interrupted", json!({}), Status::Stopped),
        (
            "response",
            json!({"items": [{"type": "text"}]}),
            Status::Idle,
        ),
        (
            "response",
            json!({"items": [{"type": "tool_call"}]}),
            Status::Interrupted,
        ),
        (
            "response",
            json!({"items": [], "failure": {"message": "x"}}),
            Status::Failed,
        ),
        (
            "response",
            json!({"items": [], "failure": null}),
            Status::Idle,
        ),
        ("fork", json!({}), Status::Idle),
    ];
    for (kind, data, expected) in table {
        assert_eq!(status_from_tail(kind, &data), expected, "{kind} {data}");
    }
}
