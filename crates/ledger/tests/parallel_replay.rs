//! The parallel replay (records decoded on worker threads, simd-json) against the one-thread
//! loop (serde_json): on every ledger, damaged or not, the caller sees the same records in the
//! same order, the same cut, the same first error, and a writer's recovery leaves the same
//! file. Small batches (4 KiB) make every ledger here many batches.

use std::path::Path;
use std::sync::Arc;

use lazarus_ledger::fs::Fs;
use lazarus_ledger::sim::SimFs;
use lazarus_ledger::{Durability, Header, LineInfo, Options, Problem, Reader, Writer};
use proptest::prelude::*;
use serde_json::{Value, json};

const DIR: &str = "/sim";
const ID: &str = "s1";

fn opts(fs: &SimFs, durability: Durability, workers: usize) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        lock: false,
        format: Some("test.ledger".into()),
        durability,
        unsynced_bytes_max: 8 * 1024,
        replay_workers: Some(workers),
        ..Options::default()
    }
}

fn path() -> std::path::PathBuf {
    Path::new(DIR).join(format!("{ID}.jsonl"))
}

/// A ledger of `records` with the given data, as bytes.
fn ledger(records: &[Value], durability: Durability) -> Vec<u8> {
    let fs = SimFs::new();
    let w = Writer::create(
        Path::new(DIR),
        Header::new("test.ledger", ID),
        b"",
        opts(&fs, durability, 0),
    )
    .unwrap();
    for r in records {
        w.append("note", r).unwrap();
    }
    drop(w);
    fs.contents(&path()).unwrap()
}

/// What a reader gives: every record, and how it ended (the cut, or the error's words).
type Seen = (Vec<(LineInfo, u64, Value)>, Result<Option<String>, String>);

fn read(bytes: &[u8], durability: Durability, workers: usize, refuse: Option<u64>) -> Seen {
    let fs = SimFs::new();
    fs.write_new_durable(&path(), bytes).unwrap();
    let mut reader = match Reader::open(&path(), &opts(&fs, durability, workers)) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Err(e.to_string())),
    };
    let mut seen = Vec::new();
    let end = reader.for_each_record::<Value, _>(|info, seq, data| {
        if Some(seq) == refuse {
            return Err(Problem::Invalid(format!("refused seq {seq}")));
        }
        seen.push((info, seq, data));
        Ok(())
    });
    let end = end
        .map(|()| reader.cut().map(|c| format!("{c:?}")))
        .map_err(|e| e.to_string());
    (seen, end)
}

/// What a writer's recovery does: its records, the outcome, and the file after.
fn recover(bytes: &[u8], durability: Durability, workers: usize) -> (Seen, Vec<u8>) {
    let fs = SimFs::new();
    fs.write_new_durable(&path(), bytes).unwrap();
    let mut seen = Vec::new();
    let opened = Writer::open_replaying::<Value, _>(
        Path::new(DIR),
        ID,
        opts(&fs, durability, workers),
        |info, seq, data| {
            seen.push((info, seq, data));
            Ok(())
        },
    );
    let end = opened
        .map(|(_, rec)| {
            rec.cut
                .map(|c| format!("{c:?} saved:{}", rec.saved_to.is_some()))
        })
        .map_err(|e| e.to_string());
    let after = fs.contents(&path()).unwrap();
    ((seen, end), after)
}

#[derive(Debug, Clone)]
enum Damage {
    None,
    FlipBit(prop::sample::Index, u8),
    Zero(prop::sample::Index, usize),
    Truncate(prop::sample::Index),
    DuplicateLine(prop::sample::Index),
    RemoveLine(prop::sample::Index),
    SwapLines(prop::sample::Index, prop::sample::Index),
    AppendGarbage(Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        2 => Just(Damage::None),
        1 => any::<(prop::sample::Index, u8)>().prop_map(|(i, b)| Damage::FlipBit(i, b % 8)),
        1 => (any::<prop::sample::Index>(), 1usize..600).prop_map(|(i, n)| Damage::Zero(i, n)),
        1 => any::<prop::sample::Index>().prop_map(Damage::Truncate),
        1 => any::<prop::sample::Index>().prop_map(Damage::DuplicateLine),
        1 => any::<prop::sample::Index>().prop_map(Damage::RemoveLine),
        1 => any::<(prop::sample::Index, prop::sample::Index)>().prop_map(|(a, b)| Damage::SwapLines(a, b)),
        1 => proptest::collection::vec(any::<u8>(), 1..200).prop_map(Damage::AppendGarbage),
    ]
}

