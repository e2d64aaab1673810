//! `sessions import` against bad input: a torn source imports up to its last whole record and
//! says so; an unknown format version is refused, naming it; NUL debris and invalid UTF-8 are
//! read through and reported, as the scan reads them; hostile files (a huge line, deep JSON,
//! noise) get a clear error and write nothing; a FIFO
//! and a device are refused at once (before any open could block or run forever); memory
//! stays bounded by the line limit, not by the file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn capture(agent: &str, name: &str) -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../boot-resume/tests/fixtures/real")
        .join(agent)
        .join(name)
        .join("home");
    loop {
        let next: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| !p.ends_with("subagents"))
            .collect();
        if let Some(f) = next
            .iter()
            .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        {
            return f.clone();
        }
        dir = next
            .into_iter()
            .find(|p| p.is_dir())
            .expect("a transcript below");
    }
}

/// Runs an import with a deadline; returns its output and the child's peak RSS in KiB.
fn import(dir: &Path, from: &str, source: &Path) -> (Output, u64) {
    // reaped below by wait4 (for its rusage), not by Child::wait
    #[allow(clippy::zombie_processes)]
    let mut child = Command::new(BIN)
        .args(["sessions", "import", "--from", from, "--session-dir"])
        .arg(dir)
        .arg(source)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut status = 0;
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 on our own child, with valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            let mut out = Vec::new();
            let mut err = Vec::new();
            use std::io::Read;
            child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
            child.stderr.take().unwrap().read_to_end(&mut err).unwrap();
            use std::os::unix::process::ExitStatusExt;
            let o = Output {
                status: std::process::ExitStatus::from_raw(status),
                stdout: out,
                stderr: err,
            };
            return (o, usage.ru_maxrss as u64);
        }
        assert!(
            Instant::now() < deadline,
            "import of {} did not end within 20 s",
            source.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn refused(dir: &Path, from: &str, source: &Path, needle: &str) -> u64 {
    let (o, rss) = import(dir, from, source);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}: {err}", source.display());
    assert!(
        err.contains(needle),
        "{}: expected {needle:?} in: {err}",
        source.display()
    );
    let left: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !left.iter().any(|n| n.to_string_lossy().ends_with(".jsonl")),
        "a refused import wrote {left:?}"
    );
    rss
}

#[test]
fn a_torn_source_imports_up_to_its_last_whole_record_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    for (agent, name, from) in [
        ("claude", "finished", "claude-code"),
        ("codex", "finished", "codex"),
        ("pi", "finished", "pi"),
    ] {
        let bytes = std::fs::read(capture(agent, name)).unwrap();
        // cut the last line in its middle: a write that was cut short
        let last_nl = bytes[..bytes.len() - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .unwrap();
        let cut = last_nl + 1 + (bytes.len() - last_nl) / 2;
        let src = tmp.path().join(format!("{agent}-torn.jsonl"));
        std::fs::write(&src, &bytes[..cut]).unwrap();
        let (o, _) = import(&dir, from, &src);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{agent}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            out.contains(&format!("byte {} on) was torn", last_nl + 1)),
            "{agent}: {out}"
        );
        assert!(out.contains("torn last line"), "{agent}: {out}");
    }
}

#[test]
fn an_unknown_format_version_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    for (agent, from, old, new) in [
        (
            "claude",
            "claude-code",
            "\"version\":\"2.1.332\"",
            "\"version\":\"3.0.0\"",
        ),
        (
            "codex",
            "codex",
            "\"cli_version\":\"0.171.0\"",
            "\"cli_version\":\"1.0.0\"",
        ),
        ("pi", "pi", "\"version\":3", "\"version\":7"),
    ] {
        let text = std::fs::read_to_string(capture(agent, "finished")).unwrap();
        assert!(text.contains(old), "{agent}: the capture holds {old}");
        let src = tmp.path().join(format!("{agent}-future.jsonl"));
        std::fs::write(&src, text.replace(old, new)).unwrap();
        let version = new.rsplit(':').next().unwrap().trim_matches('"');
        refused(
            &dir,
            from,
            &src,
            &format!("version \"{version}\" is not one this build reads"),
        );
    }
}

#[test]
fn hostile_files_are_refused_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    let write = |name: &str, bytes: &[u8]| {
        let p = tmp.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let header = std::fs::read_to_string(capture("codex", "finished")).unwrap();
    let first = header.lines().next().unwrap().to_string();
    let deep = format!("{first}\n{}{}\n", "[".repeat(100), "]".repeat(100));
    refused(
        &dir,
        "codex",
        &write("deep.jsonl", deep.as_bytes()),
        "deeper than 64 levels",
    );
    // a line over the limit: refused as soon as the limit is passed, memory bounded by it
    // written in pieces: the child's peak RSS counts from the fork, so this process stays small
    let huge_file = write("huge.jsonl", format!("{first}\n").as_bytes());
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&huge_file)
            .unwrap();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..200 {
            f.write_all(&chunk).unwrap();
        }
    }
    let rss = refused(
        &dir,
        "codex",
        &huge_file,
        "longer than the 16777216-byte line limit",
    );
    assert!(rss < 80 * 1024, "a 200 MiB line took {rss} KiB of memory");
    // --from auto on garbage names what it looked at
    refused(
        &dir,
        "auto",
        &write("noise.jsonl", b"hello\nworld\n"),
        "not a session log",
    );
}

/// NUL bytes and invalid UTF-8 are damage, not a binary file: the source is read by the rule
/// the scan reads it by (NUL debris cut, the records around it read; an invalid sequence
/// replaced, its record kept), imported, and the damage named in the report.
#[test]
fn nul_debris_and_invalid_bytes_are_read_through_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    let bytes = std::fs::read(capture("codex", "finished")).unwrap();
    // zeros after the first record (the next ones appended after them), a tail of zeros, and
    // one invalid byte inside a record's text
    let first_end = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut damaged = bytes[..first_end].to_vec();
    damaged.extend_from_slice(&[0u8; 4096]);
    damaged.extend_from_slice(&bytes[first_end..]);
    damaged.extend_from_slice(&[0u8; 8192]);
    let at = damaged.len() / 2;
    let at = at
        + damaged[at..]
            .windows(3)
            .position(|w| w.iter().all(u8::is_ascii_lowercase))
            .unwrap()
        + 1;
    damaged[at] = 0xff;
    let src = tmp.path().join("damaged.jsonl");
    std::fs::write(&src, &damaged).unwrap();
    let (o, _) = import(&dir, "codex", &src);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}");
    assert!(out.contains("12288 × NUL bytes (crash debris)"), "{out}");
    assert!(out.contains("1 × invalid UTF-8 sequence"), "{out}");
    // the same counts as the clean file's import
    let clean_dir = tmp.path().join("clean");
    let (c, _) = import(&clean_dir, "codex", &capture("codex", "finished"));
    let counts = |s: &str| {
        s.lines()
            .find(|l| l.contains("user messages,"))
            .map(str::to_string)
            .unwrap()
    };
    assert_eq!(counts(&out), counts(&String::from_utf8_lossy(&c.stdout)));
}

#[test]
fn fifos_and_devices_are_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    let fifo = tmp.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; creates a FIFO in our temporary directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for from in ["claude-code", "codex", "pi", "auto", "lazarus"] {
        let t = Instant::now();
        refused(&dir, from, &fifo, "not a regular file (a FIFO)");
        refused(
            &dir,
            from,
            Path::new("/dev/zero"),
            "not a regular file (a character device)",
        );
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{from}: took {:?}",
            t.elapsed()
        );
    }
}
