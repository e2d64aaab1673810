//! Durable append of ~500-byte records vs a bare write+fdatasync loop on the same disk,
//! and grouped durability with 8 and 64 appender threads.
//!
//! Files go to `$LAZARUS_BENCH_DIR` or `<target>/bench-data` (never /tmp: it may be tmpfs).
//! `scripts/bench-ledger.sh` prints the same comparison as ratios in one run.

mod common;

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lazarus_ledger::Durability;

fn append(c: &mut Criterion) {
    let dir = common::bench_dir();
    eprintln!("bench files in {} — {}", dir.display(), common::fs_of(&dir));
    let mut g = c.benchmark_group("append_500B");
    g.throughput(Throughput::Elements(1));
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(5));

    g.bench_function("bare_write_fdatasync", |b| {
        let mut bare = common::Bare::new(&dir);
        let line = common::bare_line();
        b.iter(|| bare.append(&line));
    });

    g.bench_function("durable_append", |b| {
        let w = common::new_writer(&dir, "durable", Durability::PerRecord);
        let data = common::record_data();
        b.iter(|| w.append_json("input", &data).expect("append"));
        common::remove_writer(w);
    });

    for threads in [8usize, 64] {
        g.bench_function(format!("grouped_{threads}_appenders"), |b| {
            b.iter_custom(|iters| {
                let per_thread = iters.div_ceil(threads as u64).max(1);
                let e = common::run_grouped(&dir, threads, per_thread);
                // Scale to the number of records criterion asked for.
                e.mul_f64(iters as f64 / (per_thread * threads as u64) as f64)
            });
        });
    }
    g.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
