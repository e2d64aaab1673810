//! What a replay reports when a session's records are refused: the first refused record is
//! the one reported, a record refused before a damaged line wins over the damage (and after
//! it, the damage wins), and opening a session the replay refuses changes nothing on disk, not
//! even the torn tail that recovery would cut. Pinned for `load` and `open` alike, with the
//! refusal at batch-sized boundaries, so a replay restructured (read ahead, batched, on
//! another thread: tried, see docs/benchmarks.md) keeps the order a replay in one pass has.

use std::path::Path;

use lazarus_ledger::{Header, LedgerError, Writer};
use lazarus_session::record::FORMAT;
use lazarus_session::store::Store;
use lazarus_session::{LocalStore, ReplayError, SessionError, SessionId};

const ID: &str = "replay-order";
const RECORDS: u64 = 400;

/// A ledger of `RECORDS` inputs written past the session's checks, the input at `duplicate`
/// (if any) reusing the id of the first, and `torn` bytes of a half-written line at the end.
fn ledger(dir: &Path, store: &LocalStore, duplicate: Option<u64>, torn: &[u8]) -> Vec<u8> {
    let w = Writer::create(
        dir,
        Header::new(FORMAT, ID),
        b"",
        store.ledger_options().clone(),
    )
    .expect("create");
    for seq in 1..=RECORDS {
        let input_id = if Some(seq) == duplicate {
            "in-1".to_string()
        } else {
            format!("in-{seq}")
        };
        let data = serde_json::json!({"input_id": input_id, "source": "user", "text": "go"});
        w.append_json("input", data.to_string().as_bytes())
            .expect("append");
    }
    drop(w);
    let path = dir.join(format!("{ID}.jsonl"));
    let mut bytes = std::fs::read(&path).expect("read");
    bytes.extend_from_slice(torn);
    std::fs::write(&path, &bytes).expect("write");
    bytes
}

/// Flips a byte inside the text of the record with this seq, so its checksum no longer holds.
fn damage(dir: &Path, seq: u64) {
    let path = dir.join(format!("{ID}.jsonl"));
    let mut bytes = std::fs::read(&path).expect("read");
    let needle = format!("\"seq\":{seq},");
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .expect("the record is there");
    let text = at
        + bytes[at..]
            .windows(4)
            .position(|w| w == b"\"go\"")
            .expect("its text");
    bytes[text + 1] = b'G';
    std::fs::write(&path, &bytes).expect("write");
}

fn refused_at(e: &SessionError) -> Option<u64> {
    match e {
        SessionError::Replay {
            seq,
            source: ReplayError::DuplicateInputId { first: 1, .. },
            ..
        } => Some(*seq),
        _ => None,
    }
}

/// The error `open` gives (a `Session` has no `Debug`, so no `expect_err`).
fn open_refused(store: &LocalStore, id: &SessionId) -> SessionError {
    match store.open(id) {
        Ok(_) => panic!("open should refuse the session"),
        Err(e) => e,
    }
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_first_refused_record_is_reported_by_load_and_open() {
    for duplicate in [2, 63, 64, 65, 300, RECORDS] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = LocalStore::open(tmp.path()).expect("store");
        ledger(tmp.path(), &store, Some(duplicate), b"");
        let id = SessionId::parse(ID).expect("id");
        let e = store.load(&id).expect_err("load refuses");
        assert_eq!(refused_at(&e), Some(duplicate), "load: {e}");
        let e = open_refused(&store, &id);
        assert_eq!(refused_at(&e), Some(duplicate), "open: {e}");
    }
}

#[test]
fn opening_a_refused_session_leaves_even_its_torn_tail_in_place() {
    let torn = br#"{"seq":401,"ts":"2026-12-03T00:00:00Z","kind":"inp"#;
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(tmp.path()).expect("store");
    let before = ledger(tmp.path(), &store, Some(350), torn);
    let listed = files(tmp.path());
    let id = SessionId::parse(ID).expect("id");
    let e = open_refused(&store, &id);
    assert_eq!(refused_at(&e), Some(350), "{e}");
    let path = tmp.path().join(format!("{ID}.jsonl"));
    assert_eq!(
        std::fs::read(&path).expect("read"),
        before,
        "the file changed"
    );
    assert_eq!(files(tmp.path()), listed, "a file was added or removed");

    // The same file without the refused record: recovery does cut (and save) that tail, so
    // the check above is not vacuous.
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(tmp.path()).expect("store");
    let before = ledger(tmp.path(), &store, None, torn);
    let s = store.open(&id).expect("opens");
    assert_eq!(s.open_report().records_replayed, RECORDS);
    assert_eq!(s.open_report().truncated_bytes, torn.len() as u64);
    drop(s);
    let path = tmp.path().join(format!("{ID}.jsonl"));
    let after = std::fs::read(&path).expect("read");
    assert_eq!(after.len(), before.len() - torn.len());
}

#[test]
fn a_refusal_before_damage_wins_and_damage_before_a_refusal_wins() {
    let id = SessionId::parse(ID).expect("id");
    // refused at 100, damaged at 300: the refusal, as one thread reading in order reports it
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(tmp.path()).expect("store");
    ledger(tmp.path(), &store, Some(100), b"");
    damage(tmp.path(), 300);
    let e = store.load(&id).expect_err("load refuses");
    assert_eq!(refused_at(&e), Some(100), "load: {e}");
    let e = open_refused(&store, &id);
    assert_eq!(refused_at(&e), Some(100), "open: {e}");

    // damaged at 100, refused at 300: the damage
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(tmp.path()).expect("store");
    ledger(tmp.path(), &store, Some(300), b"");
    damage(tmp.path(), 100);
    for e in [
        store.load(&id).expect_err("load refuses"),
        open_refused(&store, &id),
    ] {
        match &e {
            SessionError::Ledger(LedgerError::Corrupt(c)) => {
                assert_eq!(c.line, 101, "{e}") // the header is line 1
            }
            other => panic!("expected the damage at line 101, got: {other}"),
        }
    }
}
