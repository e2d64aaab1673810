//! PostgreSQL crash-restarted under load (`pg_ctl stop -m immediate`, then start): every
//! writer reports the loss, and after reconnecting no acknowledged record is missing and
//! the logs have no gap. Runs its own private server through `scripts/pg-test-server.sh`
//! (the shared one serves other tests meanwhile); needs `LAZARUS_TEST_PG` like the others,
//! as the sign that PostgreSQL is available here.

mod common;

use std::time::{Duration, Instant};

use lazarus_session::{CreateOptions, Store};
use lazarus_store_postgres::{PgOptions, PgStore};

/// A session id written in the test (checked; a bad one is a bug in the test).
#[allow(dead_code)]
fn sid(id: &str) -> lazarus_session::SessionId {
    lazarus_session::SessionId::parse(id).expect("a valid session id")
}

#[test]
fn server_crash_restart_under_load_loses_nothing_acknowledged() {
    if common::pg_url("server_crash_restart_under_load_loses_nothing_acknowledged").is_none() {
        return;
    }
    let (server, url) = common::Server::start(&[]);
    let opts = || PgOptions {
        schema: "restart".into(),
        pool_size: 2,
        connect_timeout: Duration::from_secs(2),
        // the writers' leases outlive the crash: short, so the check below can reopen soon
        lease_ttl: Duration::from_secs(1),
        ..PgOptions::default()
    };
    let store = PgStore::connect_with(&url, opts()).unwrap();
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let mut s = store
                .create(CreateOptions {
                    id: Some(sid(&format!("s{t}"))),
                    meta: None,
                })
                .unwrap();
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0.. {
                    match s.append_input(&format!("m{i}"), "api", "under load") {
                        Ok(a) => acked.push((format!("m{i}"), a.seq)),
                        Err(e) => return (acked, e.to_string()),
                    }
                }
                unreachable!()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    server.run("restart");
    let results: Vec<_> = writers.into_iter().map(|h| h.join().unwrap()).collect();
    drop(store);

    // reconnect (the server is back on the same port) and check every session
    let deadline = Instant::now() + Duration::from_secs(30);
    let store = loop {
        match PgStore::connect_with(&url, opts()) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                eprintln!("waiting for the server: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("server did not come back: {e}"),
        }
    };
    for (t, (acked, err)) in results.iter().enumerate() {
        assert!(!acked.is_empty(), "s{t} appended before the restart");
        assert!(
            err.contains("no longer write") || err.contains("unavailable"),
            "s{t} reports the loss: {err}"
        );
        // the dead writer's lease runs out by itself (it could not be released: no server)
        let deadline = Instant::now() + Duration::from_secs(10);
        let s = loop {
            match store.open(&sid(&format!("s{t}"))) {
                Ok(s) => break s,
                Err(e) if e.to_string().contains("in use") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("s{t}: {e}"),
            }
        };
        let st = s.state();
        for (id, seq) in acked {
            assert_eq!(st.input_ids.get(id), Some(seq), "s{t}: acknowledged {id}");
        }
        let max = acked.last().unwrap().1;
        assert!(st.last_seq == max || st.last_seq == max + 1, "s{t}");
        let bytes = store.export(&sid(&format!("s{t}"))).unwrap();
        assert_eq!(
            bytes.iter().filter(|&&b| b == b'\n').count() as u64,
            st.last_seq + 1
        );
    }
}
