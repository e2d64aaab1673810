//! Many ledgers made durable by one shared `syncfs` (`lazarus_ledger::shared_sync`), under the
//! power-loss simulator: writers on several threads append to several ledgers on one
//! simulated disk (up to three threads per ledger, so several deferred appends of one ledger
//! are in flight at once), some appends blocking and some deferred (awaited), the syncs take
//! time so batches overlap, the power goes at a random operation, and every unsynced byte
//! fares as the fault model says. After every cut no acknowledged record is missing (each at
//! the seq it was acknowledged with), none appears that nobody wrote, none twice. A failing `syncfs` (pages dropped) acknowledges nothing it
//! did not make durable. `LAZARUS_SHARED_SYNC_TRIALS` (default 300) sets the trial count.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lazarus_ledger::sim::{Fill, Loss, SECTOR, SimFs, block_on};
use lazarus_ledger::{Header, LedgerError, Options, SharedSync, Writer, ledger_path};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const DIR: &str = "/sim";

fn dir() -> &'static Path {
    Path::new(DIR)
}

fn path(id: &str) -> PathBuf {
    ledger_path(dir(), id)
}

fn opts(fs: &SimFs, shared: Option<SharedSync>) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        lock: false,
        format: Some("test.ledger".into()),
        shared_sync: shared,
        ..Options::default()
    }
}

/// Ends the test process, loudly, if dropped later than `secs` after it was made: a waiter
/// that is never woken (a batch nobody starts) hangs instead of failing.
struct Watchdog(Arc<std::sync::atomic::AtomicBool>);

fn watchdog(what: &'static str, secs: u64) -> Watchdog {
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = done.clone();
    std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_secs(secs) {
            if d.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{what} did not finish in {secs} s: a waiter was never woken");
        std::process::exit(101);
    });
    Watchdog(done)
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// One append, blocking or deferred (awaited); `Ok(seq)` once acknowledged.
fn append(w: &Writer, data: &Value, deferred: bool) -> Result<u64, LedgerError> {
    let json = serde_json::to_vec(data).expect("test data encodes");
    if deferred && let Some(d) = w.append_json_deferred("note", &json)? {
        return block_on(d).map(|a| a.seq);
    }
    w.append_json("note", &json).map(|a| a.seq)
}

#[derive(Default)]
struct Truth {
    /// Acknowledged records by seq.
    acked: BTreeMap<u64, Value>,
    attempted: HashSet<String>,
}

/// Reopens ledger `id` on `disk` and checks it against `truth`.
fn check(disk: &SimFs, id: &str, truth: &Truth) -> Result<(), String> {
    let mut seen: BTreeMap<u64, Value> = BTreeMap::new();
    match Writer::open_with::<Value, _>(dir(), id, opts(disk, None), |_, env| {
        seen.insert(env.seq, env.data);
        Ok(())
    }) {
        Ok(_) => {}
        Err(LedgerError::NotFound { .. }) if truth.acked.is_empty() => return Ok(()),
        Err(e) => return Err(format!("{id}: reopening after the cut: {e}")),
    }
    for (seq, v) in &truth.acked {
        if seen.get(seq) != Some(v) {
            return Err(format!(
                "{id}: acknowledged record {seq} lost: {} acknowledged, {} on the disk",
                truth.acked.len(),
                seen.len()
            ));
        }
    }
    let mut unique = HashSet::new();
    for v in seen.values() {
        let key = v.to_string();
        if !truth.attempted.contains(&key) {
            return Err(format!("{id}: a record nobody wrote: {key:.80}"));
        }
        if !unique.insert(key) {
            return Err(format!("{id}: a record appears twice"));
        }
    }
    Ok(())
}

fn random_loss(r: &mut StdRng) -> Loss {
    Loss::Sectors {
        sector: SECTOR,
        mask: if r.random_bool(0.3) { 0 } else { r.random() },
        len_kept: if r.random_bool(0.6) {
            usize::MAX
        } else {
            r.random_range(0..3000)
        },
        fill: match r.random_range(0..3) {
            0 => Fill::Zeros,
            1 => Fill::Garbage(r.random()),
            _ => Fill::Stale,
        },
    }
}

