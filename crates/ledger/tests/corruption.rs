//! Bit rot: every single-bit flip and every byte set to zero, anywhere in a ledger, is either
//! refused as corruption (nothing changed) or cut with every cut byte saved beside the file
//! and reported — never silently truncated — and it is pinned to the right line. Which of the
//! two is decided by the crash window (see `lazarus_ledger::scan`): damage with an intact
//! record after it is refused on a per-record ledger; damage within a group-commit ledger's
//! unsynced window at the end is crash debris.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lazarus_ledger::fs::Fs;
use lazarus_ledger::sim::SimFs;
use lazarus_ledger::{Durability, Header, LedgerError, Options, Writer};
use serde_json::json;

const DIR: &str = "/sim";

fn opts(fs: &SimFs, durability: Durability, unsynced_max: usize) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        lock: false,
        format: Some("test.ledger".into()),
        durability,
        unsynced_bytes_max: unsynced_max,
        ..Options::default()
    }
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Outcome {
    /// Open refused, naming this line; the file is unchanged.
    Refused(u64),
    /// The damage was cut from this line on, every cut byte saved beside the file.
    SavedAside(u64),
}

/// Opens a copy of `bytes` and says what happened; panics on silent truncation or an
/// undetected change.
fn outcome(path: &Path, bytes: &[u8], durability: Durability, unsynced_max: usize) -> Outcome {
    let disk = SimFs::new();
    disk.write_new_durable(path, bytes).unwrap();
    let id = path.file_stem().unwrap().to_str().unwrap();
    match Writer::open(Path::new(DIR), id, opts(&disk, durability, unsynced_max)) {
        Ok((_, rec)) => {
            let cut = rec.cut.expect("a damaged file opened as if it were clean");
            let saved: PathBuf = rec
                .saved_to
                .expect("bytes were cut without being saved: silent truncation");
            assert_eq!(
                disk.contents(&saved).unwrap(),
                &bytes[cut.offset as usize..],
                "the saved bytes are not exactly the cut bytes"
            );
            assert_eq!(
                disk.contents(path).unwrap(),
                &bytes[..cut.offset as usize],
                "the file is not the original up to the cut"
            );
            Outcome::SavedAside(cut.line)
        }
        Err(e) => {
            assert_eq!(
                disk.contents(path).unwrap(),
                bytes,
                "a refused open changed the file"
            );
            match e {
                LedgerError::Corrupt(c) => Outcome::Refused(c.line),
                LedgerError::NoHeader { .. } => Outcome::Refused(1),
                e => panic!("unexpected error {e}"),
            }
        }
    }
}

fn ledger(durability: Durability, unsynced_max: usize, records: u64) -> (PathBuf, Vec<u8>) {
    let fs = SimFs::new();
    let dir = Path::new(DIR);
    let w = Writer::create(
        dir,
        Header::new("test.ledger", "c"),
        b"",
        opts(&fs, durability, unsynced_max),
    )
    .unwrap();
    for i in 0..records {
        w.append(
            "note",
            &json!({"i": i, "text": format!("record number {i} ünïcode")}),
        )
        .unwrap();
    }
    drop(w);
    let path = dir.join("c.jsonl");
    let bytes = fs.contents(&path).unwrap();
    (path, bytes)
}

/// (line number, offset of its first byte, offset of its newline) for every line.
fn lines_of(bytes: &[u8]) -> Vec<(u64, usize, usize)> {
    let mut v = Vec::new();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            v.push((v.len() as u64 + 1, start, i));
            start = i + 1;
        }
    }
    v
}

/// Every damage of `original` made by `damage(pos)` must have the outcome `expect(pos)`.
fn check_every_byte(
    original: &[u8],
    path: &Path,
    durability: Durability,
    unsynced_max: usize,
    damage: impl Fn(&mut Vec<u8>, usize) -> bool,
    expect: impl Fn(usize) -> Outcome,
) -> usize {
    let mut checked = 0;
    for pos in 0..original.len() {
        let mut bytes = original.to_vec();
        if !damage(&mut bytes, pos) {
            continue;
        }
        assert_eq!(
            outcome(path, &bytes, durability, unsynced_max),
            expect(pos),
            "damage at byte {pos} ({:?})",
            original[pos] as char
        );
        checked += 1;
    }
    checked
}

