//! The ledger's edges, each pinned at its boundary (found by mutation testing: each of these
//! once let a deliberately broken ledger pass the suite).

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lazarus_ledger::fs::Fs;
use lazarus_ledger::scan::Scanner;
use lazarus_ledger::sim::SimFs;
use lazarus_ledger::{
    Durability, Header, LedgerError, Options, Problem, Reader, Writer, ledger_path, verify_file,
};
use serde_json::{Value, json};

const DIR: &str = "/sim";

fn sim(fs: &SimFs, line_max: usize) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        lock: false,
        line_bytes_max: line_max,
        format: Some("t".into()),
        durability: Durability::PerRecord,
        ..Options::default()
    }
}

fn dir() -> &'static Path {
    Path::new(DIR)
}

/// A ledger `s` of `n` records `{"i":k}` on `fs`.
fn ledger(fs: &SimFs, n: u64, line_max: usize) -> Vec<u8> {
    let w = Writer::create(dir(), Header::new("t", "s"), b"", sim(fs, line_max)).unwrap();
    for i in 0..n {
        w.append("note", &json!({"i": i})).unwrap();
    }
    drop(w);
    fs.contents(&ledger_path(dir(), "s")).unwrap()
}

fn reopen(bytes: &[u8], line_max: usize) -> Result<lazarus_ledger::Recovery, LedgerError> {
    let disk = SimFs::new();
    disk.write_new_durable(&ledger_path(dir(), "s"), bytes)
        .unwrap();
    Writer::open(dir(), "s", sim(&disk, line_max)).map(|(_, r)| r)
}

#[test]
fn a_torn_tail_of_exactly_one_line_limit_plus_newline_is_debris_one_more_byte_is_not() {
    let fs = SimFs::new();
    let max = 200;
    let good = ledger(&fs, 2, max);
    for (extra, debris) in [(max + 1, true), (max + 2, false)] {
        let mut b = good.clone();
        b.extend(std::iter::repeat_n(b'x', extra));
        let r = reopen(&b, max);
        assert_eq!(r.is_ok(), debris, "{extra} torn bytes: {r:?}");
        if let Err(e) = r {
            let msg = e.to_string();
            assert!(msg.contains(&format!("({} bytes)", max + 1)), "{msg}");
        }
    }
}

#[test]
fn lines_of_exactly_the_limit_pass_one_byte_more_is_too_long_and_says_its_length() {
    let fs = SimFs::new();
    let mut good = ledger(&fs, 1, 4096);
    // a long record in the middle, a short one after it
    let long = ledger_tail_record(&fs, json!({"pad": "y".repeat(300)}));
    let short = ledger_tail_record(&fs, json!({"i": 3}));
    good.extend_from_slice(&long);
    good.extend_from_slice(&short);
    let longest = long.len() - 1;
    assert!(
        reopen(&good, longest).is_ok(),
        "every line fits a limit of {longest}"
    );
    match reopen(&good, longest - 1).unwrap_err() {
        LedgerError::Corrupt(c) => match c.problem {
            Problem::LineTooLong { len, max } => {
                assert_eq!((len, max), (longest as u64, longest as u64 - 1));
            }
            p => panic!("{p}"),
        },
        e => panic!("{e}"),
    }
}

/// Appends `data` to ledger `s` on `fs` (as the next record) and returns its line.
fn ledger_tail_record(fs: &SimFs, data: Value) -> Vec<u8> {
    let (w, _) = Writer::open(dir(), "s", sim(fs, 4096)).unwrap();
    let a = w.append("note", &data).unwrap();
    fs.contents(&ledger_path(dir(), "s")).unwrap()[a.offset as usize..].to_vec()
}

#[test]
fn a_record_of_exactly_the_line_limit_is_taken_one_byte_more_is_refused_unwritten() {
    let fs = SimFs::new();
    let w = Writer::create(dir(), Header::new("t", "s"), b"", sim(&fs, 4096)).unwrap();
    let pad = |n: usize| json!({"pad": "x".repeat(n)});
    let a = w.append("note", &pad(300)).unwrap();
    let line_of_300 = a.len as usize - 1; // without the newline
    drop(w);
    let max = line_of_300 + 10;
    let (w, _) = Writer::open(dir(), "s", sim(&fs, max)).unwrap();
    let fits = w.append("note", &pad(310)).unwrap();
    assert_eq!(fits.len - 1, max as u64, "exactly the limit is accepted");
    let size = w.len();
    match w.append("note", &pad(311)) {
        Err(LedgerError::RecordTooLarge { len, max: m }) => assert_eq!((len, m), (max + 1, max)),
        r => panic!("{r:?}"),
    }
    assert_eq!(w.len(), size, "nothing written");
    assert_eq!(
        fs.contents(&ledger_path(dir(), "s")).unwrap().len() as u64,
        size
    );
}

