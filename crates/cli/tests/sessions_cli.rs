//! The `lazarus sessions …` commands run as a user runs them: the real binary, a real
//! session directory, real processes killed with SIGKILL.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lazarus_session::SessionId;
use lazarus_session::{LocalStore, Store};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn cmd(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("sessions")
        .args(args)
        .env("LAZARUS_SESSION_DIR", dir)
        .env_remove("LAZARUS_LOG")
        .stdin(Stdio::null());
    c
}

fn run(dir: &Path, args: &[&str]) -> Output {
    cmd(dir, args).output().expect("run lazarus")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and insists on `code`, showing everything the command printed if it differs.
#[track_caller]
fn expect(dir: &Path, args: &[&str], code: i32) -> Output {
    let o = run(dir, args);
    assert_eq!(
        o.status.code(),
        Some(code),
        "lazarus sessions {args:?}\nstdout: {}\nstderr: {}",
        stdout(&o),
        stderr(&o)
    );
    o
}

fn file_of(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.jsonl"))
}

/// Byte offset of the start of each line.
fn line_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut v = vec![0];
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' && i + 1 < bytes.len() {
            v.push(i + 1);
        }
    }
    v
}

/// Every regular file under `root`, recursively (to prove hostile ids create nothing).
fn tree(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn create_send_dedup_verify_torn_tail_corruption_repair_and_usage() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    let dir = dir.as_path();
    let path = file_of(dir, "s");

    // create, send, duplicate send
    let o = expect(dir, &["create", "--id", "s"], 0);
    assert!(stdout(&o).contains("created session s"), "{}", stdout(&o));
    assert!(path.exists());
    let o = expect(dir, &["create", "--id", "s"], 1);
    assert!(
        stderr(&o).contains("already exists"),
        "create twice: {}",
        stderr(&o)
    );

    let o = expect(dir, &["send", "s", "--message-id", "m1", "hello"], 0);
    assert_eq!(stdout(&o), "1\n");
    let o = expect(dir, &["send", "s", "--message-id", "m1", "hello"], 0);
    let out = stdout(&o);
    assert!(out.starts_with("1 ") && out.contains("duplicate"), "{out}");
    let o = expect(
        dir,
        &["send", "s", "--message-id", "m1", "hello", "--json"],
        0,
    );
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["seq"], 1);
    assert_eq!(v["duplicate"], true);
    assert_eq!(v["message_id"], "m1");

    // list, show, verify
    let o = expect(dir, &["list", "--json"], 0);
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{}", stdout(&o));
    assert_eq!(lines[0]["id"], "s");
    assert_eq!(lines[0]["status"], "pending");
    assert_eq!(lines[0]["records"], 1);
    let o = expect(dir, &["show", "s"], 0);
    let out = stdout(&o);
    assert!(out.contains("session s"), "{out}");
    assert!(out.contains("> hello  ["), "{out}");
    assert!(out.contains("status: pending"), "{out}");
    let o = expect(dir, &["show", "s", "--json"], 0);
    let recs: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["kind"], "input");
    assert_eq!(recs[0]["data"]["text"], "hello");
    let o = expect(dir, &["verify", "s"], 0);
    assert!(stdout(&o).contains("ok (1 records"), "{}", stdout(&o));

    // a torn line at the end: verify names it, the next send cuts it
    let clean = std::fs::read(&path).unwrap();
    let garbage = br#"{"seq":2,"ts":"2026-01-01T00:00:00.000Z","kind":"inp"#;
    let mut torn = clean.clone();
    torn.extend_from_slice(garbage);
    std::fs::write(&path, &torn).unwrap();
    let o = expect(dir, &["verify", "s"], 1);
    let out = stdout(&o);
    assert!(
        out.contains(&format!("line 3 (byte offset {})", clean.len())),
        "{out}"
    );
    assert!(out.contains("torn tail"), "{out}");
    let o = expect(dir, &["verify", "s", "--json"], 1);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["clean"], false);
    assert_eq!(v["problems"][0]["line"], 3);
    assert_eq!(v["problems"][0]["offset"], clean.len());
    assert_eq!(v["problems"][0]["recoverable"], true);

    let o = expect(dir, &["send", "s", "--message-id", "m2", "second"], 0);
    assert_eq!(stdout(&o), "2\n");
    let after = std::fs::read(&path).unwrap();
    assert_eq!(&after[..clean.len()], &clean[..], "good prefix kept");
    assert!(!after.windows(garbage.len()).any(|w| w == garbage));
    expect(dir, &["verify", "s"], 0);

    // one flipped byte in the middle line of a 3-record file: refused, nothing written
    let o = expect(dir, &["send", "s", "--message-id", "m3", "third"], 0);
    assert_eq!(stdout(&o), "3\n");
    let good = std::fs::read(&path).unwrap();
    let offs = line_offsets(&good);
    assert_eq!(offs.len(), 4, "header + 3 records");
    let (mid_start, mid_end) = (offs[2], offs[3]);
    let text_at = mid_start
        + good[mid_start..mid_end]
            .windows(6)
            .position(|w| w == b"second")
            .unwrap();
    let mut bad = good.clone();
    bad[text_at + 2] ^= 0x01; // "second" -> "sebond": still valid JSON, wrong checksum
    std::fs::write(&path, &bad).unwrap();

    let o = expect(dir, &["send", "s", "--message-id", "m4", "fourth"], 1);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("line 3 (byte offset {mid_start})")),
        "{err}"
    );
    assert!(err.contains("checksum mismatch"), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bad,
        "a refused open changes nothing"
    );
    let o = expect(dir, &["verify", "s"], 1);
    assert!(
        stdout(&o).contains(&format!("line 3 (byte offset {mid_start})")),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("corruption"), "{}", stdout(&o));
    // show refuses too, rather than skipping the line
    expect(dir, &["show", "s"], 1);

    let o = expect(dir, &["repair", "s"], 0);
    let out = stdout(&o);
    let saved = out
        .trim()
        .rsplit_once("saved to ")
        .map(|(_, p)| PathBuf::from(p))
        .unwrap_or_else(|| panic!("no saved path in {out:?}"));
    assert!(
        saved
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("s.jsonl.cut-"),
        "{saved:?}"
    );
    assert_eq!(saved.parent(), Some(dir));
    assert_eq!(
        std::fs::read(&saved).unwrap(),
        &bad[mid_start..],
        "the saved file holds exactly the removed bytes"
    );
    assert_eq!(std::fs::read(&path).unwrap(), &bad[..mid_start]);
    let o = expect(dir, &["verify", "s"], 0);
    assert!(stdout(&o).contains("ok (1 records"), "{}", stdout(&o));
    let o = expect(dir, &["repair", "s"], 0);
    assert!(stdout(&o).contains("nothing to repair"), "{}", stdout(&o));
    // the repaired session takes appends again, right after the kept record
    let o = expect(dir, &["send", "s", "--message-id", "m2", "second"], 0);
    assert_eq!(stdout(&o), "2\n");
    expect(dir, &["verify", "--all"], 0);

    // usage errors
    let o = expect(dir, &["verify"], 2);
    assert!(stderr(&o).contains("ID, or --all"), "{}", stderr(&o));
    expect(dir, &["verify", "s", "--all"], 2);
    expect(dir, &["send", "s"], 2);
    expect(dir, &["frobnicate"], 2);

    // hostile ids: a clear error, nothing created anywhere
    let before = tree(tmp.path());
    for id in ["../x", "..", "a/b", "/etc/passwd", ".hidden", "-x", ""] {
        for args in [
            vec!["create", "--id", id],
            vec!["send", id, "--message-id", "h", "hi"],
            vec!["show", id],
            vec!["verify", id],
            vec!["repair", id],
            vec!["fork", id, "--at-turn", "0", "--id", "ok"],
            vec!["fork", "s", "--at-turn", "0", "--id", id],
        ] {
            let o = run(dir, &args);
            assert!(
                matches!(o.status.code(), Some(1) | Some(2)),
                "{args:?}: {o:?}"
            );
            assert!(
                stderr(&o).contains("invalid session id")
                    || (o.status.code() == Some(2) && id.starts_with('-')),
                "{args:?}: {}",
                stderr(&o)
            );
        }
    }
    assert_eq!(tree(tmp.path()), before, "hostile ids created nothing");
}

