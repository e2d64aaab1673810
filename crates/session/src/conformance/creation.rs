//! Creating a session: a session is created once (never over an existing one), and an id
//! that could escape the store is refused wherever it enters, import included (G10).

use crate::SessionId;
use crate::store::{CreateOptions, SessionError};

use super::{Factory, create};

pub(super) fn create_is_exclusive(f: Factory) {
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

pub(super) fn hostile_ids_are_refused(f: Factory) {
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
