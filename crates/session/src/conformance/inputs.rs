//! Exactly-once inputs (G6): an input or control id is recorded once, across reopens and
//! whoever delivers it; messages delivered through the inbox while a writer holds the
//! session are recorded once by its drain, also when a crash came between the two.

use crate::SessionId;
use crate::inbox::InboxMessage;
use crate::state::Status;
use crate::store::SessionError;

use super::{Factory, create};

pub(super) fn inputs_are_recorded_once(f: Factory) {
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

pub(super) fn inbox_delivers_once_while_a_writer_holds_the_session(f: Factory) {
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

pub(super) fn inbox_message_recorded_before_a_crash_is_only_consumed(f: Factory) {
    let name = "inbox_message_recorded_before_a_crash_is_only_consumed";
    let store = f();
    let id = SessionId::literal("s1");
    let mut s = create(&*store, "s1");
    s.append_input("m1", "user", "hi").unwrap();
    drop(s);
    // the state a crash between a drain's append and its consuming leaves: the log holds the
    // message id, and the message still waits
    store
        .deliver(&id, &InboxMessage::input("m1", "user", "hi"))
        .unwrap();
    assert_eq!(
        store.inbox(&id, 10).unwrap().len(),
        1,
        "{name}: still waiting"
    );
    // the next writer drains it at open: only consumed
    let mut s = store.open(&id).unwrap();
    let d = s.take_drained();
    assert!(d.len() == 1 && d[0].duplicate, "{name}: {d:?}");
    assert_eq!(s.state().last_seq, 1, "{name}: recorded once");
    assert!(store.inbox(&id, 10).unwrap().is_empty(), "{name}: consumed");
}

pub(super) fn inbox_waiting_is_shown_and_drained_by_the_next_writer(f: Factory) {
    let name = "inbox_waiting_is_shown_and_drained_by_the_next_writer";
    let store = f();
    let id = SessionId::literal("s1");
    drop(create(&*store, "s1"));
    assert_eq!(store.summary(&id).unwrap().status, Status::New, "{name}");
    store
        .deliver(&id, &InboxMessage::control("r1", "resume", Some("boot")))
        .unwrap();
    let listed = store.summary(&id).unwrap();
    assert_eq!(
        (listed.status, listed.waiting),
        (Status::New, 1),
        "{name}: the log's status, and the message waiting"
    );
    assert!(listed.waiting_since.is_some(), "{name}: since when");
    assert!(listed.owes_work(), "{name}: a waiting message is owed work");
    assert_eq!(store.waiting(&id).unwrap().messages, 1, "{name}");
    // whoever becomes the writer records it before anything else: at open
    let mut s = store.open(&id).unwrap();
    assert_eq!(s.take_drained().len(), 1, "{name}: drained at open");
    assert!(
        s.state().pending_control.is_some(),
        "{name}: control recorded"
    );
    drop(s);
    let after = store.summary(&id).unwrap();
    assert_eq!(
        (after.status, after.waiting),
        (Status::Pending, 0),
        "{name}"
    );
}

pub(super) fn a_full_inbox_refuses_and_changes_nothing(f: Factory) {
    use crate::inbox::INBOX_BYTES_MAX;
    let name = "a_full_inbox_refuses_and_changes_nothing";
    let store = f();
    let id = SessionId::literal("s1");
    let held = create(&*store, "s1");
    // messages near the byte limit: the limit on bytes is reached first
    let big = "x".repeat(usize::try_from(INBOX_BYTES_MAX / 8).unwrap_or(1 << 20));
    let mut placed = 0;
    let err = loop {
        match store.deliver(
            &id,
            &InboxMessage::input(&format!("b{placed}"), "user", &big),
        ) {
            Ok(d) => {
                assert!(!d.duplicate, "{name}");
                placed += 1;
                assert!(placed <= 8, "{name}: the bytes limit never refused");
            }
            Err(e) => break e,
        }
    };
    assert!(
        matches!(err, SessionError::InboxFull { .. }),
        "{name}: {err}"
    );
    assert!(err.to_string().contains("retry"), "{name}: {err}");
    let before = store.waiting(&id).unwrap();
    assert_eq!(
        before.messages, placed,
        "{name}: nothing added by the refusal"
    );
    // a redelivery of a waiting id is a duplicate, not a refusal
    assert!(
        store
            .deliver(&id, &InboxMessage::input("b0", "user", &big))
            .unwrap()
            .duplicate,
        "{name}"
    );
    // once the writer records what waits, there is room again
    drop(held);
    let mut s = store.open(&id).unwrap();
    assert_eq!(s.take_drained().len() as u64, placed, "{name}");
    store
        .deliver(&id, &InboxMessage::input("after", "user", "room again"))
        .unwrap();
    drop(s);
}

pub(super) fn an_inbox_message_that_does_not_fit_stays_and_is_named(f: Factory) {
    let name = "an_inbox_message_that_does_not_fit_stays_and_is_named";
    let store = f();
    let id = SessionId::literal("s1");
    let mut s = create(&*store, "s1");
    s.append_input("m1", "user", "hi").unwrap();
    drop(s);
    // a decision on a call nobody asked about, delivered past every door's check
    let stray = crate::record::Approval {
        input_id: crate::record::approval_input_id("c9"),
        call_id: "c9".into(),
        decision: crate::record::Decision::Allow,
        scope: crate::record::Scope::Once,
        reason: None,
        by: "hand".into(),
        decided_at: "2026-12-02T10:00:00.000Z".into(),
    };
    store.deliver(&id, &InboxMessage::approval(stray)).unwrap();
    let err = match store.open(&id) {
        Ok(_) => panic!("{name}: opened past a message it cannot record"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("approval/c9") && err.contains("stays in the inbox"),
        "{name}: {err}"
    );
    // nothing accepted is dropped, nothing was written
    assert_eq!(
        store.inbox(&id, 10).unwrap().len(),
        1,
        "{name}: still waiting"
    );
    assert_eq!(
        store.load(&id).unwrap().last_seq,
        1,
        "{name}: nothing written"
    );
}
