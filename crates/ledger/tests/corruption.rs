//! Every single-bit flip anywhere in a ledger is detected and pinned to the right line.

use std::path::Path;
use std::sync::Arc;

use lazarus_ledger::sim::SimFs;
use lazarus_ledger::{Durability, Header, LedgerError, Options, Writer};
use serde_json::json;

fn opts(fs: &SimFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        lock: false,
        format: Some("test.ledger".into()),
        durability: Durability::None,
        ..Options::default()
    }
}

#[test]
fn every_bit_flip_is_detected_on_the_right_line() {
    let fs = SimFs::new();
    let dir = Path::new("/sim");
    let w = Writer::create(dir, Header::new("test.ledger", "c"), b"", opts(&fs)).unwrap();
    for i in 0..12 {
        w.append(
            "note",
            &json!({"i": i, "text": format!("record number {i} ünïcode")}),
        )
        .unwrap();
    }
    drop(w);
    let path = dir.join("c.jsonl");
    let original = fs.contents(&path).unwrap();
    // line number (1-based) of each byte
    let mut line_of = Vec::with_capacity(original.len());
    let mut line = 1u64;
    for &b in &original {
        line_of.push(line);
        if b == b'\n' {
            line += 1;
        }
    }
    let mut checked = 0;
    for pos in 0..original.len() {
        for bit in 0..8 {
            let mut bytes = original.clone();
            bytes[pos] ^= 1 << bit;
            let disk = SimFs::new();
            let _ = lazarus_ledger::fs::Fs::write_new_durable(&disk, &path, &bytes);
            let expected_line = line_of[pos];
            // A flipped newline merges or ends lines: the damage shows on this line either way.
            let detected_line = match Writer::open(dir, "c", opts(&disk)) {
                Ok((_, rec)) => rec.cut.map(|c| c.line),
                Err(LedgerError::Corrupt(c)) => Some(c.line),
                Err(LedgerError::NoHeader { .. }) => Some(1),
                Err(e) => panic!("pos {pos} bit {bit}: unexpected error {e}"),
            };
            assert_eq!(
                detected_line,
                Some(expected_line),
                "flip at byte {pos} bit {bit} not pinned to line {expected_line}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, original.len() * 8);
}