/// Parses a `send` output line into its seq (None if the process printed nothing).
fn acked_seq(out: &str) -> Option<u64> {
    out.lines().next()?.split_whitespace().next()?.parse().ok()
}

/// A small xorshift: random kill moments without a dependency.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[test]
fn sigkilled_sends_never_lose_an_acknowledged_input_and_redelivery_is_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    expect(dir, &["create", "--id", "k"], 0);

    // How long a send takes here, to aim the kills inside it.
    let mut typical = Duration::MAX;
    for n in 1..=3 {
        let t0 = Instant::now();
        let o = expect(
            dir,
            &["send", "k", "--message-id", &format!("warmup{n}"), "warm"],
            0,
        );
        assert_eq!(stdout(&o), format!("{n}\n"));
        typical = typical.min(t0.elapsed());
    }
    let window_us = (typical.as_micros() as u64 * 2).max(1);

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("seed {seed}, typical send {typical:?}");
    let mut rng = Rng(seed);
    let mut acked: HashMap<String, u64> = (1..=3).map(|n| (format!("warmup{n}"), n)).collect();
    let mut sent: Vec<String> = (1..=3).map(|n| format!("warmup{n}")).collect();
    let mut kills = 0;
    let started = Instant::now();
    let mut i = 0;
    while kills < 60 && i < 400 && started.elapsed() < Duration::from_secs(5) {
        i += 1;
        let mid = format!("m{i}");
        let text = format!("message {i} {}", "x".repeat(rng.below(400) as usize));
        let mut child = cmd(dir, &["send", "k", "--message-id", &mid, &text])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        sent.push(mid.clone());
        std::thread::sleep(Duration::from_micros(rng.below(window_us)));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            kills += 1;
        }
        let o = child.wait_with_output().unwrap();
        if o.status.success() {
            let seq = acked_seq(&stdout(&o))
                .unwrap_or_else(|| panic!("exit 0 without a seq: {}", stdout(&o)));
            assert!(!stdout(&o).contains("duplicate"), "{mid}: {}", stdout(&o));
            acked.insert(mid, seq);
        } else if o.status.code().is_some() {
            panic!("send {mid} failed by itself: {}", stderr(&o));
        }
    }
    eprintln!("{i} sends, {kills} SIGKILLed, {} acknowledged", acked.len());
    assert!(kills >= 50, "only {kills} kills in {i} sends");

    // Straight after the kills: verify is clean, or finds only crash debris.
    let o = run(dir, &["verify", "k"]);
    match o.status.code() {
        Some(0) => {}
        Some(1) => assert!(stdout(&o).contains("crash debris"), "{}", stdout(&o)),
        _ => panic!("{o:?}"),
    }

    let records = |dir: &Path| -> Vec<serde_json::Value> {
        let o = expect(dir, &["show", "k", "--json"], 0);
        stdout(&o)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let check = |recs: &[serde_json::Value], acked: &HashMap<String, u64>| {
        let mut count: HashMap<&str, u64> = HashMap::new();
        for (n, r) in recs.iter().enumerate() {
            assert_eq!(r["seq"], n as u64 + 1, "seqs contiguous from 1");
            assert_eq!(r["kind"], "input");
            *count
                .entry(r["data"]["input_id"].as_str().unwrap())
                .or_default() += 1;
        }
        assert!(count.values().all(|&c| c == 1), "an input id twice");
        for (mid, seq) in acked {
            assert_eq!(count.get(mid.as_str()), Some(&1), "acknowledged {mid} lost");
            assert_eq!(
                recs[*seq as usize - 1]["data"]["input_id"],
                *mid,
                "{mid} acknowledged at seq {seq}"
            );
        }
    };
    check(&records(dir), &acked);

    // One more send cuts any debris; the file verifies clean.
    let o = expect(
        dir,
        &["send", "k", "--message-id", "after", "after the storm"],
        0,
    );
    acked.insert("after".into(), acked_seq(&stdout(&o)).unwrap());
    expect(dir, &["verify", "k"], 0);

    // Redelivering a message (as a client that never saw an answer would) records it exactly
    // once: killed-before-durable ones now, the others are answered as duplicates. Every
    // unacknowledged message is redelivered, and every 8th acknowledged one (to stay fast).
    for (n, mid) in sent.iter().enumerate() {
        if acked.contains_key(mid) && n % 8 != 0 {
            continue;
        }
        let o = expect(dir, &["send", "k", "--message-id", mid, "redelivered"], 0);
        let seq = acked_seq(&stdout(&o)).unwrap();
        if let Some(&first) = acked.get(mid) {
            assert_eq!(seq, first, "{mid}");
            assert!(stdout(&o).contains("duplicate"), "{mid}: {}", stdout(&o));
        } else {
            acked.insert(mid.clone(), seq);
        }
    }
    let recs = records(dir);
    check(&recs, &acked);
    assert_eq!(
        recs.len(),
        sent.len() + 1,
        "every message recorded exactly once"
    );
    expect(dir, &["verify", "k"], 0);
}

