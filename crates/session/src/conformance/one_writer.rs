//! One writer at a time (G5): a second writer is refused while the first lives, readers
//! never need the lock, and the session is free again once the writer is gone.

use crate::SessionId;

use super::{Factory, create};

pub(super) fn one_writer_at_a_time(f: Factory) {
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
