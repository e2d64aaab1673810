//! Mail signals (LISTEN/NOTIFY): a delivery to a session's inbox wakes the store that
//! watches for mail with that session's id; a rolled-back or duplicate delivery does not;
//! and after the listening connection is killed the watcher listens again, says so with a
//! `None` (look at every inbox), and is woken by the next delivery.
//! Needs `LAZARUS_TEST_PG` (see `scripts/pg-test-server.sh`).

mod common;

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use lazarus_session::{CreateOptions, InboxMessage, SessionId, Store};

/// Generous: these wait for a signal that comes in milliseconds; the bound only turns a
/// missing one into a failure instead of a hang.
const WAIT: Duration = Duration::from_secs(20);

fn watch(store: &dyn Store) -> Receiver<Option<String>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let listening = store.watch_mail(Arc::new(move |id: Option<&str>| {
        if let Ok(tx) = tx.lock() {
            let _ = tx.send(id.map(str::to_string));
        }
    }));
    assert!(listening, "the PostgreSQL store signals mail");
    rx
}

/// Waits for the next signal that is `want`, skipping others; fails after [`WAIT`].
fn wait_for(rx: &Receiver<Option<String>>, want: Option<&str>) {
    let t0 = Instant::now();
    loop {
        match rx.recv_timeout(WAIT.saturating_sub(t0.elapsed())) {
            Ok(got) if got.as_deref() == want => return,
            Ok(_) => continue,
            Err(RecvTimeoutError::Timeout) => panic!("no signal {want:?} within {WAIT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the watcher went away"),
        }
    }
}

/// Nothing arrives for a while (a signal that should not be sent).
fn quiet(rx: &Receiver<Option<String>>, id: &str) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(500) {
        if let Ok(Some(got)) = rx.recv_timeout(Duration::from_millis(50)) {
            assert_ne!(got, id, "a signal for {id} that should not have been sent");
        }
    }
}

#[test]
fn deliveries_wake_the_watcher_and_it_listens_again_after_its_connection_is_killed() {
    let Some(url) = common::pg_url(
        "deliveries_wake_the_watcher_and_it_listens_again_after_its_connection_is_killed",
    ) else {
        return;
    };
    let watcher = common::fresh_store(&url);
    let sender = common::same_schema(&url, &watcher);
    let other_schema = common::fresh_store(&url);
    let id = SessionId::parse("mailbox").expect("id");
    drop(
        sender
            .create(CreateOptions {
                id: Some(id.clone()),
                meta: None,
            })
            .expect("create"),
    );
    drop(
        other_schema
            .create(CreateOptions {
                id: Some(id.clone()),
                meta: None,
            })
            .expect("create"),
    );
    let rx = watch(&watcher);
    wait_for(&rx, None); // listening

    sender
        .deliver(&id, &InboxMessage::input("m1", "user", "hello"))
        .expect("deliver");
    wait_for(&rx, Some("mailbox"));

    // The same message again is a duplicate: nothing new, no signal.
    let d = sender
        .deliver(&id, &InboxMessage::input("m1", "user", "hello"))
        .expect("deliver");
    assert!(d.duplicate);
    quiet(&rx, "mailbox");
    // Another schema's deliveries are another channel.
    other_schema
        .deliver(&id, &InboxMessage::input("x1", "user", "elsewhere"))
        .expect("deliver");
    quiet(&rx, "mailbox");

    // Kill the listening connection: the watcher listens again and says so.
    let killer = common::psql(&url);
    let pattern = format!("lazarus mail listener pid={} %", std::process::id());
    let mut killed = 0;
    let t0 = Instant::now();
    while killed == 0 && t0.elapsed() < WAIT {
        killed = killer
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1 AND query ILIKE 'LISTEN%'",
                &[&pattern],
            )
            .len();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(killed > 0, "no listening connection found to kill");
    wait_for(&rx, None);
    sender
        .deliver(&id, &InboxMessage::input("m2", "user", "after the kill"))
        .expect("deliver");
    wait_for(&rx, Some("mailbox"));
}
