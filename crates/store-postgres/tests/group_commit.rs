//! Group commit under load: many writers of one store share append batches while another
//! store takes half of their sessions over, and the heartbeat renews every lease several
//! times a second. Each writer keeps its own fence: an acknowledged record is there, a
//! writer whose lease was taken writes nothing after the take, its neighbours in the batch
//! go on, and no batch deadlocks with a renewal (the server's deadlock count; batches and
//! renewals lock lease rows in session order. Removing that order did not provoke a deadlock
//! here in three runs, so this check guards the ordering but does not prove it is needed).
//! Needs `LAZARUS_TEST_PG` (see `scripts/pg-test-server.sh`).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use lazarus_session::{CreateOptions, SessionId, Store};
use lazarus_store_postgres::{PgOptions, PgStore};

fn sid(id: &str) -> SessionId {
    SessionId::parse(id).expect("a valid session id")
}

const SESSIONS: usize = 24;

/// What one writer of store A did: the inputs acknowledged (id, seq), and the error that
/// stopped it, if any.
type Acked = (Vec<(String, u64)>, Option<String>);

#[test]
fn writers_sharing_batches_keep_their_own_fences() {
    let Some(url) = common::pg_url("writers_sharing_batches_keep_their_own_fences") else {
        return;
    };
    let schema = common::fresh_schema();
    let opts = || PgOptions {
        // one batch in flight: whatever arrives meanwhile leaves together
        append_batches: 1,
        // renewed every 60 ms, while the batches run
        lease_ttl: Duration::from_millis(300),
        ..common::options(&schema)
    };
    let a = Arc::new(PgStore::connect_with(&url, opts()).unwrap());
    let b = PgStore::connect_with(&url, opts()).unwrap();
    let psql = common::psql(&url);
    let deadlocks = || -> i64 {
        psql.query(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )[0]
        .get(0)
    };
    let deadlocks_before = deadlocks();

    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(SESSIONS + 1));
    let writers: Vec<_> = (0..SESSIONS)
        .map(|n| {
            let (a, stop, start) = (a.clone(), stop.clone(), start.clone());
            std::thread::spawn(move || -> Acked {
                let mut s = a
                    .create(CreateOptions {
                        id: Some(sid(&format!("s{n}"))),
                        meta: None,
                    })
                    .unwrap();
                start.wait();
                let mut acked = Vec::new();
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let id = format!("a{i}");
                    match s.append_input(&id, "user", "from a") {
                        Ok(ack) => acked.push((id, ack.seq)),
                        Err(e) => {
                            // once lost, it stays lost
                            let again = s.append_input("late", "user", "x").unwrap_err();
                            assert!(again.to_string().contains("no longer write"), "{again}");
                            return (acked, Some(e.to_string()));
                        }
                    }
                }
                (acked, None)
            })
        })
        .collect();
    start.wait();

    // take every second session over from b, while a's writers append
    let mut taken: HashMap<String, Vec<u64>> = HashMap::new();
    for n in (0..SESSIONS).step_by(2) {
        std::thread::sleep(Duration::from_millis(40));
        let id = format!("s{n}");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut s = loop {
            psql.execute(
                &format!(
                    "UPDATE \"{schema}\".leases SET expires_at = now() - interval '1 second' WHERE session_id = $1"
                ),
                &[&id],
            )
            .expect("expire the lease");
            match b.open(&sid(&id)) {
                Ok(s) => break s,
                Err(e) if e.to_string().contains("in use") && Instant::now() < deadline => {}
                Err(e) => panic!("take over {id}: {e}"),
            }
        };
        let seqs = (0..3)
            .map(|k| {
                s.append_input(&format!("b{k}"), "user", "from b")
                    .unwrap()
                    .seq
            })
            .collect();
        taken.insert(id, seqs);
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let results: Vec<Acked> = writers.into_iter().map(|w| w.join().unwrap()).collect();

    let mut total = 0;
    for (n, (acked, error)) in results.iter().enumerate() {
        let id = format!("s{n}");
        total += acked.len();
        let st = a.load(&sid(&id)).unwrap();
        // every acknowledged record is there, at its seq
        for (input, seq) in acked {
            assert_eq!(
                st.input_ids.get(input),
                Some(seq),
                "{id}: acknowledged {input}"
            );
        }
        match taken.get(&id) {
            Some(b_seqs) => {
                let error = error.as_deref().unwrap_or_else(|| {
                    panic!("{id}: a's writer never noticed its lease was taken")
                });
                assert!(error.contains("no longer write"), "{id}: {error}");
                // nothing of a's after b's take: b's records follow a's last one directly
                let a_last = acked.last().map_or(0, |x| x.1);
                assert_eq!(
                    b_seqs[0],
                    a_last + 1,
                    "{id}: b appends right after a's last"
                );
                assert_eq!(st.last_seq, b_seqs[2], "{id}: b's records are the last");
                let a_inputs = st
                    .input_ids
                    .iter()
                    .filter(|(k, _)| k.starts_with('a'))
                    .count();
                assert_eq!(
                    a_inputs,
                    acked.len(),
                    "{id}: only acknowledged records of a"
                );
            }
            None => {
                assert!(error.is_none(), "{id} was not taken over: {error:?}");
                assert_eq!(
                    st.last_seq,
                    acked.len() as u64,
                    "{id}: no gap, nothing extra"
                );
            }
        }
    }
    assert!(total > 200, "the writers appended meanwhile: {total}");
    assert_eq!(
        deadlocks() - deadlocks_before,
        0,
        "append batches and lease renewals deadlocked"
    );
    eprintln!("{total} appends acknowledged by {SESSIONS} writers sharing batches");
}