/// `ledgers` ledgers, one to three threads each appending 30 records in all (a random mix of
/// blocking and deferred appends), one shared sync; the power goes after a random number of operations
/// (or a failing `syncfs` is armed first, when `fail` is set).
fn trial(seed: u64, fail: bool) -> Result<(), String> {
    let _watchdog = watchdog("a trial", 60);
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = SimFs::new();
    fs.set_sync_latency(Duration::from_micros(rng.random_range(0..300)));
    let shared = SharedSync::start(Arc::new(fs.clone()), dir()).map_err(|e| e.to_string())?;
    let ledgers = rng.random_range(2..6);
    let ids: Vec<String> = (0..ledgers).map(|i| format!("l{i}")).collect();
    let mut writers = Vec::new();
    for id in &ids {
        let w = Writer::create(
            dir(),
            Header::new("test.ledger", id),
            b"",
            opts(&fs, Some(shared.clone())),
        )
        .map_err(|e| format!("create {id}: {e}"))?;
        writers.push(Arc::new(w));
    }
    if fail {
        fs.fail_sync(rng.random_range(0..20));
    }
    let loss_seed: u64 = rng.random();
    fs.arm_power_cut(rng.random_range(10..400), move |_| {
        random_loss(&mut StdRng::seed_from_u64(loss_seed))
    });
    let truths: Vec<Arc<Mutex<Truth>>> = ids.iter().map(|_| Arc::default()).collect();
    let mut threads = Vec::new();
    for (k, (w, truth)) in writers.iter().zip(&truths).enumerate() {
        // one to three threads per ledger: their deferred appends are in flight together
        let per_ledger = rng.random_range(1..4);
        for j in 0..per_ledger {
            let (w, truth) = (w.clone(), truth.clone());
            let thread_seed: u64 = rng.random();
            threads.push(std::thread::spawn(move || {
                let mut r = StdRng::seed_from_u64(thread_seed);
                for i in 0..30 / per_ledger {
                    let data =
                        json!({"w": k, "t": j, "i": i, "pad": "y".repeat(r.random_range(0..900))});
                    let mut t = truth.lock().unwrap_or_else(|p| p.into_inner());
                    t.attempted.insert(data.to_string());
                    drop(t);
                    match append(&w, &data, r.random_bool(0.6)) {
                        Ok(seq) => {
                            truth
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .acked
                                .insert(seq, data);
                        }
                        Err(_) => break,
                    }
                }
            }));
        }
    }
    for t in threads {
        t.join().map_err(|_| "a writer thread panicked")?;
    }
    drop(writers);
    let disk = match fs.after_power_cut() {
        Some(d) => d,
        None => fs.crash(|_| random_loss(&mut StdRng::seed_from_u64(loss_seed))),
    };
    for (id, truth) in ids.iter().zip(&truths) {
        check(&disk, id, &truth.lock().unwrap_or_else(|p| p.into_inner()))?;
    }
    Ok(())
}