#[test]
fn a_live_writer_in_another_process_is_named_and_send_goes_to_its_inbox() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    expect(dir, &["create", "--id", "w"], 0);
    let store = LocalStore::open(dir).unwrap();
    let mut held = store.open(&SessionId::literal("w")).unwrap();
    held.append_input("held-1", "test", "from the holder")
        .unwrap();
    let size = std::fs::metadata(file_of(dir, "w")).unwrap().len();

    // The holder is named, the message waits durably in the inbox, the log is untouched.
    let o = expect(dir, &["send", "w", "--message-id", "m", "queued"], 0);
    let said = stdout(&o);
    assert!(
        said.contains(&format!("pid {}", std::process::id())) && said.contains("inbox"),
        "{said}"
    );
    assert_eq!(std::fs::metadata(file_of(dir, "w")).unwrap().len(), size);
    assert_eq!(store.inbox(&SessionId::literal("w"), 10).unwrap().len(), 1);
    // show lists it as waiting; list says running, as show does
    let o = expect(dir, &["show", "w"], 0);
    assert!(
        stdout(&o).contains("1 message(s) waiting in the inbox"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("session w  running"), "{}", stdout(&o));
    expect(dir, &["repair", "w"], 1);
    // Readers need no lock.
    expect(dir, &["verify", "w"], 0);
    let o = expect(dir, &["list", "--json"], 0);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["status"], "running", "{v}");

    // The holder drains it: recorded once.
    let drained = held.drain_inbox().unwrap();
    assert_eq!(drained.len(), 1);
    assert_eq!(drained[0].seq, 2);
    drop(held);
    let o = expect(dir, &["send", "w", "--message-id", "m", "again"], 0);
    assert!(stdout(&o).contains("duplicate"), "{}", stdout(&o));
}

