//! Append workloads shared by the criterion bench (`benches/append.rs`) and the side-by-side
//! comparison (`examples/bench_compare.rs`), so both measure exactly the same thing.
#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lazarus_ledger::{Durability, Header, Options, Writer};

/// Target size of one line, newline included.
pub const LINE_BYTES: usize = 500;

/// Where benchmark files go: `$LAZARUS_BENCH_DIR`, else `<target>/bench-data` (a real disk;
/// never /tmp, which may be tmpfs where fdatasync costs nothing).
pub fn bench_dir() -> PathBuf {
    let dir = match std::env::var_os("LAZARUS_BENCH_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
            target.join("bench-data")
        }
    };
    std::fs::create_dir_all(&dir).expect("create bench dir");
    dir
}

/// The record data whose line is `LINE_BYTES` long (newline included).
pub fn record_data() -> Vec<u8> {
    // Line = {"seq":N,"ts":"…24…","kind":"input","data":DATA,"crc":"xxxxxxxx"}\n
    // Overhead without DATA and with a 4-digit seq is ~71 bytes.
    let overhead = line_for(1234, b"{}").len() - 2;
    let filler = LINE_BYTES - overhead - br#"{"text":""}"#.len();
    format!(r#"{{"text":"{}"}}"#, "x".repeat(filler)).into_bytes()
}

fn line_for(seq: u64, data: &[u8]) -> Vec<u8> {
    let mut line = Vec::new();
    lazarus_ledger::frame::encode_line(&mut line, seq, "2026-12-02T10:00:00.000Z", "input", data);
    line
}

/// An encoded ~500-byte line, for the bare loop (same bytes the ledger writes).
pub fn bare_line() -> Vec<u8> {
    line_for(1234, &record_data())
}

/// A fresh ledger writer in `dir` with the given durability.
pub fn new_writer(dir: &Path, name: &str, durability: Durability) -> Writer {
    let id = format!("{name}-{}-{}", std::process::id(), unique());
    let opts = Options {
        durability,
        ..Options::default()
    };
    Writer::create(dir, Header::new("bench", &id), b"", opts).expect("create ledger")
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Removes a writer's files.
pub fn remove_writer(w: Writer) {
    let path = w.path().to_path_buf();
    drop(w);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("lock"));
}

/// A fresh O_APPEND file for the bare loop.
pub struct Bare {
    pub file: File,
    pub path: PathBuf,
}

impl Bare {
    pub fn new(dir: &Path) -> Bare {
        let path = dir.join(format!("bare-{}-{}.jsonl", std::process::id(), unique()));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .expect("create bare file");
        Bare { file, path }
    }

    /// One write of the whole line, then fdatasync: the floor any durable log pays.
    pub fn append(&mut self, line: &[u8]) {
        self.file.write_all(line).expect("write");
        self.file.sync_data().expect("fdatasync");
    }
}

impl Drop for Bare {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `n` durable appends (per-record fdatasync) on a fresh ledger; elapsed time.
pub fn run_durable(dir: &Path, n: u64) -> Duration {
    let w = new_writer(dir, "durable", Durability::PerRecord);
    let data = record_data();
    let t = Instant::now();
    for _ in 0..n {
        w.append_json("input", &data).expect("append");
    }
    let e = t.elapsed();
    remove_writer(w);
    e
}

/// `n` write+fdatasync of the same-size line on a fresh file; elapsed time.
pub fn run_bare(dir: &Path, n: u64) -> Duration {
    let mut b = Bare::new(dir);
    let line = bare_line();
    let t = Instant::now();
    for _ in 0..n {
        b.append(&line);
    }
    t.elapsed()
}

/// `threads` appenders sharing one grouped-durability ledger, `per_thread` appends each;
/// elapsed time for all `threads * per_thread` records.
pub fn run_grouped(dir: &Path, threads: usize, per_thread: u64) -> Duration {
    let w = Arc::new(new_writer(dir, "grouped", Durability::Grouped));
    let data = Arc::new(record_data());
    let barrier = Arc::new(std::sync::Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (w, data, barrier) = (w.clone(), data.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..per_thread {
                    w.append_json("input", &data).expect("append");
                }
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    for h in handles {
        h.join().expect("appender thread");
    }
    let e = t.elapsed();
    remove_writer(Arc::into_inner(w).expect("sole owner"));
    e
}

/// The plain group-commit loop grouped durability is measured against: `threads` appenders
/// hand their line to one writer thread, which writes everything queued in one `write`,
/// `fdatasync`s once, and then lets each of them go (an append returns once it is durable,
/// as with [`Durability::Grouped`]). `per_thread` appends each; elapsed time for all.
pub fn run_group_commit_loop(dir: &Path, threads: usize, per_thread: u64) -> Duration {
    use std::sync::mpsc;
    let mut bare = Bare::new(dir);
    let line = bare_line();
    let (tx, rx) = mpsc::channel::<mpsc::SyncSender<()>>();
    let writer = std::thread::spawn(move || {
        let mut buf = Vec::new();
        while let Ok(first) = rx.recv() {
            let mut waiting = vec![first];
            while let Ok(more) = rx.try_recv() {
                waiting.push(more);
            }
            buf.clear();
            for _ in &waiting {
                buf.extend_from_slice(&line);
            }
            bare.file.write_all(&buf).expect("write");
            bare.file.sync_data().expect("fdatasync");
            for w in waiting {
                let _ = w.send(());
            }
        }
    });
    let barrier = Arc::new(std::sync::Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (tx, barrier) = (tx.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..per_thread {
                    let (done, wait) = mpsc::sync_channel(1);
                    tx.send(done).expect("writer thread");
                    wait.recv().expect("writer thread");
                }
            })
        })
        .collect();
    drop(tx);
    barrier.wait();
    let t = Instant::now();
    for h in handles {
        h.join().expect("appender thread");
    }
    let e = t.elapsed();
    writer.join().expect("writer thread");
    e
}

/// The file system `dir` is on (type and device), from /proc/self/mountinfo.
pub fn fs_of(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for l in info.lines() {
        // id parent major:minor root mountpoint opts ... - fstype source superopts
        let f: Vec<&str> = l.split_whitespace().collect();
        let Some(dash) = f.iter().position(|x| *x == "-") else {
            continue;
        };
        let (Some(mp), Some(fstype), Some(src)) = (f.get(4), f.get(dash + 1), f.get(dash + 2))
        else {
            continue;
        };
        if dir.starts_with(mp) && best.as_ref().is_none_or(|(n, _)| mp.len() > *n) {
            best = Some((mp.len(), format!("{fstype} on {src} (mounted at {mp})")));
        }
    }
    best.map(|(_, s)| s).unwrap_or_else(|| "unknown".into())
}
