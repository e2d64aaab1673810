//! An input recorded by a deferred append (the gateway's accept path) is answered — first or as
//! a duplicate — only once durable: a duplicate that arrives while the original is on its way
//! to the disk waits for it, and one whose original's sync failed gets the error, never a
//! `duplicate: true` for a record the disk does not hold.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lazarus_ledger::sim::{Loss, SimFs, block_on};
use lazarus_ledger::{Options, SharedSync};
use lazarus_session::{CreateOptions, LocalStore, SessionId, Store};

const DIR: &str = "/sim";

fn store_on(fs: &SimFs, shared: &SharedSync) -> LocalStore {
    LocalStore::with_options(
        Path::new(DIR),
        Options {
            fs: Arc::new(fs.clone()),
            lock: false,
            shared_sync: Some(shared.clone()),
            ..Options::default()
        },
    )
}

#[test]
fn a_duplicate_waits_for_its_original_and_never_outlives_its_failure() {
    let fs = SimFs::new();
    fs.set_sync_latency(Duration::from_millis(40));
    let shared = SharedSync::start(Arc::new(fs.clone()), Path::new(DIR)).unwrap();
    let store = store_on(&fs, &shared);
    let id = SessionId::parse("dup").unwrap();
    let mut s = store
        .create(CreateOptions {
            id: Some(id.clone()),
            meta: None,
        })
        .unwrap();

    // A duplicate while the original is in flight waits until it is durable.
    let (ack, d) = s
        .try_append_input_deferred("m1", "user", "hello")
        .unwrap()
        .expect("a local session with a shared sync defers");
    assert!(!ack.duplicate);
    assert!(
        s.duplicate_if_settled("m1").is_none(),
        "the answer without waiting must not be given while the original is in flight"
    );
    // driven elsewhere, as the gateway's own task drives it
    let original = std::thread::spawn(move || block_on(d));
    let dup = s.append_input("m1", "user", "hello").unwrap();
    assert!(dup.duplicate && dup.seq == ack.seq);
    // the power goes right after the duplicate's answer: the original must be on the disk
    let disk = fs.crash(|_| Loss::Prefix(0));
    let shared_there = SharedSync::start(Arc::new(disk.clone()), Path::new(DIR)).unwrap();
    assert!(
        store_on(&disk, &shared_there)
            .load(&id)
            .unwrap()
            .input_ids
            .contains_key("m1"),
        "the duplicate was answered before its original was durable"
    );
    original.join().unwrap().unwrap();
    let now = s
        .duplicate_if_settled("m1")
        .expect("a durable original's resend is answered without waiting");
    assert!(now.duplicate && now.seq == ack.seq);
    assert!(s.duplicate_if_settled("never-sent").is_none());

    // The original's sync fails (the batch, and then its own fdatasync): the duplicate is an
    // error, and nothing after it is acknowledged.
    fs.set_sync_latency(Duration::ZERO);
    fs.fail_sync(0);
    let (_, d) = s
        .try_append_input_deferred("m2", "user", "lost")
        .unwrap()
        .unwrap();
    assert!(
        block_on(d).is_err(),
        "the failed sync is the original's answer"
    );
    assert!(
        s.duplicate_if_settled("m2").is_none(),
        "a resend of a record whose sync failed must take the path that reports it"
    );
    let again = s.append_input("m2", "user", "lost");
    assert!(
        again.is_err(),
        "a duplicate of a record whose sync failed must not be acknowledged: {again:?}"
    );
    assert!(s.append_input("m3", "user", "after").is_err());
    drop(s);
    let disk = fs.crash(|_| Loss::Prefix(0));
    let on_disk = store_on(
        &disk,
        &SharedSync::start(Arc::new(disk.clone()), Path::new(DIR)).unwrap(),
    )
    .load(&id)
    .unwrap();
    assert!(on_disk.input_ids.contains_key("m1"));
    assert!(!on_disk.input_ids.contains_key("m2"));
}
