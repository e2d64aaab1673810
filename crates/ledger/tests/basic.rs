//! The ledger's everyday behaviour: create, append, reopen, read, limits and errors.

use lazarus_ledger::{
    Durability, Header, LedgerError, Options, Problem, Reader, Writer, ledger_path, read_tail,
    repair, verify_file,
};
use serde_json::{Value, json};

fn opts() -> Options {
    Options {
        format: Some("test.ledger".into()),
        ..Options::default()
    }
}

fn header(id: &str) -> Header {
    Header::new("test.ledger", id)
}

#[test]
fn create_append_reopen_read() {
    let dir = tempfile::tempdir().unwrap();
    let w = Writer::create(dir.path(), header("s1"), b"", opts()).unwrap();
    for i in 1..=5u64 {
        let a = w.append("note", &json!({"i": i})).unwrap();
        assert_eq!(a.seq, i);
    }
    drop(w);
    let mut seen = Vec::new();
    let (w, rec) = Writer::open_with::<Value, _>(dir.path(), "s1", opts(), |_, env| {
        seen.push((env.seq, env.data["i"].as_u64().unwrap()));
        Ok(())
    })
    .unwrap();
    assert!(rec.cut.is_none());
    assert_eq!(rec.records, 5);
    assert_eq!(seen, (1..=5).map(|i| (i, i)).collect::<Vec<_>>());
    assert_eq!(w.append("note", &json!({"i": 6})).unwrap().seq, 6);
    // The file is plain JSONL: every line parses on its own.
    let text = std::fs::read_to_string(ledger_path(dir.path(), "s1")).unwrap();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert!(v["crc"].as_str().unwrap().len() == 8);
    }
    let mut r = Reader::open(&ledger_path(dir.path(), "s1"), &opts()).unwrap();
    let mut n = 0;
    while let Some((_, env)) = r.next_record::<Value>().unwrap() {
        n += 1;
        assert_eq!(env.seq, n);
    }
    assert_eq!(n, 6);
}

#[test]
fn create_is_exclusive() {
    let dir = tempfile::tempdir().unwrap();
    let w = Writer::create(dir.path(), header("s1"), b"", opts()).unwrap();
    w.append("note", &json!({})).unwrap();
    drop(w);
    let before = std::fs::read(ledger_path(dir.path(), "s1")).unwrap();
    let err = Writer::create(dir.path(), header("s1"), b"", opts()).unwrap_err();
    assert!(matches!(err, LedgerError::AlreadyExists { .. }), "{err}");
    assert_eq!(
        std::fs::read(ledger_path(dir.path(), "s1")).unwrap(),
        before
    );
}

#[test]
fn interrupted_creation_is_reclaimed_and_saved_aside() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(ledger_path(dir.path(), "s1"), b"{\"seq\":0,\"ts\":\"x").unwrap();
    let w = Writer::create(dir.path(), header("s1"), b"", opts()).unwrap();
    assert_eq!(w.append("note", &json!({})).unwrap().seq, 1);
    let aside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".cut-"))
        .collect();
    assert_eq!(aside.len(), 1);
}

#[test]
fn hostile_ids_are_refused_before_touching_disk() {
    let dir = tempfile::tempdir().unwrap();
    for id in ["../x", "a/b", "..", ".x", "", "-x", "a\nb"] {
        let err = Writer::create(dir.path(), header(id), b"", opts()).unwrap_err();
        assert!(
            matches!(err, LedgerError::InvalidId { .. }),
            "{id:?}: {err}"
        );
        let err = Writer::open(dir.path(), id, opts()).unwrap_err();
        assert!(
            matches!(err, LedgerError::InvalidId { .. }),
            "{id:?}: {err}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn unknown_version_and_format_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = header("v2");
    h.version = 2;
    Writer::create(dir.path(), h, b"", Options::default()).unwrap();
    let err = Writer::open(dir.path(), "v2", opts()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: unsupported session format version 2; this build reads 1",
            ledger_path(dir.path(), "v2").display()
        )
    );
    Writer::create(
        dir.path(),
        Header::new("other", "o"),
        b"",
        Options::default(),
    )
    .unwrap();
    let err = Writer::open(dir.path(), "o", opts()).unwrap_err();
    assert!(matches!(err, LedgerError::WrongFormat { .. }), "{err}");
}

#[test]
fn oversized_record_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        line_bytes_max: 200,
        ..opts()
    };
    let w = Writer::create(dir.path(), header("s1"), b"", o.clone()).unwrap();
    let len = w.len();
    let err = w
        .append("note", &json!({"x": "y".repeat(300)}))
        .unwrap_err();
    assert!(matches!(err, LedgerError::RecordTooLarge { .. }), "{err}");
    assert_eq!(w.len(), len);
    assert_eq!(w.append("note", &json!({})).unwrap().seq, 1);
}

