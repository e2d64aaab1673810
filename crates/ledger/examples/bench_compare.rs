//! Side-by-side append comparison in one process, on one disk, printed as a table with ratios.
//!
//! ```text
//! cargo run --release -p lazarus-ledger --example bench_compare [-- --json]
//! ```
//! Env: `LAZARUS_BENCH_DIR` (default `<target>/bench-data`), `LAZARUS_BENCH_APPENDS` (records
//! per round, default 2000), `LAZARUS_BENCH_ROUNDS` (default 5). Rounds alternate bare and
//! durable so drift of the disk affects both; the median round of each is reported.

#[path = "../benches/common/mod.rs"]
mod common;

use std::time::Duration;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn rate(n: u64, e: Duration) -> f64 {
    n as f64 / e.as_secs_f64()
}

fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let dir = common::bench_dir();
    let n = env_u64("LAZARUS_BENCH_APPENDS", 2000);
    let rounds = env_u64("LAZARUS_BENCH_ROUNDS", 5).max(1);
    let fs = common::fs_of(&dir);

    // Warm up: first fdatasyncs of a new file can include extent allocation.
    common::run_bare(&dir, 50);
    common::run_durable(&dir, 50);

    let (mut bare, mut durable) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which goes first, so a slow phase of a shared disk hits both alike.
        if round % 2 == 0 {
            bare.push(rate(n, common::run_bare(&dir, n)));
            durable.push(rate(n, common::run_durable(&dir, n)));
        } else {
            durable.push(rate(n, common::run_durable(&dir, n)));
            bare.push(rate(n, common::run_bare(&dir, n)));
        }
    }
    if std::env::var_os("LAZARUS_BENCH_VERBOSE").is_some() {
        eprintln!("bare rounds/s: {bare:.0?}\ndurable rounds/s: {durable:.0?}");
    }
    let bare = median(bare);
    let durable = median(durable);

    // Grouped durability beside a plain group-commit loop, the same threads and records,
    // rounds alternating which goes first.
    let mut grouped = Vec::new();
    for threads in [8usize, 64] {
        let per_thread = (n * 4 / threads as u64).max(50);
        let total = per_thread * threads as u64;
        let (mut r, mut l) = (Vec::new(), Vec::new());
        for round in 0..rounds.min(3) {
            let mut g = || r.push(rate(total, common::run_grouped(&dir, threads, per_thread)));
            if round % 2 == 0 {
                g();
                l.push(rate(
                    total,
                    common::run_group_commit_loop(&dir, threads, per_thread),
                ));
            } else {
                l.push(rate(
                    total,
                    common::run_group_commit_loop(&dir, threads, per_thread),
                ));
                g();
            }
        }
        grouped.push((threads, median(r), median(l)));
    }

    if json {
        println!(
            "{{\"dir\":{:?},\"fs\":{:?},\"records_per_round\":{n},\"rounds\":{rounds},\"line_bytes\":{},\"bare_write_fdatasync_per_s\":{bare:.1},\"durable_append_per_s\":{durable:.1},\"ratio\":{:.3},\"grouped_8_per_s\":{:.1},\"grouped_64_per_s\":{:.1},\"group_commit_loop_8_per_s\":{:.1},\"group_commit_loop_64_per_s\":{:.1}}}",
            dir.display().to_string(),
            fs,
            common::LINE_BYTES,
            durable / bare,
            grouped[0].1,
            grouped[1].1,
            grouped[0].2,
            grouped[1].2
        );
        return;
    }
    println!(
        "append: {}-byte lines, {n} records x {rounds} rounds (median), files in {}",
        common::LINE_BYTES,
        dir.display()
    );
    println!("file system: {fs}");
    println!("{:<44} {:>14} {:>8}", "", "records/s", "ratio");
    println!(
        "{:<44} {:>14.0} {:>8}",
        "bare write+fdatasync loop", bare, "1.00"
    );
    println!(
        "{:<44} {:>14.0} {:>8.3}  (target >= 0.9)",
        "durable append (per-record fdatasync)",
        durable,
        durable / bare
    );
    for (t, r, l) in &grouped {
        println!(
            "{:<44} {:>14.0} {:>8.2}  (x bare)",
            format!("plain group-commit loop, {t} threads"),
            l,
            l / bare
        );
        println!(
            "{:<44} {:>14.0} {:>8.3}  (x the loop; target >= 0.9)",
            format!("grouped durability, {t} appender threads"),
            r,
            r / l
        );
    }
    println!();
    println!("RESULT append_vs_bare_loop {:.3} >=0.9", durable / bare);
    for (t, r, l) in &grouped {
        println!("RESULT grouped_{t}_vs_group_commit_loop {:.3} >=0.9", r / l);
    }
}
