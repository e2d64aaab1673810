//! A thousand open sessions on a server that allows twenty connections: writers pin no
//! connection (a lease row fences them), so one store's connections never exceed its pool,
//! a second store (a second gateway) still connects, and every append lands.
//!
//! Starts its own PostgreSQL with `max_connections = 20` (scripts/pg-test-server.sh); runs
//! where `LAZARUS_TEST_PG` is set (the sign that PostgreSQL is installed and meant to be
//! tested), fails loudly where CI requires it.

mod common;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lazarus_session::{CreateOptions, SessionId, Status, Store};
use lazarus_store_postgres::{PgOptions, PgStore};

const SESSIONS: usize = 1000;
const POOL: usize = 6;

#[test]
fn a_thousand_open_sessions_on_twenty_connections() {
    if common::pg_url("a_thousand_open_sessions_on_twenty_connections").is_none() {
        return;
    }
    let (_server, url) = common::Server::start(&[("LAZARUS_PG_MAX_CONNECTIONS", "20")]);
    let opts = || PgOptions {
        schema: "many".into(),
        pool_size: POOL,
        ..PgOptions::default()
    };
    let store = PgStore::connect_with(&url, opts()).unwrap();
    let watcher = common::psql(&url);
    let max_conns: i64 =
        watcher.query("SELECT current_setting('max_connections')::bigint", &[])[0].get(0);
    assert_eq!(max_conns, 20);

    // Sample this process's server connections all along.
    let pattern = format!("lazarus pid={} %", std::process::id());
    let peak = Arc::new(AtomicI64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let n: i64 = watcher.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1",
                    &[&pattern],
                )[0]
                .get(0);
                peak.fetch_max(n, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };

    // Every session created and kept open (its writer alive), from 16 threads.
    let sessions = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|s| {
        for t in 0..16 {
            let (store, sessions) = (store.clone(), sessions.clone());
            s.spawn(move || {
                for i in (t..SESSIONS).step_by(16) {
                    let mut sess = store
                        .create(CreateOptions {
                            id: Some(SessionId::parse(&format!("s{i:04}")).unwrap()),
                            meta: None,
                        })
                        .unwrap();
                    sess.append_input("m1", "user", "hello").unwrap();
                    sessions.lock().unwrap().push(sess);
                }
            });
        }
    });
    let mut open = Arc::try_unwrap(sessions).unwrap().into_inner().unwrap();
    assert_eq!(open.len(), SESSIONS);

    // A second store on the same server (another gateway) connects and sees them all running.
    let other = PgStore::connect_with(&url, opts()).unwrap();
    let listed = other.list().unwrap();
    assert_eq!(listed.len(), SESSIONS);
    assert!(listed.iter().all(|s| s.status == Status::Running));

    // Every open writer appends again, all at once.
    std::thread::scope(|s| {
        for chunk in open.chunks_mut(SESSIONS / 16) {
            s.spawn(move || {
                for sess in chunk {
                    sess.append_input("m2", "user", "again").unwrap();
                }
            });
        }
    });
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let peak = peak.load(Ordering::Relaxed);
    eprintln!("{SESSIONS} open sessions, peak server connections of this process: {peak}");
    assert!(peak >= 1, "the sampler saw our connections");
    assert!(
        peak as usize <= 2 * POOL,
        "connections {peak} exceed the two stores' pools ({POOL} each)"
    );
    drop(open);
    let listed = other.list().unwrap();
    assert!(
        listed
            .iter()
            .all(|s| s.records == 2 && s.status == Status::Pending)
    );
}
