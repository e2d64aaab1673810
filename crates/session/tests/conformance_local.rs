//! The Store conformance suite against the local-file store.

use lazarus_session::{LocalStore, Store, conformance};

#[test]
fn local_store_conforms() {
    let dirs = std::sync::Mutex::new(Vec::new());
    let factory = || -> Box<dyn Store> {
        let d = tempfile::tempdir().unwrap();
        let store = LocalStore::open(d.path()).unwrap();
        dirs.lock().unwrap().push(d);
        Box::new(store)
    };
    conformance::run_all(&factory);
}
