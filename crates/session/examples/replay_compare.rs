//! Side-by-side replay comparison in one process, on one cached file, printed as a table.
//!
//! ```text
//! cargo run --release -p lazarus-session --example replay_compare            # compare
//! cargo run --release -p lazarus-session --example replay_compare -- compacted  # same, on the
//!                                                  # ledger with a compaction every 10 messages
//! cargo run --release -p lazarus-session --example replay_compare -- peak MB load|stream|compacted
//! ```
//! Env: `LAZARUS_BENCH_MB` (default 200), `LAZARUS_BENCH_ROUNDS` (default 3; best round of
//! each is reported), `LAZARUS_BENCH_DIR`. `peak` replays an `MB`-sized ledger (generated in
//! a child process first, so generation does not count) and prints VmHWM.

#[path = "../benches/common/mod.rs"]
mod common;

// the allocator of the lazarus binary, so the figures are the product's
use lazarus_allocator as _;

use std::time::Duration;

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("generate") => {
            let mb = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(200);
            common::ensure_ledger_with(mb, args.get(2).map(String::as_str) == Some("compacted"));
        }
        Some("peak") => peak(&args[1..]),
        Some("compacted") => compare(true),
        _ => compare(false),
    }
}

/// Peak memory of one replay of an `MB`-sized ledger, in a process that did nothing else.
fn peak(args: &[String]) {
    let mb: u64 = args.first().and_then(|v| v.parse().ok()).unwrap_or(1024);
    let mode = args.get(1).map(String::as_str).unwrap_or("load");
    // `compacted`: the replay of the ledger with compactions (the resume state keeps only
    // what the model is still sent)
    let compacted = mode == "compacted";
    let (dir, id) = if args.get(2).map(String::as_str) == Some("--child") {
        let id = if compacted {
            common::compacted_session_id(mb)
        } else {
            common::session_id(mb)
        };
        (common::bench_dir(), id)
    } else {
        // Generate in a child (its memory is not ours), then measure in another child.
        let exe = std::env::current_exe().expect("exe");
        let ok = std::process::Command::new(&exe)
            .args([
                "generate",
                &mb.to_string(),
                if compacted { "compacted" } else { "plain" },
            ])
            .status()
            .expect("spawn")
            .success();
        assert!(ok, "generation failed");
        let out = std::process::Command::new(&exe)
            .args(["peak", &mb.to_string(), mode, "--child"])
            .output()
            .expect("spawn");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        print!("{}", String::from_utf8_lossy(&out.stdout));
        return;
    };
    let path = dir.join(format!("{id}.jsonl"));
    let size = std::fs::metadata(&path).expect("stat").len();
    let before = common::vm_hwm();
    let (n, d) = match mode {
        "stream" => common::time(|| common::ledger_read_typed(&path)),
        _ => common::time(|| common::lazarus_load(&dir, &id)),
    };
    let hwm = common::vm_hwm();
    let what = match mode {
        "stream" => "ledger Reader<Record> (streaming, no state)",
        "compacted" => "LocalStore::load, ledger with compactions",
        _ => "LocalStore::load (full resume state)",
    };
    println!(
        "{what:<46} file {:>7.0} MB  peak RSS {:>8.1} MB ({:>5.1}% of file; {:.1} MB before)  {n} records in {:.1} s",
        size as f64 / 1e6,
        hwm as f64 / 1e6,
        hwm as f64 * 100.0 / size as f64,
        before as f64 / 1e6,
        d.as_secs_f64()
    );
}

fn compare(compacted: bool) {
    let mb = common::size_mb_from_env("LAZARUS_BENCH_MB", 200);
    let rounds = common::size_mb_from_env("LAZARUS_BENCH_ROUNDS", 3).max(1);
    let (dir, id) = common::ensure_ledger_with(mb, compacted);
    let path = dir.join(format!("{id}.jsonl"));
    let bytes = std::fs::metadata(&path).expect("stat").len();
    // Warm the page cache so every contender reads from memory alike.
    common::crc_only(&path);
    type Job<'a> = (&'a str, Box<dyn Fn() -> u64 + 'a>);
    let jobs: Vec<Job> = vec![
        (
            "lazarus replay: LocalStore::load (CRC+parse+validate+state)",
            Box::new(|| common::lazarus_load(&dir, &id)),
        ),
        (
            "lazarus resume: LocalStore::open (recovery scan + replay)",
            Box::new(|| common::lazarus_open(&dir, &id)),
        ),
        (
            "serde_json typed (adjacently tagged enum), BufReader",
            Box::new(|| common::serde_typed(&path)),
        ),
        (
            "ledger Reader<Record> only (CRC+framing+typed, no state)",
            Box::new(|| common::ledger_read_typed(&path)),
        ),
        (
            "serde_json typed envelope (#[serde(flatten)])",
            Box::new(|| common::serde_typed_envelope(&path)),
        ),
        (
            "line split + CRC-32C only",
            Box::new(|| common::crc_only(&path)),
        ),
    ];
    let mut best = vec![Duration::MAX; jobs.len()];
    let mut counts = vec![0u64; jobs.len()];
    // The replay again, timed up to the returned state (its drop, freeing every string of
    // the transcript, not counted): what a resume waits for.
    let mut load_no_drop = Duration::MAX;
    for _ in 0..rounds {
        let (st, d) = common::time(|| common::lazarus_load_state(&dir, &id));
        load_no_drop = load_no_drop.min(d);
        drop(st);
        for (k, (_, f)) in jobs.iter().enumerate() {
            let (n, d) = common::time(f);
            counts[k] = n;
            best[k] = best[k].min(d);
        }
    }
    let base_k = 2; // the serde_json typed row
    println!(
        "replay: {} ({:.1} MB, {} records), best of {rounds} rounds, page cache warm",
        path.display(),
        bytes as f64 / 1e6,
        counts[base_k]
    );
    let base = mbps(bytes, best[base_k]);
    println!("{:<62} {:>9} {:>8}", "", "MB/s", "ratio");
    for (k, (name, _)) in jobs.iter().enumerate() {
        let r = mbps(bytes, best[k]);
        let note = if k <= 1 {
            "  (target >= 0.7; issue 14: >= 1.0)"
        } else {
            ""
        };
        println!("{name:<62} {r:>9.1} {:>8.3}{note}", r / base);
        if k == 0 {
            let r = mbps(bytes, load_no_drop);
            println!(
                "{:<62} {r:>9.1} {:>8.3}",
                "  same, timed until the state is returned (drop excluded)",
                r / base
            );
        }
    }
    // issue 48's target: replay into the resume state >= 1.3x plain serde_json typed parsing,
    // in every run (issue 28 asked 1.2x)
    let which = if path.to_string_lossy().contains("compacted") {
        "compacted"
    } else {
        "plain"
    };
    println!(
        "RESULT replay_vs_serde_json_{which} {:.3} >=1.3",
        mbps(bytes, best[0]) / base
    );
}