/// Two different texts never share a derived message id: these two collided when ids were a
/// CRC-32C and a length, and the second message was dropped as a duplicate.
#[test]
fn different_texts_are_never_taken_for_duplicates_and_the_same_text_is() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    expect(dir, &["create", "--id", "c1"], 0);
    let a = expect(dir, &["send", "c1", "pay invoice ccaoacux", "--json"], 0);
    let b = expect(dir, &["send", "c1", "pay invoice wcjifoae", "--json"], 0);
    let again = expect(dir, &["send", "c1", "pay invoice wcjifoae", "--json"], 0);
    let parse =
        |o: &Output| -> serde_json::Value { serde_json::from_str(stdout(o).trim()).unwrap() };
    let (a, b, again) = (parse(&a), parse(&b), parse(&again));
    assert_eq!(a["duplicate"], false);
    assert_eq!(
        b["duplicate"], false,
        "a different text is a new message: {b}"
    );
    assert_ne!(a["message_id"], b["message_id"]);
    assert!(b["message_id"].as_str().unwrap().starts_with("sha256-"));
    assert_eq!(
        again["duplicate"], true,
        "the same text again is the same message"
    );
    assert_eq!(again["seq"], b["seq"]);
    let store = LocalStore::open(dir).unwrap();
    let inputs = store
        .records(&SessionId::literal("c1"), 0, usize::MAX)
        .unwrap()
        .into_iter()
        .filter(|r| r.kind == "input")
        .count();
    assert_eq!(inputs, 2);
}

