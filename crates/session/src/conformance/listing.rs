//! Listing and reading: the status and size of every session (a live writer shows as
//! running), one session's summary, and the records after a seq.

use crate::SessionId;
use crate::state::Status;
use crate::store::SessionError;

use super::{Factory, create, run_one_tool_turn};

pub(super) fn listing_and_records_after(f: Factory) {
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
