//! Simulated power loss under the real writer code: at a random operation the power goes;
//! of the unsynced bytes any prefix survives, or sectors come back as zeros; a file whose
//! directory was never synced disappears. After every cut: no acknowledged record is lost,
//! no partial record is visible, and no crash is mistaken for corruption.
//!
//! `LAZARUS_POWER_TRIALS` sets the number of trials (default 20,000).

use std::path::Path;

use lazarus_ledger::sim::{Loss, SimFs};
use lazarus_ledger::{Durability, Header, LedgerError, Options, Writer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

fn trials() -> u64 {
    std::env::var("LAZARUS_POWER_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn opts(fs: &SimFs, pieces: usize, durability: Durability) -> Options {
    Options {
        fs: std::sync::Arc::new(fs.clone()),
        lock: false,
        format: Some("test.ledger".into()),
        write_pieces: pieces,
        durability,
        ..Options::default()
    }
}

fn record(rng: &mut StdRng, i: u64) -> Value {
    let pad = rng.random_range(0..1200);
    json!({"i": i, "pad": "z".repeat(pad)})
}

fn one_trial(seed: u64) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = SimFs::new();
    let dir = Path::new("/sim");
    let pieces = rng.random_range(1..4);
    let durability = if rng.random_bool(0.8) {
        Durability::PerRecord
    } else {
        Durability::Grouped
    };
    let o = opts(&fs, pieces, durability);
    let loss_seed: u64 = rng.random();
    let ops = rng.random_range(0..60);
    fs.arm_power_cut(ops, move |_| {
        let mut r = StdRng::seed_from_u64(loss_seed);
        if r.random_bool(0.5) {
            Loss::Prefix(r.random_range(0..4000))
        } else {
            Loss::Sectors {
                mask: r.random(),
                keep_len: r.random_bool(0.7),
            }
        }
    });
    let mut acked: Vec<Value> = Vec::new();
    let created = Writer::create(dir, Header::new("test.ledger", "p"), b"", o.clone());
    if let Ok(w) = &created {
        for i in 1..=40 {
            let data = record(&mut rng, i);
            match w.append("note", &data) {
                Ok(a) => {
                    if a.seq != i {
                        return Err(format!("seq {} for record {i}", a.seq));
                    }
                    acked.push(data);
                }
                Err(_) => break,
            }
        }
    }
    drop(created);
    let Some(disk) = fs.after_power_cut() else {
        return Ok(()); // the cut came after all the work
    };
    let o2 = opts(&disk, 1, Durability::PerRecord);
    let mut seen: Vec<Value> = Vec::new();
    let opened = Writer::open_with::<Value, _>(dir, "p", o2.clone(), |_, env| {
        seen.push(env.data);
        Ok(())
    });
    match opened {
        Ok((w, _)) => {
            if seen.len() < acked.len() {
                return Err(format!(
                    "lost acknowledged records: {} of {}",
                    seen.len(),
                    acked.len()
                ));
            }
            if seen[..acked.len()] != acked[..] {
                return Err("acknowledged record changed".into());
            }
            // Unacknowledged survivors must be whole records we wrote.
            for (k, v) in seen.iter().enumerate() {
                if v["i"] != json!(k as u64 + 1) {
                    return Err(format!("partial or foreign record at seq {}", k + 1));
                }
            }
            let next = w
                .append("note", &json!({"after": true}))
                .map_err(|e| e.to_string())?;
            if next.seq != seen.len() as u64 + 1 {
                return Err("next seq does not follow".into());
            }
            drop(w);
            let mut again = 0;
            let (_, rec) = Writer::open_with::<Value, _>(dir, "p", o2, |_, _| {
                again += 1;
                Ok(())
            })
            .map_err(|e| format!("reopen after recovery: {e}"))?;
            if rec.cut.is_some() || again != seen.len() + 1 {
                return Err("file not clean after recovery".into());
            }
            Ok(())
        }
        Err(LedgerError::NotFound { .. }) | Err(LedgerError::NoHeader { .. }) => {
            if !acked.is_empty() {
                return Err("a session with acknowledged records vanished".into());
            }
            Ok(())
        }
        Err(e) => Err(format!("false verdict after a power cut: {e}")),
    }
}

#[test]
fn power_loss_never_loses_acknowledged_records() {
    let n = trials();
    let mut failures = Vec::new();
    for seed in 0..n {
        if let Err(e) = one_trial(seed) {
            failures.push(format!("seed {seed}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures, first: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

#[test]
fn new_file_without_directory_sync_is_gone_after_power_cut() {
    let fs = SimFs::new();
    // create_new, write, fdatasync, then the cut before the directory sync
    fs.arm_power_cut(3, |_| Loss::Prefix(usize::MAX));
    let o = opts(&fs, 1, Durability::PerRecord);
    let r = Writer::create(Path::new("/sim"), Header::new("test.ledger", "p"), b"", o);
    assert!(
        r.is_err(),
        "create must not be acknowledged before the directory sync"
    );
    let disk = fs.after_power_cut().expect("power cut happened");
    let err = Writer::open(
        Path::new("/sim"),
        "p",
        opts(&disk, 1, Durability::PerRecord),
    )
    .unwrap_err();
    assert!(matches!(err, LedgerError::NotFound { .. }), "{err}");
}

#[test]
fn failed_fsync_poisons_the_writer_and_is_never_retried() {
    for durability in [Durability::PerRecord, Durability::Grouped] {
        let fs = SimFs::new();
        let w = Writer::create(
            Path::new("/sim"),
            Header::new("test.ledger", "p"),
            b"",
            opts(&fs, 1, durability),
        )
        .unwrap();
        w.append("note", &json!({"i": 1})).unwrap();
        // the next write succeeds, its fdatasync fails
        fs.arm_power_cut(1, |_| Loss::Prefix(0));
        let err = w.append("note", &json!({"i": 2})).unwrap_err();
        assert!(err.to_string().contains("simulated power cut"), "{err}");
        assert!(w.is_poisoned(), "{durability:?}");
        let err = w.append("note", &json!({"i": 3})).unwrap_err();
        assert!(
            matches!(err, LedgerError::Poisoned { .. }),
            "{durability:?}: {err}"
        );
        // reopening re-reads from disk: the acknowledged record is there, the other is not
        let disk = fs.after_power_cut().unwrap();
        let mut seen = Vec::new();
        Writer::open_with::<Value, _>(
            Path::new("/sim"),
            "p",
            opts(&disk, 1, durability),
            |_, e| {
                seen.push(e.data["i"].clone());
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen, [json!(1)]);
    }
}
