//! The lock file: a creation that fails leaves none behind, and removing it can never let two
//! writers in (whoever waited on the removed file opens the path afresh).

use lazarus_ledger::lock::WriterLock;
use lazarus_ledger::{Header, LedgerError, Options, Writer, lock_path};

#[test]
fn a_creation_that_fails_leaves_no_lock_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    // A fork prefix that does not end with a complete line: refused after the lock is taken.
    let err = Writer::create(
        dir,
        Header::new("t", "f1"),
        b"{\"seq\":1,\"torn",
        Options::default(),
    )
    .expect_err("a bad prefix is refused");
    assert!(err.to_string().contains("prefix"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_creation_refused_because_the_ledger_exists_keeps_its_lock_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    drop(Writer::create(dir, Header::new("t", "e1"), b"", Options::default()).expect("create"));
    assert!(Writer::create(dir, Header::new("t", "e1"), b"", Options::default()).is_err());
    assert!(
        lock_path(dir, "e1").exists(),
        "the existing session's lock file"
    );
}

#[test]
fn a_lock_removed_by_its_holder_is_never_held_twice() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().to_path_buf();
    let lock = lock_path(&dir, "r1");
    let session = dir.join("r1.jsonl");
    for _ in 0..50 {
        let first = WriterLock::acquire(&lock, &session).expect("first");
        // A second writer opens the same file and waits on its flock…
        let (l2, s2) = (lock.clone(), session.clone());
        let second = std::thread::spawn(move || WriterLock::acquire(&l2, &s2));
        std::thread::sleep(std::time::Duration::from_millis(10));
        // …while the holder removes the file (as a failed creation does) and lets go.
        std::fs::remove_file(&lock).expect("remove");
        drop(first);
        let second = second.join().expect("thread").expect("second gets a lock");
        assert!(
            lock.exists(),
            "the second writer holds a lock file no longer at the path"
        );
        // A third writer must find the lock held.
        match WriterLock::acquire(&lock, &session) {
            Err(LedgerError::Locked { .. }) => {}
            other => panic!("a third writer got in beside the second: {other:?}"),
        }
        drop(second);
        let _ = std::fs::remove_file(&lock);
    }
}
