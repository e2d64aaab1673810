//! How long listing every session takes on PostgreSQL (issue 28's target: 10⁵ sessions in
//! ≤ 0.2 s). Imports the sessions of a local directory (e.g. the one `scripts/bench-listing.sh`
//! made) into a schema of their own, once, then times `Store::list` (best and median of 5).
//!
//! ```text
//! eval "$(scripts/pg-test-server.sh start)"
//! cargo run --release -p lazarus-store-postgres --example pg_listing -- \
//!     --from target/bench-data/listing-100000/d [--threads 8] [--schema listing_bench]
//! ```
//! The URL comes from `LAZARUS_TEST_PG` (or `--url`). The schema is kept between runs (the
//! import is the slow part); `--fresh` drops it first.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

// the allocator of the `lazarus` binary, whose listing this measures
use lazarus_allocator as _;
use lazarus_session::Store;
use lazarus_store_postgres::{PgOptions, PgStore};

fn main() {
    let mut url = std::env::var("LAZARUS_TEST_PG").unwrap_or_default();
    let (mut from, mut threads, mut schema, mut fresh) =
        (String::new(), 8usize, "listing_bench".to_string(), false);
    let mut args = std::env::args().skip(1);
    while let Some(k) = args.next() {
        if k == "--fresh" {
            fresh = true;
            continue;
        }
        let v = args.next().unwrap_or_default();
        match k.as_str() {
            "--url" => url = v,
            "--from" => from = v,
            "--threads" => threads = v.parse().expect("--threads N"),
            "--schema" => schema = v,
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(!url.is_empty(), "set LAZARUS_TEST_PG or pass --url");
    assert!(
        !from.is_empty(),
        "pass --from DIR (a local session directory)"
    );
    if fresh {
        drop_schema(&url, &schema);
    }
    let store = PgStore::connect_with(
        &url,
        PgOptions {
            schema: schema.clone(),
            pool_size: threads.max(4),
            ..PgOptions::default()
        },
    )
    .expect("connect");

    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&from)
        .expect("read --from")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let have = store.list().expect("list").len();
    if have < files.len() {
        let started = Instant::now();
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = files.get(k) else { return };
                        let bytes = std::fs::read(path).expect("read a session");
                        // already there (an earlier, interrupted import): skipped
                        let _ = store.import(&bytes);
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if n.is_multiple_of(10_000) {
                            eprintln!("imported {n} in {:.0?}", started.elapsed());
                        }
                    }
                });
            }
        });
        eprintln!(
            "imported {} sessions in {:.1?}",
            files.len(),
            started.elapsed()
        );
    }
    let n = store.list().expect("list").len();
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let list = store.list().expect("list");
        times.push(t.elapsed().as_secs_f64());
        assert_eq!(list.len(), n);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "PostgreSQL listing of {n} sessions: best {:.3} s, median {:.3} s",
        times[0], times[2]
    );
    println!("RESULT pg_listing_s_{n} {:.3} <=0.2", times[2]);
}

fn drop_schema(url: &str, schema: &str) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect to drop the schema");
        tokio::spawn(conn);
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .await
            .expect("drop schema");
    });
}
