//! Real processes: kill -9 at random points while appending, and the cross-process lock.
//!
//! The child side runs as an ignored test of this same binary, started by the parent with
//! `--ignored --exact`. `LAZARUS_CRASH_CYCLES` sets the kill cycles (default 200).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lazarus_ledger::{Header, LedgerError, Options, Writer, ledger_path, verify_file};
use rand::Rng;
use serde_json::{Value, json};

const ID: &str = "crash";

fn child(test: &str, dir: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            test,
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LAZARUS_TEST_DIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The seq in an "ack N" line (libtest may print its own text before the first one).
fn ack(line: &str) -> Option<&str> {
    line.find("ack ").map(|i| &line[i + 4..])
}

fn kill9(c: &mut Child) {
    let pid = rustix::process::Pid::from_child(c);
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
}

#[test]
#[ignore = "child process of kill_minus_nine_never_loses_an_acknowledged_record"]
fn child_appender() {
    let dir = std::path::PathBuf::from(std::env::var("LAZARUS_TEST_DIR").unwrap());
    let opts = Options {
        write_pieces: 4,
        piece_pause: Duration::from_micros(150),
        ..Options::default()
    };
    let w = match Writer::open(&dir, ID, opts.clone()) {
        Ok((w, _)) => w,
        Err(LedgerError::NotFound { .. }) => {
            Writer::create(&dir, Header::new("test.ledger", ID), b"", opts).unwrap()
        }
        Err(e) => panic!("{e}"),
    };
    let mut out = std::io::stdout().lock();
    loop {
        let seq = w.next_seq();
        let a = w
            .append("note", &json!({"seq_hint": seq, "pad": "p".repeat(400)}))
            .unwrap();
        writeln!(out, "ack {}", a.seq).unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn kill_minus_nine_never_loses_an_acknowledged_record() {
    let cycles: u64 = std::env::var("LAZARUS_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rng();
    let mut max_acked = 0u64;
    let mut torn_seen = 0;
    for cycle in 0..cycles {
        let mut c = child("child_appender", dir.path());
        let mut lines = BufReader::new(c.stdout.take().unwrap()).lines();
        // wait for the first acknowledgement, then kill at a random moment
        for line in lines.by_ref() {
            if let Some(seq) = ack(&line.unwrap()) {
                max_acked = max_acked.max(seq.parse().unwrap());
                break;
            }
        }
        std::thread::sleep(Duration::from_micros(rng.random_range(0..8000)));
        kill9(&mut c);
        for line in lines {
            let Ok(line) = line else { break };
            if let Some(seq) = ack(&line) {
                max_acked = max_acked.max(seq.parse().unwrap());
            }
        }
        c.wait().unwrap();
        let before = std::fs::read(ledger_path(dir.path(), ID)).unwrap_or_default();
        let mut seqs = Vec::new();
        let (w, rec) =
            Writer::open_with::<Value, _>(dir.path(), ID, Options::default(), |_, env| {
                assert_eq!(
                    env.data["seq_hint"],
                    json!(env.seq),
                    "record content matches its seq"
                );
                seqs.push(env.seq);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("cycle {cycle}: reopen failed: {e}"));
        if let Some(cut) = &rec.cut {
            torn_seen += 1;
            let saved = rec.saved_to.as_ref().expect("cut bytes are saved");
            assert_eq!(
                std::fs::read(saved).unwrap(),
                &before[cut.offset as usize..],
                "cycle {cycle}: the saved bytes are exactly the cut ones"
            );
        }
        assert!(
            seqs.len() as u64 >= max_acked,
            "cycle {cycle}: acknowledged seq {max_acked} missing (have {})",
            seqs.len()
        );
        assert!(seqs.iter().enumerate().all(|(i, &s)| s == i as u64 + 1));
        drop(w);
        let report = verify_file(&ledger_path(dir.path(), ID), &Options::default()).unwrap();
        assert!(report.is_clean(), "cycle {cycle}: {:?}", report.problems);
    }
    eprintln!("{cycles} kill cycles, {max_acked} acknowledged records, {torn_seen} torn tails cut");
    // The test is only worth something if kills landed mid-line: insist that they did.
    assert!(
        torn_seen * 10 >= cycles,
        "only {torn_seen} of {cycles} kills tore a line; the test did not exercise recovery"
    );
    let saved = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().contains(".cut-"))
        })
        .count();
    assert_eq!(saved as u64, torn_seen, "one saved file per cut");
}

#[test]
#[ignore = "child process of second_writer_is_refused_until_the_first_dies"]
fn child_holder() {
    let dir = std::path::PathBuf::from(std::env::var("LAZARUS_TEST_DIR").unwrap());
    let (_w, _) = Writer::open(&dir, "held", Options::default()).unwrap();
    println!("holding");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
fn second_writer_is_refused_until_the_first_dies() {
    let dir = tempfile::tempdir().unwrap();
    drop(
        Writer::create(
            dir.path(),
            Header::new("test.ledger", "held"),
            b"",
            Options::default(),
        )
        .unwrap(),
    );
    let mut c = child("child_holder", dir.path());
    let mut lines = BufReader::new(c.stdout.take().unwrap()).lines();
    // libtest prints "test child_holder ... " before the child's own output
    assert!(lines.any(|l| l.map(|l| l.ends_with("holding")).unwrap_or(false)));
    let err = Writer::open(dir.path(), "held", Options::default()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LedgerError::Locked { .. }), "{msg}");
    assert!(msg.contains(&format!("pid {}", c.id())), "{msg}");
    assert!(msg.contains("since"), "{msg}");
    kill9(&mut c);
    c.wait().unwrap();
    Writer::open(dir.path(), "held", Options::default()).expect("lock released by the kernel");
}
