//! Forks: a fork copies the prefix up to a complete turn, leaves its parent untouched,
//! continues on its own, keeps its lineage, and refuses a taken name or a bad fork point.

use crate::SessionId;
use crate::store::SessionError;

use super::{Factory, create, run_one_tool_turn};

pub(super) fn fork_keeps_parent_and_prefix(f: Factory) {
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
