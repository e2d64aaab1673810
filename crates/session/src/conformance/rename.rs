//! Rename: a title is set, replaced and cleared without a writer and without writing the
//! log; an empty title and a missing session are refused.

use crate::SessionId;
use crate::store::{SessionError, Store};

use super::{Factory, create};

pub(super) fn rename_sets_and_clears_the_title(f: Factory) {
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