/// `sessions export -o` writes the exact JSONL atomically, owner-only; `import` takes it
/// back as a new session; a failed export leaves the old file as it was.
#[test]
fn export_is_exact_private_and_atomic() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a");
    let other = tmp.path().join("b");
    expect(&dir, &["create", "--id", "e1"], 0);
    expect(&dir, &["send", "e1", "hello"], 0);
    let out = tmp.path().join("e1.export.jsonl");
    expect(&dir, &["export", "e1", "-o", out.to_str().unwrap()], 0);
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(file_of(&dir, "e1")).unwrap()
    );
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "exported sessions hold user text: owner only");
    // a failed export (no such session) leaves the existing file untouched
    let before = std::fs::read(&out).unwrap();
    expect(&dir, &["export", "nope", "-o", out.to_str().unwrap()], 1);
    assert_eq!(std::fs::read(&out).unwrap(), before);
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("lazarus-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    expect(&other, &["import", out.to_str().unwrap()], 0);
    assert_eq!(
        std::fs::read(file_of(&other, "e1")).unwrap(),
        before,
        "import takes it back byte for byte"
    );
}

/// A send to a session whose inbox is full is refused with exit code 75 (try again later),
/// adds nothing, and works again once the writer recorded what waits; a send to a session a
/// live writer holds says who holds it, since when, and that it is alive.
#[test]
fn a_full_inbox_is_exit_75_and_a_queued_message_names_a_live_holder() {
    use lazarus_session::InboxMessage;
    use lazarus_session::inbox::INBOX_BYTES_MAX;
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    expect(dir, &["create", "--id", "s"], 0);
    let store = LocalStore::open(dir).unwrap();
    let id = SessionId::literal("s");
    let held = store.open(&id).unwrap();
    let o = expect(
        dir,
        &["send", "s", "--json", "--message-id", "q", "queued"],
        0,
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["queued"], true, "{v}");
    assert_eq!(v["holder"]["pid"], std::process::id(), "{v}");
    assert_eq!(v["holder"]["alive"], "alive", "{v}");
    assert!(v["holder"]["since"].is_string(), "{v}");
    // fill its inbox to the byte limit, with smaller and smaller messages
    let mut size = usize::try_from(INBOX_BYTES_MAX / 8).unwrap();
    let mut i = 0;
    while size >= 16 {
        let filler = "x".repeat(size);
        match store.deliver(&id, &InboxMessage::input(&format!("b{i}"), "user", &filler)) {
            Ok(_) => i += 1,
            Err(_) => size /= 2,
        }
    }
    let waiting = store.waiting(&id).unwrap().messages;
    let late = "one too many ".repeat(20);
    let o = expect(dir, &["send", "s", "--message-id", "late", &late], 75);
    assert!(stderr(&o).contains("retry"), "{}", stderr(&o));
    assert_eq!(
        store.waiting(&id).unwrap().messages,
        waiting,
        "nothing added"
    );
    drop(held);
    // nobody holds it now: this send records everything that waits first, then its own
    let o = expect(
        dir,
        &["send", "s", "--json", "--message-id", "late", &late],
        0,
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["recorded_before"], waiting, "{v}");
    assert_eq!(v["seq"], waiting + 1, "{v}");
    assert_eq!(store.waiting(&id).unwrap().messages, 0);
}

/// The line a store would write after `prev` (a whole ledger line) for `kind`/`data`:
/// framed with the next seq and a valid CRC — records that pass the ledger's checks and that
/// an open for writing still refuses.
fn framed_after(bytes: &[u8], kind: &str, data: &str) -> Vec<u8> {
    let seq = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    let mut line = Vec::new();
    lazarus_ledger::frame::encode_line(
        &mut line,
        seq,
        "2026-12-04T10:00:00.000Z",
        kind,
        data.as_bytes(),
    );
    line
}

