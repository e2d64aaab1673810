//! The `Store` conformance suite: every backend runs exactly these checks.
//!
//! A backend's test calls [`run_all`] with a function that makes a fresh, empty store.
//! Each check panics with a message naming the check when the contract is broken.

use serde_json::json;

use crate::SessionId;
use crate::inbox::InboxMessage;
use crate::record::{
    Item, OutcomeStatus, Record, Response, ToolIntent, ToolOutcome, ToolStart, TurnStart,
};
use crate::state::{CallState, ContextEntry, Status};
use crate::store::{CreateOptions, SessionError, Store};

/// Makes a fresh, empty store for one check.
pub type Factory<'a> = &'a dyn Fn() -> Box<dyn Store>;

pub type Check = (&'static str, fn(Factory));

/// Every check, by name.
pub fn checks() -> Vec<Check> {
    vec![
        ("create_is_exclusive", create_is_exclusive),
        ("hostile_ids_are_refused", hostile_ids_are_refused),
        ("inputs_are_recorded_once", inputs_are_recorded_once),
        ("one_writer_at_a_time", one_writer_at_a_time),
        (
            "invalid_records_are_refused_unwritten",
            invalid_records_are_refused_unwritten,
        ),
        ("full_turn_replays_into_state", full_turn_replays_into_state),
        ("calls_by_state", calls_by_state),
        ("fork_keeps_parent_and_prefix", fork_keeps_parent_and_prefix),
        ("listing_and_records_after", listing_and_records_after),
        ("provider_fields_round_trip", provider_fields_round_trip),
        ("export_import_is_lossless", export_import_is_lossless),
        (
            "inbox_delivers_once_while_a_writer_holds_the_session",
            inbox_delivers_once_while_a_writer_holds_the_session,
        ),
        (
            "inbox_message_recorded_before_a_crash_is_only_consumed",
            inbox_message_recorded_before_a_crash_is_only_consumed,
        ),
        (
            "inbox_waiting_makes_an_idle_session_pending",
            inbox_waiting_makes_an_idle_session_pending,
        ),
        (
            "rename_sets_and_clears_the_title",
            rename_sets_and_clears_the_title,
        ),
    ]
}

/// Runs every check against stores made by `factory`.
pub fn run_all(factory: Factory) {
    for (name, check) in checks() {
        eprintln!("conformance: {name}");
        check(factory);
    }
}

fn create(store: &dyn Store, id: &str) -> crate::Session {
    store
        .create(CreateOptions {
            id: Some(SessionId::parse(id).expect("a valid id")),
            meta: Some(json!({"workspace": "/w"})),
        })
        .unwrap_or_else(|e| panic!("create {id}: {e}"))
}

fn create_is_exclusive(f: Factory) {
    let store = f();
    let mut s = create(&*store, "s1");
    s.append_input("m1", "user", "hello").unwrap();
    drop(s);
    let err = store
        .create(CreateOptions {
            id: Some(SessionId::literal("s1")),
            meta: None,
        })
        .unwrap_err();
    assert!(
        matches!(err, SessionError::AlreadyExists { .. }),
        "create_is_exclusive: {err}"
    );
    assert_eq!(
        store.load(&SessionId::literal("s1")).unwrap().last_seq,
        1,
        "create_is_exclusive: existing data kept"
    );
    let fresh = store.create(CreateOptions::default()).unwrap();
    assert!(!fresh.id().is_empty());
}

fn hostile_ids_are_refused(f: Factory) {
    let store = f();
    for id in ["../etc/passwd", "a/b", "..", ".hidden", "", "x\ny", "-rf"] {
        // An id is checked where it enters: as an argument it cannot even be built…
        assert!(
            SessionId::parse(id).is_err(),
            "hostile_ids_are_refused: {id:?} parsed"
        );
        // …and a file that names it is refused by the store's import.
        let mut header = lazarus_ledger::Header::new(crate::FORMAT, id);
        header.created_at = "2026-01-01T00:00:00.000Z".into();
        let mut line = Vec::new();
        lazarus_ledger::frame::encode_line(
            &mut line,
            0,
            &header.created_at,
            "header",
            &serde_json::to_vec(&header).unwrap(),
        );
        assert!(
            store.import(&line).is_err(),
            "hostile_ids_are_refused: import of a session named {id:?}"
        );
    }
    assert!(store.list().unwrap().is_empty());
}

fn inputs_are_recorded_once(f: Factory) {
    let store = f();
    let mut s = create(&*store, "s1");
    let a = s.append_input("m1", "user", "hello").unwrap();
    let b = s.append_input("m1", "user", "hello again").unwrap();
    assert!(
        !a.duplicate && b.duplicate && a.seq == b.seq,
        "inputs_are_recorded_once"
    );
    drop(s);
    let mut s = store.open(&SessionId::literal("s1")).unwrap();
    let c = s.append_input("m1", "user", "hello").unwrap();
    assert_eq!((c.seq, c.duplicate), (a.seq, true), "dedup across reopen");
    let d = s.append_control("m1", "resume", None).unwrap();
    assert!(d.duplicate, "input and control ids share one space");
    assert_eq!(s.state().pending_inputs.len(), 1);
    assert_eq!(store.load(&SessionId::literal("s1")).unwrap().last_seq, 1);
}

fn inbox_delivers_once_while_a_writer_holds_the_session(f: Factory) {
    let name = "inbox_delivers_once_while_a_writer_holds_the_session";
    let store = f();
    let id = SessionId::literal("s1");
    let mut s = create(&*store, "s1");
    let m1 = InboxMessage::input("m1", "user", "first");
    let m2 = InboxMessage::input("m2", "api", "second");
    assert!(
        !store.deliver(&id, &m1).unwrap().duplicate,
        "{name}: m1 new"
    );
    assert!(
        store.deliver(&id, &m1).unwrap().duplicate,
        "{name}: m1 again"
    );
    assert!(
        !store.deliver(&id, &m2).unwrap().duplicate,
        "{name}: m2 new"
    );
    let missing = store.deliver(&SessionId::literal("nope"), &m1).unwrap_err();
    assert!(
        matches!(missing, SessionError::NotFound { .. }),
        "{name}: delivery to a missing session: {missing}"
    );
    let waiting: Vec<_> = store
        .inbox(&id, 10)
        .unwrap()
        .iter()
        .map(|m| m.message_id().to_string())
        .collect();
    assert_eq!(waiting, ["m1", "m2"], "{name}: oldest first");
    assert_eq!(
        store.sessions_with_mail().unwrap(),
        vec![id.clone()],
        "{name}: the session with mail"
    );
    // nothing is in the log until the writer drains
    assert_eq!(s.state().last_seq, 0, "{name}: delivery writes no record");
    let drained = s.drain_inbox().unwrap();
    assert_eq!(drained.len(), 2, "{name}: both drained");
    assert!(drained.iter().all(|d| !d.duplicate), "{name}: {drained:?}");
    assert_eq!((drained[0].seq, drained[1].seq), (1, 2), "{name}: in order");
    assert!(store.inbox(&id, 10).unwrap().is_empty(), "{name}: consumed");
    assert_eq!(s.state().pending_inputs.len(), 2, "{name}: both owed");
    // a redelivery after the drain: placed, then only consumed
    store.deliver(&id, &m1).unwrap();
    let again = s.drain_inbox().unwrap();
    assert!(
        again.len() == 1 && again[0].duplicate && again[0].seq == 1,
        "{name}: redelivered id: {again:?}"
    );
    assert_eq!(s.state().last_seq, 2, "{name}: nothing written twice");
    assert!(store.inbox(&id, 10).unwrap().is_empty(), "{name}: consumed");
    assert!(s.drain_inbox().unwrap().is_empty(), "{name}: empty drain");
    assert!(
        store.sessions_with_mail().unwrap().is_empty(),
        "{name}: no mail after the drain"
    );
    drop(s);
    let st = store.load(&id).unwrap();
    assert_eq!(st.last_seq, 2, "{name}: replayed");
    assert_eq!(st.pending_inputs[1].text, "second", "{name}: text kept");
}

fn inbox_message_recorded_before_a_crash_is_only_consumed(f: Factory) {
    let name = "inbox_message_recorded_before_a_crash_is_only_consumed";
    let store = f();
    let id = SessionId::literal("s1");
    let mut s = create(&*store, "s1");
    store
        .deliver(&id, &InboxMessage::input("m1", "user", "hi"))
        .unwrap();
    // the drain's append happened, the process died before consuming the message
    s.append_input("m1", "user", "hi").unwrap();
    drop(s);
    assert_eq!(
        store.inbox(&id, 10).unwrap().len(),
        1,
        "{name}: still waiting"
    );
    let mut s = store.open(&id).unwrap();
    let d = s.drain_inbox().unwrap();
    assert!(d.len() == 1 && d[0].duplicate, "{name}: {d:?}");
    assert_eq!(s.state().last_seq, 1, "{name}: recorded once");
    assert!(store.inbox(&id, 10).unwrap().is_empty(), "{name}: consumed");
}

fn inbox_waiting_makes_an_idle_session_pending(f: Factory) {
    let name = "inbox_waiting_makes_an_idle_session_pending";
    let store = f();
    let id = SessionId::literal("s1");
    drop(create(&*store, "s1"));
    assert_eq!(store.summary(&id).unwrap().status, Status::New, "{name}");
    store
        .deliver(&id, &InboxMessage::control("r1", "resume", Some("boot")))
        .unwrap();
    assert_eq!(
        store.summary(&id).unwrap().status,
        Status::Pending,
        "{name}: a waiting message is owed work"
    );
    let mut s = store.open(&id).unwrap();
    s.drain_inbox().unwrap();
    assert!(
        s.state().pending_control.is_some(),
        "{name}: control drained"
    );
    drop(s);
    assert_ne!(store.summary(&id).unwrap().status, Status::New, "{name}");
}

fn rename_sets_and_clears_the_title(f: Factory) {
    let name = "rename_sets_and_clears_the_title";
    let store = f();
    let id = SessionId::literal("s1");
    let mut s = create(&*store, "s1");
    s.append_input("m1", "user", "fix the flaky test\nin ci")
        .unwrap();
    let title = |store: &dyn Store| store.summary(&id).unwrap().title;
    assert_eq!(
        title(&*store).as_deref(),
        Some("fix the flaky test"),
        "{name}"
    );
    // a writer holds it: renaming needs none
    store.rename(&id, Some("  CI: flaky  \nignored")).unwrap();
    assert_eq!(title(&*store).as_deref(), Some("CI: flaky"), "{name}: set");
    let listed = store.list().unwrap();
    assert_eq!(
        listed[0].title.as_deref(),
        Some("CI: flaky"),
        "{name}: list"
    );
    store.rename(&id, Some("again")).unwrap();
    assert_eq!(title(&*store).as_deref(), Some("again"), "{name}: replaced");
    assert!(
        store.rename(&id, Some(" \n ")).is_err(),
        "{name}: empty refused"
    );
    assert_eq!(title(&*store).as_deref(), Some("again"), "{name}: kept");
    store.rename(&id, None).unwrap();
    assert_eq!(
        title(&*store).as_deref(),
        Some("fix the flaky test"),
        "{name}: cleared"
    );
    let missing = store
        .rename(&SessionId::literal("nope"), Some("x"))
        .unwrap_err();
    assert!(
        matches!(missing, SessionError::NotFound { .. }),
        "{name}: {missing}"
    );
    assert_eq!(s.state().last_seq, 1, "{name}: the log is not written");
}

fn one_writer_at_a_time(f: Factory) {
    let store = f();
    let s = create(&*store, "s1");
    let err = store.open(&SessionId::literal("s1")).unwrap_err();
    assert!(
        err.to_string().contains("in use"),
        "one_writer_at_a_time: {err}"
    );
    // readers never need the lock
    store.load(&SessionId::literal("s1")).unwrap();
    store.records(&SessionId::literal("s1"), 0, 10).unwrap();
    drop(s);
    store
        .open(&SessionId::literal("s1"))
        .expect("free again once the writer is gone");
}

fn invalid_records_are_refused_unwritten(f: Factory) {
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

/// input → turn 1 (tool call) → intent → start → outcome → turn 2 (text).
fn run_one_tool_turn(s: &mut crate::Session) {
    let inp = s.append_input("m1", "user", "list files").unwrap();
    let t1 = s
        .append(Record::TurnStart(TurnStart {
            turn: 1,
            prev_seq: None,
            inputs: vec![inp.seq],
        }))
        .unwrap();
    s.append(Record::Response(Response {
        turn: 1,
        items: vec![
            Item::Text {
                text: "Let me look.".into(),
            },
            Item::ToolCall {
                call_id: "c1".into(),
                name: "list_dir".into(),
                arguments: r#"{"path":"."}"#.into(),
            },
        ],
        usage: None,
        stop_reason: Some("tool_calls".into()),
        failure: None,
        model: Some("m".into()),
        provider_extra: None,
        attempts: vec![],
    }))
    .unwrap();
    s.append(Record::ToolIntent(ToolIntent {
        call_id: "c1".into(),
        turn: 1,
        tool: "list_dir".into(),
        arguments: r#"{"path":"."}"#.into(),
        idempotent: true,
        idempotency_key: "s1:c1".into(),
    }))
    .unwrap();
    s.append(Record::ToolStart(ToolStart {
        call_id: "c1".into(),
        process: None,
    }))
    .unwrap();
    s.append(Record::ToolOutcome(ToolOutcome {
        call_id: "c1".into(),
        status: OutcomeStatus::Ok,
        result: "a.txt\nb.txt".into(),
        exit_code: None,
        duration_ms: Some(1),
    }))
    .unwrap();
    s.append(Record::TurnStart(TurnStart {
        turn: 2,
        prev_seq: Some(t1.seq),
        inputs: vec![],
    }))
    .unwrap();
    s.append(Record::Response(Response {
        turn: 2,
        items: vec![Item::Text {
            text: "Two files.".into(),
        }],
        usage: None,
        stop_reason: Some("stop".into()),
        failure: None,
        model: None,
        provider_extra: None,
        attempts: vec![],
    }))
    .unwrap();
}

fn full_turn_replays_into_state(f: Factory) {
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

fn calls_by_state(f: Factory) {
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

fn fork_keeps_parent_and_prefix(f: Factory) {
    let store = f();
    let mut s = create(&*store, "p");
    run_one_tool_turn(&mut s);
    drop(s);
    let parent_before = store.records(&SessionId::literal("p"), 0, 1000).unwrap();
    let child = store
        .fork(&SessionId::literal("p"), 1, Some(&SessionId::literal("c")))
        .unwrap();
    assert_eq!(child.parent.as_deref(), Some("p"));
    assert_eq!(
        store.records(&SessionId::literal("p"), 0, 1000).unwrap(),
        parent_before,
        "parent untouched"
    );
    let st = store.load(&SessionId::literal("c")).unwrap();
    assert_eq!(st.turn, 1);
    assert!(
        st.every_call_has_one_result(),
        "inherited tool results kept"
    );
    assert_eq!(st.context.len(), 3);
    assert_eq!(st.forked_at_turn, Some(1));
    // the child continues on its own
    let mut c = store.open(&SessionId::literal("c")).unwrap();
    c.append_input("m2", "user", "now something else").unwrap();
    drop(c);
    let gc = store
        .fork(&SessionId::literal("c"), 1, Some(&SessionId::literal("gc")))
        .unwrap();
    assert_eq!(gc.parent.as_deref(), Some("c"));
    assert_eq!(
        store.lineage(&SessionId::literal("gc")).unwrap(),
        ["gc", "c", "p"]
    );
    let err = store
        .fork(&SessionId::literal("p"), 1, Some(&SessionId::literal("c")))
        .unwrap_err();
    assert!(matches!(err, SessionError::AlreadyExists { .. }), "{err}");
    let err = store.fork(&SessionId::literal("p"), 5, None).unwrap_err();
    assert!(matches!(err, SessionError::BadForkPoint { .. }), "{err}");
    let at0 = store
        .fork(
            &SessionId::literal("p"),
            0,
            Some(&SessionId::literal("zero")),
        )
        .unwrap();
    assert_eq!(store.load(&at0.id).unwrap().pending_inputs.len(), 1);
}

fn listing_and_records_after(f: Factory) {
    let store = f();
    let mut a = create(&*store, "a");
    run_one_tool_turn(&mut a);
    let mut b = create(&*store, "b");
    b.append_input("x", "user", "pending").unwrap();
    drop(a);
    let list = store.list().unwrap();
    let by_id = |id: &str| list.iter().find(|s| s.id == id).unwrap().clone();
    assert_eq!(by_id("a").status, Status::Idle);
    assert_eq!(by_id("a").records, 8);
    assert_eq!(by_id("b").status, Status::Running, "b's writer is alive");
    drop(b);
    assert_eq!(
        store.summary(&SessionId::literal("b")).unwrap().status,
        Status::Pending
    );
    let recs = store.records(&SessionId::literal("a"), 3, 2).unwrap();
    assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(recs[0].kind, "tool_intent");
    assert!(
        store
            .records(&SessionId::literal("a"), 8, 10)
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store.summary(&SessionId::literal("zzz")),
        Err(SessionError::NotFound { .. })
    ));
}

fn provider_fields_round_trip(f: Factory) {
    let store = f();
    let mut s = create(&*store, "s1");
    let inp = s.append_input("m", "user", "hi").unwrap();
    s.append(Record::TurnStart(TurnStart {
        turn: 1,
        prev_seq: None,
        inputs: vec![inp.seq],
    }))
    .unwrap();
    let extra = json!({"system_fingerprint": "fp_1", "x_vendor": {"nested": [1, 2, {"k": null}]}});
    let resp = Response {
        turn: 1,
        items: vec![Item::Reasoning { text: "hmm".into() }],
        usage: None,
        stop_reason: Some("stop".into()),
        failure: None,
        model: None,
        provider_extra: extra.as_object().cloned(),
        attempts: vec![],
    };
    s.append(Record::Response(resp.clone())).unwrap();
    drop(s);
    let recs = store.records(&SessionId::literal("s1"), 0, 10).unwrap();
    let stored = recs.iter().find(|r| r.kind == "response").unwrap();
    assert_eq!(
        stored.data,
        serde_json::to_value(&resp).unwrap(),
        "provider_fields_round_trip"
    );
    assert_eq!(
        store
            .load(&SessionId::literal("s1"))
            .unwrap()
            .last_response
            .unwrap()
            .stop_reason
            .as_deref(),
        Some("stop")
    );
}

fn export_import_is_lossless(f: Factory) {
    let a = f();
    let mut s = create(&*a, "p");
    run_one_tool_turn(&mut s);
    drop(s);
    a.fork(
        &SessionId::literal("p"),
        1,
        Some(&SessionId::literal("child")),
    )
    .unwrap();
    let mut exported = Vec::new();
    let n = a
        .export_to(&SessionId::literal("child"), &mut exported)
        .unwrap();
    assert_eq!(n as usize, exported.len());
    assert_eq!(
        a.summary(&SessionId::literal("child")).unwrap().bytes,
        n,
        "export_import_is_lossless: size"
    );
    let b = f();
    let imported = b.import(&exported).unwrap();
    assert_eq!(imported.id, "child");
    assert_eq!(imported.parent.as_deref(), Some("p"));
    let mut again = Vec::new();
    b.export_to(&SessionId::literal("child"), &mut again)
        .unwrap();
    assert_eq!(again, exported, "export_import_is_lossless: same bytes");
    assert_eq!(
        b.load(&SessionId::literal("child")).unwrap().context,
        a.load(&SessionId::literal("child")).unwrap().context
    );
    // never overwrites; bad input changes nothing
    assert!(matches!(
        b.import(&exported),
        Err(SessionError::AlreadyExists { .. })
    ));
    let mut broken = exported.clone();
    let k = broken.len() / 2;
    broken[k] ^= 0x20;
    let c = f();
    assert!(c.import(&broken).is_err(), "a damaged export is refused");
    assert!(
        c.list().unwrap().is_empty(),
        "nothing written by a refused import"
    );
    assert!(c.import(b"not json\n").is_err());
}

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
    vec![
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
    ]
}
