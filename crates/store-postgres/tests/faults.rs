//! Faults and races: a writer's connection killed mid-append, writers racing for one
//! session, taken seqs, corrupted rows, a newer schema, and calls from inside tokio.
//! Needs `LAZARUS_TEST_PG` (see `scripts/pg-test-server.sh`).

mod common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use lazarus_session::SessionId;
use lazarus_session::{CreateOptions, Session, SessionError, Store};
use lazarus_store_postgres::{PgOptions, PgStore};

/// A session id written in the test (checked; a bad one is a bug in the test).
#[allow(dead_code)]
fn sid(id: &str) -> lazarus_session::SessionId {
    lazarus_session::SessionId::parse(id).expect("a valid session id")
}

macro_rules! url_or_skip {
    ($name:expr) => {
        match common::pg_url($name) {
            Some(u) => u,
            None => return,
        }
    };
}

fn create(store: &PgStore, id: &str) -> Session {
    store
        .create(CreateOptions {
            id: Some(sid(id)),
            meta: None,
        })
        .unwrap_or_else(|e| panic!("create {id}: {e}"))
}

/// Seqs stored for `id`, straight from the table.
fn stored_seqs(url: &str, store: &PgStore, id: &str) -> Vec<i64> {
    common::psql(url)
        .query(
            &format!(
                "SELECT seq FROM \"{}\".records WHERE session_id = $1 ORDER BY seq",
                store.schema()
            ),
            &[&id],
        )
        .iter()
        .map(|r| r.get(0))
        .collect()
}

fn assert_gap_free(seqs: &[i64]) {
    for (i, s) in seqs.iter().enumerate() {
        assert_eq!(
            *s, i as i64,
            "seqs must be 0..n without gap or duplicate: {seqs:?}"
        );
    }
}

/// Opens `id`, retrying while the previous holder is still letting go, or a request met a
/// connection killed under it.
fn open_when_free(store: &PgStore, id: &str) -> Session {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match store.open(&sid(id)) {
            Ok(s) => return s,
            Err(e)
                if ["in use", "connection closed", "unavailable"]
                    .iter()
                    .any(|m| e.to_string().contains(m))
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("open {id}: {e}"),
        }
    }
}

#[test]
fn second_writer_is_told_who_holds_the_session() {
    let url = url_or_skip!("second_writer_is_told_who_holds_the_session");
    let a = common::fresh_store(&url);
    let b = common::same_schema(&url, &a);
    let (w, _, _) = {
        drop(create(&a, "s1"));
        a.open_writer(&sid("s1")).unwrap()
    };
    let err = b.open(&SessionId::literal("s1")).unwrap_err().to_string();
    let me = format!("in use by pid {} on host ", std::process::id());
    assert!(err.contains(&me), "{err}");
    assert!(err.contains(" since 20"), "{err}");
    let holder = b.lock_holder(&sid("s1")).unwrap().expect("a holder");
    assert_eq!(holder.epoch, w.epoch());
    assert_eq!(holder.holder().unwrap().pid, std::process::id());
    // a create of the same id is refused as existing, not as in use
    let err = b
        .create(CreateOptions {
            id: Some(SessionId::literal("s1")),
            meta: None,
        })
        .unwrap_err();
    assert!(matches!(err, SessionError::AlreadyExists { .. }), "{err}");
    // readers never need the lock; the listing shows the session running
    b.load(&SessionId::literal("s1")).unwrap();
    assert_eq!(
        b.summary(&SessionId::literal("s1")).unwrap().status,
        lazarus_session::Status::Running
    );
    drop(w);
    assert!(b.lock_holder(&sid("s1")).unwrap().is_none());
    b.open(&SessionId::literal("s1"))
        .expect("free once the writer is dropped");
}

