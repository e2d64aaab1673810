//! Replay rate (CRC + parse + validate into the resume state) vs plain serde_json parsing of
//! the same file into typed structs. The ledger (`LAZARUS_BENCH_MB`, default 200) is generated
//! once and cached under `<target>/bench-data/replay/`. `scripts/bench-ledger.sh` prints the
//! ratios in one run.

mod common;

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn replay(c: &mut Criterion) {
    let mb = common::size_mb_from_env("LAZARUS_BENCH_MB", 200);
    let (dir, id) = common::ensure_ledger(mb);
    let path = dir.join(format!("{id}.jsonl"));
    let bytes = std::fs::metadata(&path).expect("stat").len();
    let mut g = c.benchmark_group(format!("replay_{mb}MB"));
    g.throughput(Throughput::Bytes(bytes));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.bench_function("lazarus_load", |b| {
        b.iter(|| common::lazarus_load(&dir, &id))
    });
    g.bench_function("ledger_reader_typed_no_state", |b| {
        b.iter(|| common::ledger_read_typed(&path))
    });
    g.bench_function("serde_json_typed", |b| {
        b.iter(|| common::serde_typed(&path))
    });
    g.bench_function("serde_json_typed_envelope_flatten", |b| {
        b.iter(|| common::serde_typed_envelope(&path))
    });
    g.bench_function("crc32c_lines_only", |b| b.iter(|| common::crc_only(&path)));
    g.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