#[test]
fn torn_tail_is_invisible_to_readers_and_cut_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let w = Writer::create(dir.path(), header("s1"), b"", opts()).unwrap();
    w.append("note", &json!({"i": 1})).unwrap();
    drop(w);
    let path = ledger_path(dir.path(), "s1");
    let good = std::fs::read(&path).unwrap();
    let mut torn = good.clone();
    torn.extend_from_slice(b"{\"seq\":2,\"ts\":\"2026");
    std::fs::write(&path, &torn).unwrap();
    let mut r = Reader::open(&path, &opts()).unwrap();
    assert!(r.next_record::<Value>().unwrap().is_some());
    assert!(r.next_record::<Value>().unwrap().is_none());
    assert!(matches!(r.cut().unwrap().reason, Problem::TornTail { .. }));
    let (w, rec) = Writer::open(dir.path(), "s1", opts()).unwrap();
    let cut = rec.cut.unwrap();
    assert_eq!(cut.offset, good.len() as u64);
    assert_eq!(cut.bytes, torn.len() as u64 - good.len() as u64);
    assert_eq!(w.append("note", &json!({"i": 2})).unwrap().seq, 2);
    drop(w);
    assert!(verify_file(&path, &opts()).unwrap().is_clean());
}

#[test]
fn corrupt_middle_line_refuses_open_then_repair_saves_and_cuts() {
    let dir = tempfile::tempdir().unwrap();
    let w = Writer::create(dir.path(), header("s1"), b"", opts()).unwrap();
    for i in 1..=3 {
        w.append("note", &json!({"i": i})).unwrap();
    }
    drop(w);
    let path = ledger_path(dir.path(), "s1");
    let text = std::fs::read_to_string(&path).unwrap();
    let line2_offset = text.lines().next().unwrap().len() + 1;
    let bad = text.replacen("\"i\":1", "\"i\":7", 1);
    std::fs::write(&path, &bad).unwrap();
    let err = Writer::open(dir.path(), "s1", opts()).unwrap_err();
    let c = err.corruption().expect("corruption");
    assert_eq!(c.line, 2);
    assert_eq!(c.offset, line2_offset as u64);
    assert!(matches!(c.problem, Problem::CrcMismatch { .. }), "{err}");
    assert!(err.to_string().contains("line 2"));
    let report = verify_file(&path, &opts()).unwrap();
    assert_eq!(report.problems.len(), 1);
    assert_eq!(report.problems[0].line, 2);
    let out = repair(dir.path(), "s1", &opts()).unwrap();
    let saved = std::fs::read(out.saved_to.unwrap()).unwrap();
    assert_eq!(saved, bad.as_bytes()[line2_offset..]);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bad.as_bytes()[..line2_offset]
    );
    let (w, _) = Writer::open(dir.path(), "s1", opts()).unwrap();
    assert_eq!(w.append("note", &json!({})).unwrap().seq, 1);
}