#[test]
fn two_writers_racing_one_wins() {
    let url = url_or_skip!("two_writers_racing_one_wins");
    let a = Arc::new(common::fresh_store(&url));
    let b = Arc::new(common::same_schema(&url, &a));
    for round in 0..15 {
        let id = format!("s{round}");
        drop(create(&a, &id));
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = [a.clone(), b.clone()]
            .into_iter()
            .map(|store| {
                let barrier = barrier.clone();
                let id = id.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    let r = match store.open(&sid(&id)) {
                        Ok(mut s) => {
                            s.append_input(&format!("m-{id}"), "user", "hi").unwrap();
                            Ok(s)
                        }
                        Err(e) => Err(e.to_string()),
                    };
                    // the winner holds on until both have tried
                    barrier.wait();
                    r.map(drop)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let wins = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "round {round}: {results:?}");
        let loser = results.iter().find_map(|r| r.clone().err()).unwrap();
        assert!(loser.contains("in use by"), "round {round}: {loser}");
        let seqs = stored_seqs(&url, &a, &id);
        assert_gap_free(&seqs);
        assert_eq!(seqs.len(), 2, "header and one input");
    }
    // racing creates of one new id: one creates it, the other is told it exists (or is
    // being created: in use)
    for round in 0..10 {
        let id = format!("new{round}");
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = [a.clone(), b.clone()]
            .into_iter()
            .map(|store| {
                let barrier = barrier.clone();
                let id = id.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    store
                        .create(CreateOptions {
                            id: Some(sid(&id)),
                            meta: None,
                        })
                        .map(drop)
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{results:?}"
        );
        let err = results.iter().find_map(|r| r.clone().err()).unwrap();
        assert!(
            err.contains("already exists") || err.contains("in use by"),
            "{err}"
        );
        assert_eq!(stored_seqs(&url, &a, &id), [0]);
    }
}

#[test]
fn connections_killed_mid_append_lose_nothing_acknowledged() {
    let url = url_or_skip!("connections_killed_mid_append_lose_nothing_acknowledged");
    let store = common::fresh_store(&url);
    drop(create(&store, "s1"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let writer_store = store.clone();
    // Appends until told to stop; an append that fails (its connection killed under it) makes
    // the writer unsure of the log, so it is dropped and the session reopened.
    let appender = std::thread::spawn(move || {
        let mut acked = Vec::new();
        let mut failed = 0;
        let mut session = open_when_free(&writer_store, "s1");
        let mut i = 0;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            i += 1;
            match session.append_input(&format!("m{i}"), "user", &format!("text {i}")) {
                Ok(ack) if !ack.duplicate => acked.push((format!("m{i}"), ack.seq)),
                Ok(_) => panic!("m{i} taken for a duplicate"),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(
                        ["no longer write", "unavailable", "connection closed"]
                            .iter()
                            .any(|m| msg.contains(m)),
                        "{msg}"
                    );
                    failed += 1;
                    if msg.contains("no longer write") {
                        // once lost, it stays lost: no write sneaks in later
                        let again = session.append_input("after", "user", "x").unwrap_err();
                        assert!(again.to_string().contains("no longer write"), "{again}");
                        drop(session);
                        session = open_when_free(&writer_store, "s1");
                    }
                }
            }
        }
        (acked, failed)
    });
    // Kill every connection of this process, again and again, while it appends.
    let killer = common::psql(&url);
    let pattern = format!("lazarus pid={} %", std::process::id());
    let mut killed = 0i64;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(100));
        let rows = killer.query(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity
             WHERE application_name LIKE $1 AND pid <> pg_backend_pid()",
            &[&pattern],
        );
        killed += rows[0].get::<_, i64>(0);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (acked, failed) = appender.join().unwrap();
    assert!(killed > 5, "connections were killed: {killed}");
    assert!(acked.len() > 20, "appended meanwhile: {}", acked.len());
    eprintln!(
        "{} appends acknowledged, {failed} failed, {killed} connections killed",
        acked.len()
    );

    let st = store.load(&SessionId::literal("s1")).unwrap();
    for (id, seq) in &acked {
        assert_eq!(st.input_ids.get(id), Some(seq), "acknowledged {id} kept");
    }
    assert!(
        st.last_seq as usize <= acked.len() + failed,
        "at most one unacknowledged append per failure may have landed: {} records, {} acked, {failed} failed",
        st.last_seq,
        acked.len()
    );
    assert_gap_free(&stored_seqs(&url, &store, "s1"));
}

/// Runs the lease of `id` out by hand (as if its writer had stopped renewing it: a paused
/// or partitioned process) and opens it from `b`, trying again if a heartbeat renewed it in
/// between.
fn take_over(url: &str, b: &PgStore, id: &str) -> Session {
    let c = common::psql(url);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        c.execute(
            &format!(
                "UPDATE \"{}\".leases SET expires_at = now() - interval '1 second' WHERE session_id = $1",
                b.schema()
            ),
            &[&id],
        )
        .expect("expire the lease");
        match b.open(&sid(id)) {
            Ok(s) => return s,
            Err(e) if e.to_string().contains("in use") && Instant::now() < deadline => {}
            Err(e) => panic!("open {id}: {e}"),
        }
    }
}

