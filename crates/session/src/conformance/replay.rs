//! Replay: a record that does not fit the session is refused and never written, and
//! replaying the log rebuilds exactly the live state (the context, the calls by state).

use crate::SessionId;
use crate::record::{
    Item, OutcomeStatus, Record, Response, ToolIntent, ToolOutcome, ToolStart, TurnStart,
};
use crate::state::{CallState, ContextEntry, Status};
use crate::store::SessionError;

use super::{Factory, create, run_one_tool_turn};

pub(super) fn invalid_records_are_refused_unwritten(f: Factory) {
    let store = f();
    let mut s = create(&*store, "s1");
    let bad = [
        Record::TurnStart(TurnStart {
            turn: 2,
            prev_seq: None,
            inputs: vec![],
        }),
        Record::Response(Response {
            turn: 1,
            items: vec![],
            usage: None,
            stop_reason: None,
            failure: None,
            model: None,
            provider_extra: None,
            attempts: vec![],
        }),
        Record::ToolOutcome(ToolOutcome {
            call_id: "nope".into(),
            status: OutcomeStatus::Ok,
            result: String::new(),
            exit_code: None,
            duration_ms: None,
        }),
    ];
    for rec in bad {
        let err = s.append(rec).unwrap_err();
        assert!(matches!(err, SessionError::Refused(_)), "refused: {err}");
    }
    drop(s);
    assert_eq!(
        store.load(&SessionId::literal("s1")).unwrap().last_seq,
        0,
        "nothing written"
    );
}

pub(super) fn full_turn_replays_into_state(f: Factory) {
    let store = f();
    let mut s = create(&*store, "s1");
    run_one_tool_turn(&mut s);
    let live = s.state().clone();
    drop(s);
    let st = store.load(&SessionId::literal("s1")).unwrap();
    assert_eq!(st.last_seq, 8);
    assert_eq!(st.turn, 2);
    assert_eq!(st.status(), Status::Idle);
    assert!(st.every_call_has_one_result());
    assert_eq!(
        st.context.len(),
        4,
        "user, assistant, tool result, assistant"
    );
    assert!(
        matches!(&st.context[2], ContextEntry::ToolResult { call, .. } if st.calls[*call].outcome.as_ref().unwrap().result == "a.txt\nb.txt")
    );
    assert_eq!(st.context, live.context, "replay equals the live state");
    let s = store.open(&SessionId::literal("s1")).unwrap();
    assert_eq!(s.open_report().records_replayed, 8);
    assert_eq!(s.state().context, live.context);
}

pub(super) fn calls_by_state(f: Factory) {
    let store = f();
    let mut s = create(&*store, "s1");
    let inp = s.append_input("m1", "user", "go").unwrap();
    s.append(Record::TurnStart(TurnStart {
        turn: 1,
        prev_seq: None,
        inputs: vec![inp.seq],
    }))
    .unwrap();
    let call = |id: &str| Item::ToolCall {
        call_id: id.into(),
        name: "shell".into(),
        arguments: "{}".into(),
    };
    s.append(Record::Response(Response {
        turn: 1,
        items: vec![call("a"), call("b"), call("c"), call("d")],
        usage: None,
        stop_reason: Some("tool_calls".into()),
        failure: None,
        model: None,
        provider_extra: None,
        attempts: vec![],
    }))
    .unwrap();
    for id in ["a", "b", "c"] {
        s.append(Record::ToolIntent(ToolIntent {
            call_id: id.into(),
            turn: 1,
            tool: "shell".into(),
            arguments: "{}".into(),
            idempotent: false,
            idempotency_key: format!("k-{id}"),
            rerun_basis: None,
        }))
        .unwrap();
    }
    for id in ["a", "b"] {
        s.append(Record::ToolStart(ToolStart {
            call_id: id.into(),
            process: None,
        }))
        .unwrap();
    }
    s.append(Record::ToolOutcome(ToolOutcome {
        call_id: "a".into(),
        status: OutcomeStatus::Ok,
        result: "done".into(),
        exit_code: Some(0),
        duration_ms: None,
    }))
    .unwrap();
    drop(s);
    let st = store.load(&SessionId::literal("s1")).unwrap();
    let states: Vec<_> = st.calls.iter().map(|c| c.state()).collect();
    assert_eq!(
        states,
        [
            CallState::Finished,
            CallState::StartedNoOutcome,
            CallState::IntentOnly,
            CallState::NotStarted
        ]
    );
    assert_eq!(
        st.status(),
        Status::InDoubt,
        "a started call without outcome"
    );
    assert!(!st.every_call_has_one_result());
}