#[test]
fn record_data_must_be_one_line_of_a_json_object() {
    let fs = SimFs::new();
    let w = Writer::create(dir(), Header::new("t", "s"), b"", sim(&fs, 4096)).unwrap();
    assert!(w.is_empty() && !w.is_poisoned());
    for bad in [&b"[1]"[..], b"{\"a\":\n1}", b"\"x\""] {
        assert!(
            matches!(w.append_json("note", bad), Err(LedgerError::Serialize(_))),
            "{bad:?}"
        );
    }
    let a = w.append_json("note", b"{\"a\":1}").unwrap();
    assert_eq!(w.len(), a.offset + a.len);
    assert_eq!(
        w.len(),
        fs.contents(&ledger_path(dir(), "s")).unwrap().len() as u64
    );
    assert!(!w.is_empty() && !w.is_poisoned());
}

#[test]
fn a_later_line_with_the_same_seq_as_the_damaged_one_is_a_stale_copy_not_a_later_record() {
    let fs = SimFs::new();
    let good = ledger(&fs, 2, 4096);
    let lines: Vec<&[u8]> = good.split_inclusive(|&b| b == b'\n').collect();
    // line 3 (seq 2) damaged, then a valid copy of seq 2 (as stale blocks could hold)
    let mut b: Vec<u8> = lines[..2].concat();
    let mut damaged = lines[2].to_vec();
    damaged[5] ^= 0x20;
    b.extend_from_slice(&damaged);
    b.extend_from_slice(lines[2]);
    let r = reopen(&b, 4096).expect("crash debris: no later record follows");
    let cut = r.cut.unwrap();
    assert_eq!((cut.line, cut.lines), (3, 2));
    // …while a valid seq 3 after it means seq 2 had been durable: refused
    let seq3 = ledger_tail_record(&fs, json!({"i": 2}));
    let mut b: Vec<u8> = lines[..2].concat();
    b.extend_from_slice(&damaged);
    b.extend_from_slice(&seq3);
    let e = reopen(&b, 4096).unwrap_err();
    assert!(e.to_string().contains("valid record follows"), "{e}");
}

#[test]
fn verify_reports_the_records_before_the_damage_and_is_not_clean() {
    let d = tempfile::tempdir().unwrap();
    let o = Options::default();
    let w = Writer::create(d.path(), Header::new("t", "s"), b"", o.clone()).unwrap();
    for i in 0..4 {
        w.append("note", &json!({"i": i})).unwrap();
    }
    drop(w);
    let path = ledger_path(d.path(), "s");
    assert!(verify_file(&path, &o).unwrap().is_clean());
    let mut b = std::fs::read(&path).unwrap();
    let third = b
        .iter()
        .enumerate()
        .filter(|(_, c)| **c == b'\n')
        .nth(2)
        .unwrap()
        .0
        + 5;
    b[third] ^= 0x20;
    std::fs::write(&path, &b).unwrap();
    let r = verify_file(&path, &o).unwrap();
    assert!(!r.is_clean());
    assert_eq!(r.records, 2, "two good records before the damaged one");
    assert_eq!(r.problems[0].line, 4);
    assert!(!r.problems[0].recoverable);
}

#[test]
fn a_header_naming_another_session_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let o = Options::default();
    drop(Writer::create(d.path(), Header::new("t", "a"), b"", o.clone()).unwrap());
    std::fs::rename(ledger_path(d.path(), "a"), ledger_path(d.path(), "b")).unwrap();
    let e = Writer::open(d.path(), "b", o).unwrap_err();
    assert!(e.to_string().contains("header names session"), "{e}");
}

#[test]
fn creation_checks_the_prefix_and_reuses_a_leftover_temporary_file() {
    let fs = SimFs::new();
    let bad_prefix =
        b"{\"seq\":1,\"ts\":\"x\",\"kind\":\"note\",\"data\":{},\"crc\":\"00000000\"}\n";
    let e = Writer::create(dir(), Header::new("t", "p"), bad_prefix, sim(&fs, 4096)).unwrap_err();
    assert!(
        matches!(e, LedgerError::Corrupt(_) | LedgerError::Serialize(_)),
        "{e}"
    );
    assert!(
        fs.contents(&ledger_path(dir(), "p")).is_none(),
        "nothing created"
    );
    // a creation that crashed left its temporary file: the next one goes through
    fs.write_new_durable(&dir().join(".q.jsonl.creating"), b"half")
        .unwrap();
    Writer::create(dir(), Header::new("t", "q"), b"", sim(&fs, 4096)).unwrap();
    assert!(fs.contents(&dir().join(".q.jsonl.creating")).is_none());
}