#[test]
fn a_writer_whose_lease_was_taken_over_cannot_write() {
    let url = url_or_skip!("a_writer_whose_lease_was_taken_over_cannot_write");
    let a = common::fresh_store(&url);
    let b = common::same_schema(&url, &a);
    let mut sa = create(&a, "s1");
    sa.append_input("a1", "user", "from a").unwrap();
    let before = a.lock_holder(&sid("s1")).unwrap().unwrap().epoch;
    let mut sb = take_over(&url, &b, "s1");
    assert_eq!(
        b.lock_holder(&sid("s1")).unwrap().unwrap().epoch,
        before + 1,
        "a take raises the epoch"
    );
    sb.append_input("b1", "user", "from b").unwrap();
    // a still believes it is the writer: fenced in the append statement itself
    let err = sa.append_input("a2", "user", "late").unwrap_err();
    assert!(err.to_string().contains("no longer write"), "{err}");
    sb.append_input("b2", "user", "from b again").unwrap();
    // a's writer going away releases nothing of b's
    drop(sa);
    sb.append_input("b3", "user", "still b").unwrap();
    drop(sb);
    let st = a.load(&SessionId::literal("s1")).unwrap();
    assert_eq!(st.last_seq, 4);
    assert!(st.input_ids.contains_key("b3") && !st.input_ids.contains_key("a2"));
    assert_gap_free(&stored_seqs(&url, &a, "s1"));
}

#[test]
fn a_taken_seq_is_a_conflict_never_an_overwrite() {
    let url = url_or_skip!("a_taken_seq_is_a_conflict_never_an_overwrite");
    let store = common::fresh_store(&url);
    let mut s = create(&store, "s1");
    for i in 0..3 {
        s.append_input(&format!("m{i}"), "user", "x").unwrap();
    }
    drop(s);
    let before = store.export(&sid("s1")).unwrap();
    let data = br#"{"input_id":"evil","source":"user","text":"overwrite?"}"#;

    let (w, _, _) = store.open_writer(&sid("s1")).unwrap();
    assert_eq!(w.next_seq(), 4);
    let err = w.append_at(2, "input", data).unwrap_err();
    assert!(matches!(err, SessionError::Conflict { .. }), "{err}");
    assert!(err.to_string().contains("seq 2"), "{err}");
    // the writer no longer trusts its view: it must reopen
    assert!(w.append_json("input", data).is_err());
    drop(w);

    // a gap is a conflict too
    let (w, _, _) = store.open_writer(&sid("s1")).unwrap();
    let err = w.append_at(6, "input", data).unwrap_err();
    assert!(matches!(err, SessionError::Conflict { .. }), "{err}");
    drop(w);

    // the table itself refuses a taken seq
    let raw = common::psql(&url).execute(
        &format!(
            "INSERT INTO \"{}\".records (session_id, seq, kind, line, end_offset) VALUES ('s1', 3, 'input', 'x', 1)",
            store.schema()
        ),
        &[],
    );
    let e = raw.unwrap_err();
    assert_eq!(
        e.code(),
        Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
    );

    assert_eq!(store.export(&sid("s1")).unwrap(), before, "nothing changed");
    assert_gap_free(&stored_seqs(&url, &store, "s1"));
    let (w, _, _) = store.open_writer(&sid("s1")).unwrap();
    let ok = w
        .append_json(
            "input",
            br#"{"input_id":"m9","source":"user","text":"fine"}"#,
        )
        .unwrap();
    assert_eq!(ok.seq, 4);
}