fn apply(bytes: &mut Vec<u8>, d: &Damage) {
    let lines = |b: &[u8]| -> Vec<Vec<u8>> {
        b.split_inclusive(|&c| c == b'\n')
            .map(<[u8]>::to_vec)
            .collect()
    };
    match d {
        Damage::None => {}
        Damage::FlipBit(i, bit) => {
            let i = i.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        Damage::Zero(i, n) => {
            let i = i.index(bytes.len());
            let end = (i + n).min(bytes.len());
            bytes[i..end].fill(0);
        }
        Damage::Truncate(i) => bytes.truncate(i.index(bytes.len())),
        Damage::DuplicateLine(i) => {
            let mut l = lines(bytes);
            let k = 1 + i.index(l.len() - 1);
            let dup = l[k].clone();
            l.insert(k, dup);
            *bytes = l.concat();
        }
        Damage::RemoveLine(i) => {
            let mut l = lines(bytes);
            l.remove(1 + i.index(l.len() - 1));
            *bytes = l.concat();
        }
        Damage::SwapLines(a, b) => {
            let mut l = lines(bytes);
            let n = l.len() - 1;
            l.swap(1 + a.index(n), 1 + b.index(n));
            *bytes = l.concat();
        }
        Damage::AppendGarbage(g) => bytes.extend_from_slice(g),
    }
}

fn record() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[ -~\u{e9}\u{1F600}\n\t\"\\\\]{0,3000}".prop_map(|t| json!({ "text": t })),
        (any::<u64>(), any::<i64>()).prop_map(|(a, b)| json!({ "a": a, "b": b })),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!({ "f": f, "zero": -0.0 })),
        Just(json!({ "nested": [[[[{"a": [1, 2, {"b": null}]}]]]] })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(250))]

    #[test]
    fn parallel_replay_sees_what_the_loop_sees(
        records in proptest::collection::vec(record(), 1..80),
        grouped in any::<bool>(),
        d in damage(),
        workers in 1usize..4,
        refuse in proptest::option::of(1u64..80),
    ) {
        let durability = if grouped { Durability::Grouped } else { Durability::PerRecord };
        let mut bytes = ledger(&records, durability);
        apply(&mut bytes, &d);
        let one = read(&bytes, durability, 0, refuse);
        let many = read(&bytes, durability, workers, refuse);
        prop_assert_eq!(&one, &many);
        let (seen_one, after_one) = recover(&bytes, durability, 0);
        let (seen_many, after_many) = recover(&bytes, durability, workers);
        prop_assert_eq!(seen_one, seen_many);
        prop_assert!(after_one == after_many, "recovery left different files");
    }
}

/// The guard of the test itself: undamaged ledgers are read whole, damage is found, and the
/// ledgers are many batches (a test of one batch would prove nothing about the order).
#[test]
fn the_cases_reach_what_they_test() {
    let records: Vec<Value> = (0..300)
        .map(|i| json!({ "text": "x".repeat(100 + i * 7) }))
        .collect();
    let bytes = ledger(&records, Durability::PerRecord);
    assert!(
        bytes.len() > 20 * 4096,
        "{} bytes: too few batches",
        bytes.len()
    );
    let (seen, end) = read(&bytes, Durability::PerRecord, 2, None);
    assert_eq!(seen.len(), 300);
    assert_eq!(end, Ok(None));
    // a flipped bit in the middle: refused at that line by both
    let mut bad = bytes.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 4;
    let (one, many) = (
        read(&bad, Durability::PerRecord, 0, None),
        read(&bad, Durability::PerRecord, 2, None),
    );
    assert!(one.1.is_err(), "{:?}", one.1);
    assert_eq!(one, many);
    // a torn tail: cut by both
    let torn = &bytes[..bytes.len() - 10];
    let (one, many) = (
        read(torn, Durability::PerRecord, 0, None),
        read(torn, Durability::PerRecord, 2, None),
    );
    assert!(matches!(&one.1, Ok(Some(_))), "{:?}", one.1);
    assert_eq!(one, many);
    // a refusal by the caller stops both at the same record
    let (one, many) = (
        read(&bytes, Durability::PerRecord, 0, Some(150)),
        read(&bytes, Durability::PerRecord, 2, Some(150)),
    );
    assert_eq!(one.0.len(), 149);
    assert_eq!(one, many);
}