#[test]
fn a_damaged_header_before_records_is_a_session_never_reclaimed_by_a_new_creation() {
    let fs = SimFs::new();
    let mut b = ledger(&fs, 3, 4096);
    b[3] = 0; // a NUL in the header line
    let disk = SimFs::new();
    disk.write_new_durable(&ledger_path(dir(), "s"), &b)
        .unwrap();
    let e = Writer::create(dir(), Header::new("t", "s"), b"", sim(&disk, 4096)).unwrap_err();
    assert!(matches!(e, LedgerError::AlreadyExists { .. }), "{e}");
    assert_eq!(disk.contents(&ledger_path(dir(), "s")).unwrap(), b);
}

#[test]
fn creation_over_a_fifo_says_so_and_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let path = ledger_path(d.path(), "f");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let e = Writer::create(d.path(), Header::new("t", "f"), b"", Options::default()).unwrap_err();
    assert!(matches!(e, LedgerError::NotRegularFile { .. }), "{e}");
}

/// A reader that is interrupted (EINTR) before every chunk it returns.
struct Interrupting<R> {
    inner: R,
    interrupt_next: bool,
}

impl<R: Read> Read for Interrupting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.interrupt_next = !self.interrupt_next;
        if self.interrupt_next {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(7);
        self.inner.read(&mut buf[..n])
    }
}

#[test]
fn an_interrupted_read_is_retried_not_taken_for_an_error_or_the_end() {
    let fs = SimFs::new();
    let good = ledger(&fs, 5, 4096);
    let r = Interrupting {
        inner: &good[..],
        interrupt_next: false,
    };
    let (mut sc, _) = Scanner::from_start(Path::new("x"), r, 4096, None).unwrap();
    let mut n = 0;
    while sc.next_record::<Value>().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 5);
    assert!(sc.cut().is_none());
}

#[test]
fn raw_lines_are_exactly_the_stored_bytes() {
    let d = tempfile::tempdir().unwrap();
    let o = Options::default();
    let w = Writer::create(d.path(), Header::new("t", "s"), b"", o.clone()).unwrap();
    w.append("note", &json!({"text": "ünï"})).unwrap();
    drop(w);
    let bytes = std::fs::read(ledger_path(d.path(), "s")).unwrap();
    let mut r = Reader::open(&ledger_path(d.path(), "s"), &o).unwrap();
    let (_, seq, line) = r.next_line().unwrap().unwrap();
    assert_eq!(seq, 1);
    let second = bytes.split(|&b| b == b'\n').nth(1).unwrap();
    assert_eq!(line, second);
}

#[test]
fn group_commit_shares_syncs_between_writers() {
    let fs = SimFs::new();
    fs.set_sync_latency(Duration::from_millis(2));
    let o = Options {
        durability: Durability::Grouped,
        unsynced_bytes_max: 64 * 1024,
        ..sim(&fs, 4096)
    };
    let w = Writer::create(dir(), Header::new("t", "g"), b"", o).unwrap();
    let before = fs.syncs_started();
    let appends = 8 * 40;
    std::thread::scope(|s| {
        for t in 0..8 {
            let w = &w;
            s.spawn(move || {
                for i in 0..40 {
                    w.append("note", &json!({"t": t, "i": i})).unwrap();
                }
            });
        }
    });
    let syncs = fs.syncs_started() - before;
    assert!(
        syncs * 2 < appends,
        "{syncs} syncs for {appends} appends: group commit is not grouping"
    );
}

/// A reader whose disk fails once (EIO) after `ok_bytes`, and would then go on as if nothing
/// happened.
struct FailingOnce<R> {
    inner: R,
    ok_bytes: usize,
    failed: bool,
}

impl<R: Read> Read for FailingOnce<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.failed && self.ok_bytes == 0 {
            self.failed = true;
            return Err(std::io::Error::from_raw_os_error(5));
        }
        let n = buf.len().min(self.ok_bytes.max(1)).min(64);
        let n = self.inner.read(&mut buf[..n])?;
        self.ok_bytes = self.ok_bytes.saturating_sub(n);
        Ok(n)
    }
}

#[test]
fn a_read_error_is_an_error_naming_the_file_never_retried_or_taken_for_the_end() {
    let fs = SimFs::new();
    let good = ledger(&fs, 5, 4096);
    let header_end = good.iter().position(|&b| b == b'\n').unwrap() + 1;
    let r = FailingOnce {
        inner: &good[..],
        ok_bytes: header_end + 10,
        failed: false,
    };
    let (mut sc, _) = Scanner::from_start(Path::new("disk/x.jsonl"), r, 4096, None).unwrap();
    let mut n = 0;
    let err = loop {
        match sc.next_record::<Value>() {
            Ok(Some(_)) => n += 1,
            Ok(None) => panic!("the read error was taken for the end after {n} records"),
            Err(e) => break e,
        }
    };
    assert_eq!(n, 0, "no record read past the failure");
    let text = err.to_string();
    assert!(text.contains("disk/x.jsonl"), "{text}");
}