#[test]
fn corrupted_rows_are_detected_not_skipped() {
    let url = url_or_skip!("corrupted_rows_are_detected_not_skipped");
    let store = common::fresh_store(&url);
    let mut s = create(&store, "s1");
    for i in 0..4 {
        s.append_input(&format!("m{i}"), "user", "hello world")
            .unwrap();
    }
    drop(s);
    drop(create(&store, "ok"));
    // listed once: both statuses are cached in their listing rows
    let listed = store.list().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].status, lazarus_session::Status::Pending);
    let db = common::psql(&url);
    let schema = store.schema().to_string();
    // flip one byte of seq 2's text
    db.execute(
        &format!(
            "UPDATE \"{schema}\".records SET line = overlay(line placing 'J'::bytea from 80 for 1) WHERE session_id = 's1' AND seq = 2"
        ),
        &[],
    )
    .unwrap();
    // a record changed by hand makes the cached status stale: the listing replays s1
    let listed = store.list().unwrap();
    let s1 = listed.iter().find(|s| s.id == "s1").expect("s1 is listed");
    assert_eq!(s1.status, lazarus_session::Status::Corrupt, "{s1:?}");
    assert!(
        s1.error.as_deref().is_some_and(|e| e.contains("checksum")),
        "{s1:?}"
    );
    let err = store
        .load(&SessionId::literal("s1"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 3") && err.contains("checksum"), "{err}");
    let err = store
        .open(&SessionId::literal("s1"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("checksum"), "{err}");
    assert!(store.export(&sid("s1")).is_err());
    assert!(store.records(&SessionId::literal("s1"), 0, 10).is_err());
    assert!(
        store.records(&SessionId::literal("s1"), 2, 10).is_ok(),
        "records after the bad one"
    );
    // the session is free again after the failed open
    assert!(store.lock_holder(&sid("s1")).unwrap().is_none());
    // a missing record is a gap
    db.execute(
        &format!("DELETE FROM \"{schema}\".records WHERE session_id = 's1' AND seq = 2"),
        &[],
    )
    .unwrap();
    let err = store
        .load(&SessionId::literal("s1"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sequence gap: expected seq 2, found 3"),
        "{err}"
    );
    // a stored end offset that does not add up is detected too
    db.execute(
        &format!("UPDATE \"{schema}\".records SET end_offset = end_offset + 1 WHERE session_id = 'ok' AND seq = 0"),
        &[],
    )
    .unwrap();
    let err = store
        .load(&SessionId::literal("ok"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("stored end offset"), "{err}");
    assert!(store.export(&sid("ok")).is_err());
    // the listing skips what it cannot read, and says so in the log
    assert!(store.list().unwrap().len() <= 2);
}

#[test]
fn listing_reads_big_tails_and_sizes() {
    let url = url_or_skip!("listing_reads_big_tails_and_sizes");
    let store = common::fresh_store(&url);
    let mut s = create(&store, "big");
    let text = "x".repeat(300 * 1024);
    s.append_input("m1", "user", &text).unwrap();
    drop(s);
    drop(create(&store, "small"));
    let list = store.list().unwrap();
    assert_eq!(list.len(), 2);
    for summary in &list {
        let bytes = store.export(&summary.id).unwrap();
        assert_eq!(summary.bytes, bytes.len() as u64, "{}", summary.id);
        let last = bytes[..bytes.len() - 1]
            .rsplit(|&b| b == b'\n')
            .next()
            .unwrap();
        let env: lazarus_ledger::Envelope<serde_json::Value> =
            lazarus_ledger::frame::decode_line(last).unwrap();
        assert_eq!(summary.updated_at, env.ts);
        assert_eq!(summary.last_kind, env.kind);
    }
    let big = list.iter().find(|s| s.id == "big").unwrap();
    assert_eq!(big.status, lazarus_session::Status::Pending);
    assert_eq!(big.records, 1);
    let small = list.iter().find(|s| s.id == "small").unwrap();
    assert_eq!(small.status, lazarus_session::Status::New);
    assert_eq!(small.records, 0);
}

#[test]
fn a_newer_schema_is_refused() {
    let url = url_or_skip!("a_newer_schema_is_refused");
    let store = common::fresh_store(&url);
    assert_eq!(
        store.schema_version().unwrap(),
        lazarus_store_postgres::SCHEMA_VERSION
    );
    drop(create(&store, "s1"));
    let schema = store.schema().to_string();
    common::psql(&url)
        .execute(
            &format!(
                "INSERT INTO \"{schema}\".schema_version (version, applied_by) VALUES (99, 'the future')"
            ),
            &[],
        )
        .unwrap();
    let err = PgStore::connect_with(&url, common::options(&schema)).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("version 99") && msg.contains("newer than this build"),
        "{msg}"
    );
    // without migrations, an empty schema is refused as too old
    let fresh = common::fresh_schema();
    let err = PgStore::connect_with(
        &url,
        PgOptions {
            migrate: false,
            ..common::options(&fresh)
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("lazarus db migrate"), "{err}");
    // the URL form takes the schema as a parameter
    let s = PgStore::connect(&format!("{url}?schema={fresh}")).unwrap();
    assert_eq!(s.schema(), fresh);
    assert!(s.list().unwrap().is_empty());
    assert!(s.location().ends_with(&format!("/{fresh}")));
    assert!(!s.location().contains("password"));
}

/// Version 4 builds a listing row per session from what version 3 holds (the newest record,
/// record 1, the cached statuses): the listing after the migration is the one before it, and
/// records appended after it keep the rows.
#[test]
fn a_version_3_schema_migrates_to_listing_rows() {
    let url = url_or_skip!("a_version_3_schema_migrates_to_listing_rows");
    let store = common::fresh_store(&url);
    let mut a = create(&store, "titled");
    a.append_input("m1", "user", "\n  fix the parser\nplease")
        .unwrap();
    drop(a);
    let mut big = create(&store, "big");
    big.append_input("m1", "user", &"x".repeat(300 * 1024))
        .unwrap();
    drop(big);
    drop(create(&store, "bare"));
    let mut named = create(&store, "named");
    named.append_input("m1", "user", "first words").unwrap();
    drop(named);
    store.rename(&sid("named"), Some("a name")).unwrap();
    let summaries = |s: &PgStore| -> Vec<serde_json::Value> {
        s.list()
            .unwrap()
            .iter()
            .map(|x| serde_json::to_value(x).unwrap())
            .collect()
    };
    let before = summaries(&store);
    assert_eq!(before.len(), 4);
    let schema = store.schema().to_string();
    drop(store);
    // back to version 3, as an older build left it
    let q = format!("\"{schema}\"");
    let v3 = include_str!("../migrations/0003_status_cache.sql").replace("{schema}", &q);
    let db = common::psql(&url);
    for sql in [
        format!("DROP TRIGGER records_listing_change ON {q}.records"),
        format!(
            "DROP FUNCTION {q}.listing_forget_status(), {q}.rebuild_listing(text[]), {q}.record_ts(bytea)"
        ),
        v3,
        format!(
            "INSERT INTO {q}.status_cache SELECT session_id, status_seq, status, status_error FROM {q}.listing WHERE status_seq IS NOT NULL"
        ),
        format!("DROP TABLE {q}.listing"),
        format!("DELETE FROM {q}.schema_version WHERE version > 3"),
    ] {
        db.execute(&sql, &[]).unwrap();
    }
    let store = PgStore::connect_with(&url, common::options(&schema)).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        lazarus_store_postgres::SCHEMA_VERSION
    );
    let after = summaries(&store);
    assert_eq!(after, before);
    assert_eq!(after[0]["title"], "fix the parser");
    // appends after the migration keep the listing row
    let mut s = store.open(&sid("bare")).unwrap();
    s.append_input("m1", "user", "now with words").unwrap();
    drop(s);
    let bare = store.summary(&sid("bare")).unwrap();
    assert_eq!(bare.records, 1);
    assert_eq!(bare.title.as_deref(), Some("now with words"));
    assert_eq!(bare.status, lazarus_session::Status::Pending);
    assert_eq!(bare.bytes, store.export(&sid("bare")).unwrap().len() as u64);
}

#[test]
fn concurrent_migrations_and_stores_on_one_schema() {
    let url = url_or_skip!("concurrent_migrations_and_stores_on_one_schema");
    let schema = common::fresh_schema();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            let schema = schema.clone();
            std::thread::spawn(move || {
                PgStore::connect_with(&url, common::options(&schema)).map(|s| s.schema_version())
            })
        })
        .collect();
    for h in handles {
        let v = h.join().unwrap().unwrap().unwrap();
        assert_eq!(v, lazarus_store_postgres::SCHEMA_VERSION);
    }
}

#[test]
fn works_from_spawn_blocking_and_async_tasks() {
    let url = url_or_skip!("works_from_spawn_blocking_and_async_tasks");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let u = url.clone();
        let store = tokio::task::spawn_blocking(move || common::fresh_store(&u))
            .await
            .unwrap();
        let s2 = store.clone();
        let seq = tokio::task::spawn_blocking(move || {
            let mut s = create(&s2, "s1");
            s.append_input("m1", "user", "hi").unwrap().seq
        })
        .await
        .unwrap();
        assert_eq!(seq, 1);
        // straight from an async task (blocks this worker briefly, but works)
        assert_eq!(store.load(&SessionId::literal("s1")).unwrap().last_seq, 1);
        let mut s = store.open(&SessionId::literal("s1")).unwrap();
        s.append_input("m2", "user", "again").unwrap();
        drop(s);
        assert_eq!(store.list().unwrap().len(), 1);
        // and dropped inside the runtime
        drop(store);
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = common::pg_url("current_thread").unwrap();
    rt.block_on(async move {
        let store = common::fresh_store(&url);
        let mut s = create(&store, "s1");
        s.append_input("m1", "user", "hi").unwrap();
        drop(s);
        assert_eq!(store.load(&SessionId::literal("s1")).unwrap().last_seq, 1);
    });
}

#[test]
fn pooled_connections_commit_durably_and_survive_idle_timeouts() {
    let url = url_or_skip!("pooled_connections_commit_durably_and_survive_idle_timeouts");
    let sep = if url.contains('?') { '&' } else { '?' };
    let hostile = format!(
        "{url}{sep}options=-c%20synchronous_commit%3Doff%20-c%20idle_session_timeout%3D300"
    );
    let store =
        PgStore::connect_with(&hostile, common::options(&common::fresh_schema())).expect("connect");
    let mut s = create(&store, "s1");
    drop(s);
    let (w, _, _) = store.open_writer(&sid("s1")).unwrap();
    // every pooled connection is set up: durable commits, no idle timeout
    assert_eq!(
        store.connection_setting("synchronous_commit").unwrap(),
        "on"
    );
    assert_eq!(
        store.connection_setting("idle_session_timeout").unwrap(),
        "0"
    );
    std::thread::sleep(Duration::from_millis(800));
    // still the writer after idling longer than the server's timeout
    w.append_json(
        "input",
        br#"{"input_id":"m1","source":"user","text":"still here"}"#,
    )
    .unwrap();
    drop(w);
    s = store.open(&SessionId::literal("s1")).unwrap();
    assert_eq!(s.state().last_seq, 1);
}

/// (A dead writer's lease running out is shown with real processes: the gateway SIGKILL test
/// in the CLI crate, and `restart.rs`, whose writers die with the server.)
#[test]
fn a_live_writer_keeps_its_lease_by_heartbeat() {
    let url = url_or_skip!("a_live_writer_keeps_its_lease_by_heartbeat");
    let schema = common::fresh_schema();
    let short = || PgOptions {
        lease_ttl: Duration::from_millis(300),
        ..common::options(&schema)
    };
    let a = PgStore::connect_with(&url, short()).unwrap();
    let b = PgStore::connect_with(&url, short()).unwrap();
    let mut sa = create(&a, "s1");
    // idle for several lifetimes of the lease: the heartbeat keeps it
    std::thread::sleep(Duration::from_millis(1500));
    let err = b.open(&sid("s1")).unwrap_err();
    assert!(err.to_string().contains("in use"), "{err}");
    sa.append_input("a1", "user", "still mine").unwrap();
    // released at once when the writer goes
    drop(sa);
    let sb = b.open(&sid("s1")).expect("free once the writer is dropped");
    assert_eq!(sb.state().last_seq, 1);
}