fn trials() -> u64 {
    std::env::var("LAZARUS_SHARED_SYNC_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

fn run(fail: bool) {
    let n = trials();
    let failures: Vec<String> = (0..n)
        .filter_map(|seed| trial(seed, fail).err().map(|e| format!("seed {seed}: {e}")))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {n} trials failed, first: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

#[test]
fn ledgers_sharing_one_syncfs_never_lose_acknowledged_records() {
    run(false);
}

#[test]
fn a_failing_syncfs_acknowledges_nothing_it_did_not_make_durable() {
    run(true);
}

/// The batches are shared: many appends, far fewer `syncfs` calls (else the point is lost).
#[test]
fn one_syncfs_covers_the_appends_of_many_ledgers() {
    let _watchdog = watchdog("one_syncfs_covers_the_appends_of_many_ledgers", 60);
    let fs = SimFs::new();
    fs.set_sync_latency(Duration::from_millis(2));
    let shared = SharedSync::start(Arc::new(fs.clone()), dir()).unwrap();
    let writers: Vec<Arc<Writer>> = (0..16)
        .map(|i| {
            let id = format!("m{i}");
            Arc::new(
                Writer::create(
                    dir(),
                    Header::new("test.ledger", &id),
                    b"",
                    opts(&fs, Some(shared.clone())),
                )
                .unwrap(),
            )
        })
        .collect();
    let threads: Vec<_> = writers
        .iter()
        .map(|w| {
            let w = w.clone();
            std::thread::spawn(move || {
                for i in 0..20 {
                    append(&w, &json!({"i": i}), i % 2 == 0).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = shared.stats();
    assert_eq!(stats.covered, 16 * 20, "every append waited for a batch");
    assert!(
        stats.syncs * 3 <= stats.covered,
        "batches are not shared: {} syncfs calls for {} appends",
        stats.syncs,
        stats.covered
    );
    // Everything acknowledged is durable: a power cut losing every unsynced byte keeps it.
    let disk = fs.crash(|_| Loss::Prefix(0));
    for i in 0..16 {
        let mut n = 0;
        Writer::open_with::<Value, _>(dir(), &format!("m{i}"), opts(&disk, None), |_, _| {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 20, "ledger m{i}");
    }
}

/// While a deferred append is in flight every other append of that ledger waits for it (a
/// later record must never be acknowledged and then cut away with an earlier one), and a
/// deferred append whose sync failed poisons the writer at its next use: the bytes saved
/// aside, the file cut back to its last durable record.
#[test]
fn a_deferred_append_holds_the_ledger_and_its_failure_poisons_it() {
    let _watchdog = watchdog(
        "a_deferred_append_holds_the_ledger_and_its_failure_poisons_it",
        60,
    );
    let fs = SimFs::new();
    fs.set_sync_latency(Duration::from_millis(30));
    let shared = SharedSync::start(Arc::new(fs.clone()), dir()).unwrap();
    let w = Arc::new(
        Writer::create(
            dir(),
            Header::new("test.ledger", "g"),
            b"",
            opts(&fs, Some(shared.clone())),
        )
        .unwrap(),
    );
    let d = w
        .append_json_deferred("note", br#"{"i":1}"#)
        .unwrap()
        .expect("a writer with a shared sync defers");
    assert!(
        w.append_json_deferred("note", br#"{"i":2}"#)
            .unwrap()
            .is_none(),
        "a second deferred append while one is in flight must be refused"
    );
    let w2 = w.clone();
    let blocking = std::thread::spawn(move || w2.append_json("note", br#"{"i":2}"#));
    std::thread::sleep(Duration::from_millis(5));
    assert!(
        !blocking.is_finished(),
        "the blocking append must wait for the deferred one"
    );
    assert_eq!(block_on(d).unwrap().seq, 1);
    assert_eq!(blocking.join().unwrap().unwrap().seq, 2);

    // A failing syncfs, and this file's own fdatasync fails too (its pages were dropped).
    fs.set_sync_latency(Duration::ZERO);
    fs.fail_sync(0);
    let d = w
        .append_json_deferred("note", br#"{"i":3}"#)
        .unwrap()
        .unwrap();
    let err = block_on(d).unwrap_err();
    assert!(
        matches!(
            err,
            LedgerError::Io {
                op: "fdatasync",
                ..
            }
        ),
        "{err}"
    );
    let err = w.append_json("note", br#"{"i":4}"#).unwrap_err();
    assert!(w.is_poisoned(), "the next use poisons the writer: {err}");
    let err = w.append_json("note", br#"{"i":5}"#).unwrap_err();
    assert!(
        matches!(err, LedgerError::Poisoned { .. }) && err.to_string().contains("saved to"),
        "the unsynced bytes were saved aside: {err}"
    );
    drop(w);
    let disk = fs.crash(|_| Loss::Prefix(0));
    let mut seen = Vec::new();
    Writer::open_with::<Value, _>(dir(), "g", opts(&disk, None), |_, e| {
        seen.push(e.data["i"].clone());
        Ok(())
    })
    .unwrap();
    assert_eq!(seen, [json!(1), json!(2)]);
    let saved = disk
        .names()
        .into_iter()
        .filter(|n| n.to_string_lossy().contains(".cut-"))
        .count();
    assert_eq!(saved, 1, "the record whose sync failed is saved aside");
    let _ = path("g");
}