/// Per-record ledger: damage with an intact record after it is refused; damage in the last
/// line (or merging the last two) is cut and saved; always on the right line.
fn per_record_expectation(original: &[u8]) -> impl Fn(usize) -> Outcome {
    let lines = lines_of(original);
    let last = lines.len() as u64;
    move |pos| {
        let &(line, _, newline) = lines
            .iter()
            .find(|(_, s, e)| (*s..=*e).contains(&pos))
            .expect("every byte is on a line");
        if line == 1 {
            return Outcome::Refused(1);
        }
        // A damaged newline merges this line with the next: the damage reaches that one too.
        let damaged_through = if pos == newline { line + 1 } else { line };
        if damaged_through < last {
            Outcome::Refused(line)
        } else {
            Outcome::SavedAside(line)
        }
    }
}

#[test]
fn every_bit_flip_is_refused_or_saved_aside_on_the_right_line() {
    let (path, original) = ledger(Durability::PerRecord, 0, 12);
    let expect = per_record_expectation(&original);
    let mut checked = 0;
    for bit in 0..8 {
        checked += check_every_byte(
            &original,
            &path,
            Durability::PerRecord,
            0,
            |b, pos| {
                b[pos] ^= 1 << bit;
                true
            },
            &expect,
        );
    }
    assert_eq!(checked, original.len() * 8);
}

#[test]
fn every_byte_set_to_zero_is_refused_or_saved_aside_on_the_right_line() {
    let (path, original) = ledger(Durability::PerRecord, 0, 12);
    let checked = check_every_byte(
        &original,
        &path,
        Durability::PerRecord,
        0,
        |b, pos| std::mem::replace(&mut b[pos], 0) != 0,
        per_record_expectation(&original),
    );
    assert_eq!(checked, original.len());
}

/// The two cases that once lost data: a NUL in a middle record, and a bad checksum in the
/// last acknowledged record.
#[test]
fn a_nul_in_a_middle_record_is_refused_and_a_bad_last_record_is_saved() {
    let (path, original) = ledger(Durability::PerRecord, 0, 12);
    let lines = lines_of(&original);
    let (_, start, _) = lines[2]; // record 2
    let mut nul = original.clone();
    let space = start + nul[start..].iter().position(|&b| b == b' ').unwrap();
    nul[space] = 0;
    assert_eq!(
        outcome(&path, &nul, Durability::PerRecord, 0),
        Outcome::Refused(3)
    );
    let (_, start, end) = *lines.last().unwrap();
    let mut crc = original.clone();
    crc[end - 3] = if crc[end - 3] == b'0' { b'1' } else { b'0' };
    assert_eq!(
        outcome(&path, &crc, Durability::PerRecord, 0),
        Outcome::SavedAside(lines.len() as u64)
    );
    assert!(start > 0);
}

/// Group-commit ledger: damage that starts within its unsynced window of the end is crash
/// debris (cut, saved), even with intact records after it; damage further back is refused.
#[test]
fn group_commit_ledger_cuts_only_within_its_window() {
    let window = 1024;
    let (path, original) = ledger(Durability::Grouped, window, 40);
    let lines = lines_of(&original);
    let len = original.len();
    assert!(len > 3 * window, "the ledger spans several windows");
    let per_record = per_record_expectation(&original);
    let checked = check_every_byte(
        &original,
        &path,
        Durability::Grouped,
        window,
        |b, pos| {
            b[pos] ^= 0x20;
            true
        },
        |pos| {
            let &(line, start, _) = lines
                .iter()
                .find(|(_, s, e)| (*s..=*e).contains(&pos))
                .unwrap();
            if line > 1 && len - start <= window {
                Outcome::SavedAside(line)
            } else {
                per_record(pos)
            }
        },
    );
    assert_eq!(checked, len);
}