/// `verify` applies the checks of an open for writing: a CRC-valid record with an unknown
/// field, or a tool outcome without its intent, is named (file, line, offset) and exits 1;
/// `repair` cuts it away (saving it beside the file); then `lazarus run` can open the session.
#[test]
fn verify_names_what_an_open_refuses_and_repair_cuts_it() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    for (id, kind, data) in [
        (
            "unknown-field",
            "input",
            r#"{"input_id":"x","source":"user","text":"hi","mood":"sunny"}"#,
        ),
        (
            "orphan-outcome",
            "tool_outcome",
            r#"{"call_id":"nope","status":"ok","result":"done"}"#,
        ),
    ] {
        expect(dir, &["create", "--id", id], 0);
        expect(dir, &["send", id, "--message-id", "m1", "hello"], 0);
        let path = file_of(dir, id);
        let mut bytes = std::fs::read(&path).unwrap();
        let offset = bytes.len();
        let line = framed_after(&bytes, kind, data);
        bytes.extend_from_slice(&line);
        std::fs::write(&path, &bytes).unwrap();
        let o = expect(dir, &["verify", id], 1);
        let out = stdout(&o);
        assert!(
            out.contains("line 3") && out.contains(&format!("byte offset {offset}")),
            "{id}: {out}"
        );
        assert!(
            out.contains("unknown field `mood`") || out.contains("an open for writing refuses it"),
            "{id}: {out}"
        );
        // show names it too
        let o = run(dir, &["show", id]);
        assert_eq!(o.status.code(), Some(1), "{id}: {}", stdout(&o));
        let o = expect(dir, &["repair", id], 0);
        assert!(stdout(&o).contains("removed"), "{id}: {}", stdout(&o));
        expect(dir, &["verify", id], 0);
        // the session opens for writing again
        expect(dir, &["send", id, "--message-id", "m2", "again"], 0);
    }
}

/// One status rule: a fork at turn 0 of a session with an unanswered message owes that
/// message. `list` and `tree` say so, `rm` refuses it, `prune` keeps it (they disagreed:
/// the tail rule called it idle, and prune deleted it).
#[test]
fn a_fork_that_owes_work_is_pending_everywhere_and_never_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    expect(dir, &["create", "--id", "a1"], 0);
    expect(dir, &["send", "a1", "hello there"], 0);
    expect(dir, &["fork", "a1", "--at-turn", "0", "--id", "a2"], 0);
    let listed = stdout(&expect(dir, &["list", "--json"], 0));
    let a2: serde_json::Value = listed
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["id"] == "a2")
        .unwrap();
    assert_eq!(a2["status"], "pending", "{a2}");
    let tree = stdout(&expect(dir, &["tree"], 0));
    assert!(tree.contains("a2 (pending"), "{tree}");
    let o = expect(dir, &["rm", "a2"], 1);
    assert!(stderr(&o).contains("owes work"), "{}", stderr(&o));
    expect(dir, &["prune", "--older-than", "0s"], 0);
    assert!(
        file_of(dir, "a2").exists(),
        "prune kept the session that owes work"
    );
    let show = stdout(&expect(dir, &["show", "a2"], 0));
    assert!(show.contains("status: pending"), "{show}");
}

/// A record of a kind this build does not know was written by a newer program (a newer
/// Lazarus, the Python package): `verify` says to upgrade, never to repair, and `repair`
/// refuses to cut it (it would lose what the newer program wrote), changing nothing.
#[test]
fn a_newer_record_kind_says_upgrade_and_repair_refuses_to_cut_it() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    expect(dir, &["create", "--id", "newer"], 0);
    expect(dir, &["send", "newer", "--message-id", "m1", "hello"], 0);
    let path = file_of(dir, "newer");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&framed_after(&bytes, "teleport", r#"{"to":"mars"}"#));
    std::fs::write(&path, &bytes).unwrap();

    let out = stdout(&expect(dir, &["verify", "newer"], 1));
    assert!(
        out.contains("line 3") && out.contains("unknown record kind \"teleport\""),
        "{out}"
    );
    assert!(out.contains("upgrade `lazarus`"), "{out}");
    assert!(!out.contains("corruption"), "{out}");

    let o = run(dir, &["repair", "newer"]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("upgrade `lazarus`"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "repair changed the file"
    );

    // an open for writing names it the same way
    let o = run(dir, &["send", "newer", "--message-id", "m2", "again"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("upgrade `lazarus`"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}
