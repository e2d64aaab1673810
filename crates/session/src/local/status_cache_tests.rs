//! The status cache's file: what is written reads back, and nothing damaged is taken.

use super::*;

fn entry(k: usize, with_line: bool) -> Entry {
    Entry {
        id: format!("s{k:03}"),
        key: Key {
            created_at: format!("2026-12-06T10:00:{:02}.000000Z", k % 60),
            size: 100 + k as u64,
            last_seq: k as u64,
        },
        status: STATUSES[k % STATUSES.len()],
        error: k.is_multiple_of(5).then(|| format!("broken ✗ {k}")),
        line: with_line.then(|| Line {
            file: FileKey {
                ino: 7 + k as u64,
                size: 100 + k as u64,
                ctime: (1_700_000_000 + k as i64, 123),
                mtime: (-5, 999_999_999),
            },
            first_input: k.is_multiple_of(2).then(|| format!("task «{k}»")),
            updated_at: "2026-12-06T11:00:00.000000Z".into(),
            last_kind: "turn_end".into(),
            parent: k.is_multiple_of(3).then(|| "s000".into()),
            meta: Some(format!(r#"{{"workspace":"/w/{k}"}}"#)),
            workspace: Some(format!("/w/{k}")),
        }),
    }
}

fn saved(entries: &[Entry]) -> (tempfile::TempDir, StatusCache) {
    let dir = tempfile::tempdir().unwrap();
    let mut c = StatusCache::load(dir.path());
    for e in entries {
        c.put(e.clone());
    }
    c.save(None);
    let loaded = StatusCache::load(dir.path());
    (dir, loaded)
}

#[test]
fn every_entry_reads_back_as_written() {
    let entries: Vec<Entry> = (0..40).map(|k| entry(k, k % 4 != 1)).collect();
    let (_dir, c) = saved(&entries);
    assert_eq!(c.len(), entries.len());
    for (hint, e) in entries.iter().enumerate() {
        // found at the wrong position as well as at none
        for h in [hint, 0, usize::MAX] {
            assert_eq!(c.lookup(&e.id, h), Some(e.as_ref()), "{} at hint {h}", e.id);
        }
        assert_eq!(c.get(&e.id, &e.key), Some((e.status, e.error.as_deref())));
        let mut other = e.key.clone();
        other.size += 1;
        assert_eq!(c.get(&e.id, &other), None, "another size taken");
        if let Some(l) = &e.line {
            assert!(c.get_line(&e.id, &l.file, 0).is_some());
            let mut moved = l.file;
            moved.mtime.1 += 1;
            assert!(
                c.get_line(&e.id, &moved, 0).is_none(),
                "another mtime taken"
            );
        } else {
            assert!(
                c.get_line(
                    &e.id,
                    &FileKey {
                        ino: 0,
                        size: 0,
                        ctime: (0, 0),
                        mtime: (0, 0)
                    },
                    0
                )
                .is_none()
            );
        }
    }
    assert_eq!(c.lookup("s999", 3), None);
}

/// A cache whose bytes changed in any place — a bit flipped, a byte cut, a status rule or
/// layout of another build — is not taken at all.
#[test]
fn a_damaged_or_foreign_file_is_ignored() {
    let entries: Vec<Entry> = (0..12).map(|k| entry(k, true)).collect();
    let (dir, _) = saved(&entries);
    let path = dir.path().join(FILE_NAME);
    let good = std::fs::read(&path).unwrap();
    let mut bad: Vec<Vec<u8>> = Vec::new();
    for at in (0..good.len()).step_by(7) {
        let mut b = good.clone();
        b[at] ^= 0x10;
        bad.push(b);
    }
    bad.push(good[..good.len() - 1].to_vec());
    bad.push(Vec::new());
    // another status rule, the checksum made right: refused by the rule itself
    let mut rule = good.clone();
    rule[12..16].copy_from_slice(&(STATUS_RULE - 1).to_le_bytes());
    let crc = checksum(&rule, &[]);
    rule[20..24].copy_from_slice(&crc.to_le_bytes());
    bad.push(rule);
    // an offset out of bounds, checksum made right
    let mut off = good.clone();
    off[HEADER + 4..HEADER + 8].copy_from_slice(&1_000_000u32.to_le_bytes());
    let crc = checksum(&off, &[]);
    off[20..24].copy_from_slice(&crc.to_le_bytes());
    bad.push(off);
    for (n, b) in bad.iter().enumerate() {
        std::fs::write(&path, b).unwrap();
        let c = StatusCache::load(dir.path());
        assert_eq!(c.len(), 0, "damaged file {n} was taken");
    }
    std::fs::write(&path, &good).unwrap();
    assert_eq!(StatusCache::load(dir.path()).len(), entries.len());
}

#[test]
fn a_save_in_a_listing_order_keeps_only_those_sessions_in_that_order() {
    let entries: Vec<Entry> = (0..10).map(|k| entry(k, true)).collect();
    let (dir, mut c) = saved(&entries);
    let order = ["s007", "s002", "s009"];
    c.note_present(order.len());
    c.save(Some(&order));
    let c = StatusCache::load(dir.path());
    assert_eq!(c.len(), 3);
    for (i, id) in order.iter().enumerate() {
        assert_eq!(c.file.id(i), id.as_bytes());
        assert_eq!(c.file.find(id, 99), Some(i));
    }
}