#[test]
fn duplicated_and_reordered_lines_are_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let w = Writer::create(dir.path(), header("s1"), b"", opts()).unwrap();
    for i in 1..=3 {
        w.append("note", &json!({"i": i})).unwrap();
    }
    drop(w);
    let path = ledger_path(dir.path(), "s1");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cases = [
        (
            vec![0, 1, 1, 2, 3],
            Problem::SeqNotIncreasing {
                expected: 2,
                found: 1,
            },
            3,
        ),
        (
            vec![0, 1, 3, 2],
            Problem::SeqGap {
                expected: 2,
                found: 3,
            },
            3,
        ),
        (
            vec![0, 2, 3],
            Problem::SeqGap {
                expected: 1,
                found: 2,
            },
            2,
        ),
        (vec![0, 1, 0, 2], Problem::MisplacedHeader { line: 3 }, 3),
    ];
    for (order, problem, line) in cases {
        let body: String = order.iter().map(|&i| format!("{}\n", lines[i])).collect();
        std::fs::write(&path, body).unwrap();
        let err = Writer::open(dir.path(), "s1", opts()).unwrap_err();
        let c = err.corruption().unwrap_or_else(|| panic!("{err}"));
        assert_eq!((c.problem.clone(), c.line), (problem, line), "{order:?}");
    }
}

#[test]
fn reader_after_seq_bisects_large_files() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        durability: Durability::None,
        ..opts()
    };
    let w = Writer::create(dir.path(), header("big"), b"", o.clone()).unwrap();
    for i in 1..=5000u64 {
        w.append(
            "note",
            &json!({"i": i, "pad": "p".repeat((i % 97) as usize)}),
        )
        .unwrap();
    }
    drop(w);
    let path = ledger_path(dir.path(), "big");
    for after in [0u64, 1, 2, 777, 2500, 4999, 5000, 6000] {
        let mut r = Reader::open_after(&path, &o, after).unwrap();
        let first = r
            .next_record::<Value>()
            .unwrap()
            .map(|(info, e)| (info.line, e.seq));
        if after >= 5000 {
            assert_eq!(first, None);
        } else {
            assert_eq!(first, Some((after + 2, after + 1)), "after {after}");
            let mut expect = after + 2;
            while let Some((_, e)) = r.next_record::<Value>().unwrap() {
                assert_eq!(e.seq, expect);
                expect += 1;
            }
            assert_eq!(expect, 5001);
        }
    }
}

#[test]
fn tail_reads_the_last_good_record_only() {
    let dir = tempfile::tempdir().unwrap();
    let w = Writer::create(dir.path(), header("s1"), b"", opts()).unwrap();
    w.append("a", &json!({"i": 1})).unwrap();
    w.append("b", &json!({"big": "x".repeat(100_000)})).unwrap();
    drop(w);
    let path = ledger_path(dir.path(), "s1");
    let t = read_tail(&path, &opts()).unwrap();
    assert_eq!(
        (t.last_seq, t.last_kind.as_str(), t.trailing_bytes),
        (2, "b", 0)
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"seq\":3,").unwrap();
    let t = read_tail(&path, &opts()).unwrap();
    assert_eq!((t.last_seq, t.trailing_bytes), (2, 9));
}

/// Many appenders each wait for one group commit: the sync that covers them must let every
/// one of them go (a wake-up that reached only one waiter left the rest asleep for good).
#[test]
fn grouped_mode_lets_every_waiting_appender_go() {
    let (done, finished) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            finished.recv_timeout(std::time::Duration::from_secs(60))
        {
            eprintln!("appenders still waiting after 60 s: a sync did not wake them all");
            std::process::exit(101);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        durability: Durability::Grouped,
        ..opts()
    };
    let w = Writer::create(dir.path(), header("g"), b"", o).unwrap();
    for round in 0..3 {
        let start = std::sync::Barrier::new(48);
        std::thread::scope(|s| {
            for t in 0..48 {
                let (w, start) = (&w, &start);
                s.spawn(move || {
                    start.wait();
                    w.append("note", &json!({"round": round, "t": t})).unwrap();
                });
            }
        });
    }
    assert_eq!(w.next_seq(), 145);
    let _ = done.send(());
}

#[test]
fn grouped_mode_acknowledges_every_concurrent_append() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        durability: Durability::Grouped,
        ..opts()
    };
    let w = Writer::create(dir.path(), header("g"), b"", o.clone()).unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let w = &w;
            s.spawn(move || {
                for i in 0..50 {
                    w.append("note", &json!({"t": t, "i": i})).unwrap();
                }
            });
        }
    });
    assert_eq!(w.next_seq(), 401);
    drop(w);
    let report = verify_file(&ledger_path(dir.path(), "g"), &o).unwrap();
    assert!(report.is_clean());
    assert_eq!(report.records, 400);
}
