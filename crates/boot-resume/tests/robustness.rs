//! Hostile files: empty, header-only, garbage, directories, FIFOs, symlink loops, missing
//! files named by sessions.json, a last record larger than the first window, torn tails.
use lazarus_boot_resume::discover::{self, Source, SourceFormat};
use lazarus_boot_resume::scan::{self, ScanOptions};
use lazarus_boot_resume::tail::{TailOptions, classify_file};
use lazarus_boot_resume::{Format, SkipWhy, Verdict};
use std::io::Write;
use std::path::{Path, PathBuf};

fn opts() -> ScanOptions {
    ScanOptions {
        window: None,
        ..Default::default()
    }
}

fn scan_dir(dir: &Path, f: SourceFormat) -> Vec<scan::Report> {
    let (c, problems) = discover::candidates(
        &[Source {
            format: f,
            path: dir.to_path_buf(),
        }],
        true,
    );
    assert!(problems.is_empty(), "{problems:?}");
    scan::scan(&c, &opts(), None)
}

fn by_name<'a>(rs: &'a [scan::Report], name: &str) -> &'a scan::Report {
    rs.iter()
        .find(|r| r.path.ends_with(name))
        .unwrap_or_else(|| {
            panic!(
                "no report for {name}: {:?}",
                rs.iter().map(|r| &r.path).collect::<Vec<_>>()
            )
        })
}

#[test]
fn hostile_files_get_a_verdict_or_a_clear_error() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path();
    std::fs::write(p.join("empty.jsonl"), b"").expect("write");
    std::fs::write(
        p.join("garbage.jsonl"),
        [0u8, 159, 146, 150, 255, b'\n', 1, 2, 3].repeat(5000),
    )
    .expect("write");
    std::fs::create_dir(p.join("dir.jsonl")).expect("mkdir");
    std::os::unix::fs::symlink(p.join("loop-b.jsonl"), p.join("loop-a.jsonl")).expect("symlink");
    std::os::unix::fs::symlink(p.join("loop-a.jsonl"), p.join("loop-b.jsonl")).expect("symlink");
    std::os::unix::fs::symlink(p.join("nowhere.jsonl"), p.join("dangling.jsonl")).expect("symlink");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        p.join("fifo.jsonl"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    std::fs::write(
        p.join("header-only.jsonl"),
        b"{\"type\":\"session\",\"version\":3,\"id\":\"h1\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"cwd\":\"/tmp\"}\n",
    )
    .expect("write");
    let rs = scan_dir(p, SourceFormat::Auto);
    // dir.jsonl is a directory: walked into (it is empty), not reported.
    assert_eq!(rs.len(), 7, "{rs:#?}");
    let r = by_name(&rs, "empty.jsonl");
    assert_eq!(r.verdict, Verdict::Skipped(SkipWhy::Empty), "{r:?}");
    let r = by_name(&rs, "garbage.jsonl");
    assert_eq!(r.verdict, Verdict::Skipped(SkipWhy::Unreadable), "{r:?}");
    assert!(r.reason.contains("no known session format"), "{}", r.reason);
    for n in ["loop-a.jsonl", "loop-b.jsonl", "dangling.jsonl"] {
        let r = by_name(&rs, n);
        assert_eq!(r.verdict, Verdict::Skipped(SkipWhy::Unreadable), "{r:?}");
        assert!(r.reason.contains(n), "reason names the file: {}", r.reason);
    }
    let r = by_name(&rs, "fifo.jsonl");
    assert_eq!(r.verdict, Verdict::Skipped(SkipWhy::Unreadable), "{r:?}");
    assert!(r.reason.contains("not a regular file"), "{}", r.reason);
    let r = by_name(&rs, "header-only.jsonl");
    assert_eq!(r.verdict, Verdict::Skipped(SkipWhy::Empty), "{r:?}");
}

#[test]
fn garbage_with_a_known_format_is_unreadable_not_a_crash() {
    let d = tempfile::tempdir().expect("tempdir");
    let f = d.path().join("g.jsonl");
    std::fs::write(&f, b"\xff\xfe{not json}\n\x00\x01\n{\"type\":\n").expect("write");
    let mut buf = Vec::new();
    for fmt in Format::ALL {
        let r =
            classify_file(&f, Some(fmt), None, TailOptions::default(), &mut buf).expect("classify");
        assert!(
            matches!(
                r.classification.verdict,
                Verdict::Skipped(SkipWhy::Empty | SkipWhy::Unreadable)
            ),
            "{fmt:?}: {:?}",
            r.classification
        );
    }
}

#[test]
fn sessions_json_pointing_at_missing_files_is_reported() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = d.path().join("agents/main/sessions");
    std::fs::create_dir_all(&s).expect("mkdir");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/openclaw/interrupted-tool-call.jsonl"
        ),
        s.join("0b9d6a2c.jsonl"),
    )
    .expect("copy");
    std::fs::write(
        s.join("sessions.json"),
        r#"{"agent:main:main":{"sessionId":"0b9d6a2c","updatedAt":1,"status":"running"},
            "agent:main:telegram:direct:42":{"sessionId":"gone","sessionFile":"gone.jsonl"},
            "agent:main:subagent:3f2b":{"sessionId":"0b9d6a2c","spawnDepth":1},
            "agent:main:cron:nightly":{"sessionId":"0b9d6a2c"},
            "agent:main:dashboard:77":{"sessionId":"0b9d6a2c","restartRecoveryRuns":1}}"#,
    )
    .expect("write");
    let mut o = opts();
    o.skip_pattern = None;
    let (c, _) = discover::candidates(
        &[Source {
            format: SourceFormat::Known(Format::Openclaw),
            path: d.path().to_path_buf(),
        }],
        true,
    );
    let rs = scan::scan(&c, &o, None);
    assert_eq!(rs.len(), 5);
    let get = |k: &str| {
        rs.iter()
            .find(|r| r.session_key.as_deref() == Some(k))
            .unwrap_or_else(|| panic!("{k}"))
    };
    assert_eq!(get("agent:main:main").verdict, Verdict::InterruptedToolCall);
    let gone = get("agent:main:telegram:direct:42");
    assert_eq!(gone.verdict, Verdict::Skipped(SkipWhy::Unreadable));
    assert!(gone.reason.contains("missing file"), "{}", gone.reason);
    assert_eq!(
        get("agent:main:subagent:3f2b").verdict,
        Verdict::Skipped(SkipWhy::Subagent)
    );
    assert_eq!(
        get("agent:main:cron:nightly").verdict,
        Verdict::Skipped(SkipWhy::Cron)
    );
    assert_eq!(
        get("agent:main:dashboard:77").verdict,
        Verdict::Skipped(SkipWhy::SelfRecovering)
    );
}

/// Writes a pi session whose last record is `big` bytes of text.
fn big_last_record(path: &Path, filler_lines: usize, big: usize) {
    let mut f = std::fs::File::create(path).expect("create");
    writeln!(f, r#"{{"type":"session","version":3,"id":"big-1","timestamp":"2026-01-01T00:00:00Z","cwd":"/tmp"}}"#).expect("w");
    let mut parent = "null".to_string();
    for i in 0..filler_lines {
        let id = format!("{i:08x}");
        writeln!(
            f,
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"t","message":{{"role":"user","content":"filler {i} {}"}}}}"#,
            "x".repeat(300)
        )
        .expect("w");
        parent = format!("\"{id}\"");
    }
    let text = "y".repeat(big);
    writeln!(
        f,
        r#"{{"type":"message","id":"ffffffff","parentId":{parent},"timestamp":"t","message":{{"role":"assistant","content":[{{"type":"text","text":"{text}"}},{{"type":"toolCall","id":"c1","name":"bash","arguments":{{}}}}],"stopReason":"toolUse"}}}}"#
    )
    .expect("w");
}

#[test]
fn last_record_larger_than_first_window_grows_the_window_but_not_to_the_whole_file() {
    let d = tempfile::tempdir().expect("tempdir");
    let f = d.path().join("big.jsonl");
    big_last_record(&f, 20_000, 100_000);
    let size = std::fs::metadata(&f).expect("md").len();
    let mut buf = Vec::new();
    let r = classify_file(&f, Some(Format::Pi), None, TailOptions::default(), &mut buf)
        .expect("classify");
    assert_eq!(
        r.classification.verdict,
        Verdict::InterruptedToolCall,
        "{:?}",
        r.classification
    );
    assert!(
        r.window > 100_000 && r.window <= 256 * 1024,
        "window {} for a 100 KB record",
        r.window
    );
    assert!(
        size > 5_000_000 && r.window < size / 10,
        "read {} of {size} bytes",
        r.window
    );
    assert_eq!(
        r.classification.session_id.as_deref(),
        Some("big-1"),
        "header read separately"
    );
}

#[test]
fn a_record_beyond_the_cap_is_reported_not_guessed() {
    let d = tempfile::tempdir().expect("tempdir");
    let f = d.path().join("huge.jsonl");
    big_last_record(&f, 10, 300_000);
    let mut buf = Vec::new();
    let r = classify_file(
        &f,
        Some(Format::Pi),
        None,
        TailOptions {
            first_window: 1024,
            max_window: 64 * 1024,
            whole_file_max: 0,
        },
        &mut buf,
    )
    .expect("classify");
    assert_eq!(r.window, 64 * 1024);
    assert_eq!(
        r.classification.verdict,
        Verdict::Skipped(SkipWhy::Unreadable),
        "{:?}",
        r.classification
    );
}

#[test]
fn torn_tail_of_every_format_sets_torn() {
    let mut buf = Vec::new();
    for (fmt, name) in [
        (Format::Openclaw, "openclaw/torn-last-line"),
        (Format::Pi, "pi/torn-last-line"),
        (Format::ClaudeCode, "claude-code/torn-last-line"),
        (Format::Codex, "codex/torn-last-line"),
        (Format::Lazarus, "lazarus/torn-last-line"),
    ] {
        let p = format!("{}/tests/fixtures/{name}.jsonl", env!("CARGO_MANIFEST_DIR"));
        let r = classify_file(
            Path::new(&p),
            Some(fmt),
            None,
            TailOptions::default(),
            &mut buf,
        )
        .expect("classify");
        assert!(r.classification.torn, "{name}");
        assert!(
            r.classification.reason.contains("torn"),
            "{name}: {}",
            r.classification.reason
        );
    }
}

#[test]
fn window_filter_skips_old_files_without_reading_them() {
    let d = tempfile::tempdir().expect("tempdir");
    let f = d.path().join("old.jsonl");
    std::fs::write(&f, b"not even json\n").expect("write");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&f)
        .expect("open")
        .set_modified(old)
        .expect("mtime");
    let (c, _) = discover::candidates(
        &[Source {
            format: SourceFormat::Auto,
            path: f.clone(),
        }],
        true,
    );
    let o = ScanOptions {
        window: Some(std::time::Duration::from_secs(1200)),
        ..Default::default()
    };
    let rs = scan::scan(&c, &o, None);
    assert_eq!(
        rs[0].verdict,
        Verdict::Skipped(SkipWhy::OutsideWindow),
        "{:?}",
        rs[0]
    );
}

#[test]
fn lazarus_session_held_by_a_live_writer_is_skipped() {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/lazarus/interrupted-tool-call.jsonl"
        ),
        d.path().join("s1.jsonl"),
    )
    .expect("copy");
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let lock = format!(
        r#"{{"pid":{},"host":"{host}","since":"2026-01-01T00:00:00Z"}}"#,
        std::process::id()
    );
    std::fs::write(d.path().join("s1.lock"), lock).expect("write");
    let rs = scan_dir(d.path(), SourceFormat::Known(Format::Lazarus));
    assert_eq!(
        rs[0].verdict,
        Verdict::Skipped(SkipWhy::Running),
        "{:?}",
        rs[0]
    );
    // A dead holder (pid far beyond pid_max) does not block.
    std::fs::write(
        d.path().join("s1.lock"),
        format!(r#"{{"pid":2147483000,"host":"{host}"}}"#),
    )
    .expect("write");
    let rs = scan_dir(d.path(), SourceFormat::Known(Format::Lazarus));
    assert_eq!(rs[0].verdict, Verdict::InterruptedToolCall, "{:?}", rs[0]);
}

/// OpenClaw 2026.9's agent database (schema v23, the tables and columns the real program
/// creates; see tests/fixtures/real/openclaw for databases it wrote): events are read by
/// `seq`, a gateway run (`status` running) is left to OpenClaw's own restart recovery, an
/// embedded run (no status) is resumed.
#[test]
fn openclaw_sqlite_store_is_read_by_seq_and_gateway_runs_are_left_to_openclaw() {
    let d = tempfile::tempdir().expect("tempdir");
    let db = d.path().join("agents/main/agent");
    std::fs::create_dir_all(&db).expect("mkdir");
    let db = db.join("openclaw-agent.sqlite");
    let c = rusqlite::Connection::open(&db).expect("open");
    c.execute_batch(
        "CREATE TABLE transcript_events(session_id TEXT, seq INTEGER, event_json TEXT, created_at INTEGER, event_zstd BLOB, event_utf8_bytes INTEGER, navigation_json TEXT);
         CREATE TABLE session_nodes(session_key TEXT, current_session_id TEXT, entry_json TEXT, status TEXT, spawned_by TEXT, parent_session_key TEXT);
         CREATE TABLE session_windows(session_id TEXT, session_key TEXT, status TEXT, acp_owned INTEGER, plugin_owner_id TEXT, spawned_by TEXT, parent_session_key TEXT);
         INSERT INTO session_nodes VALUES ('agent:main:main','s-1','{\"sessionId\":\"s-1\",\"status\":\"running\",\"createdVia\":\"run\"}','running',NULL,NULL);
         INSERT INTO session_nodes VALUES ('agent:main:embedded','s-3','{\"sessionId\":\"s-3\"}',NULL,NULL,NULL);
         INSERT INTO session_windows VALUES ('s-2','agent:main:old',NULL,0,NULL,NULL,NULL);",
    )
    .expect("schema");
    let fx = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/openclaw/interrupted-tool-call.jsonl"
    ))
    .expect("fixture");
    // Insert out of order: the reader must order by seq.
    let lines: Vec<&str> = fx.lines().collect();
    for sid in ["s-1", "s-3"] {
        for (i, l) in lines.iter().enumerate().rev() {
            c.execute(
                "INSERT INTO transcript_events(session_id, seq, event_json, created_at) VALUES (?1, ?2, ?3, 1781773648000)",
                rusqlite::params![sid, i as i64, l],
            )
            .expect("insert");
        }
    }
    let fin = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/openclaw/finished.jsonl"
    ))
    .expect("fx");
    for (i, l) in fin.lines().enumerate() {
        c.execute(
            "INSERT INTO transcript_events(session_id, seq, event_json, created_at) VALUES ('s-2', ?1, ?2, 1781773648000)",
            rusqlite::params![i as i64, l],
        )
        .expect("insert");
    }
    drop(c);
    let rs = scan_dir(d.path(), SourceFormat::Known(Format::Openclaw));
    assert_eq!(rs.len(), 3);
    let get = |k: &str| {
        rs.iter()
            .find(|r| r.session_key.as_deref() == Some(k))
            .unwrap_or_else(|| panic!("{k}: {rs:#?}"))
    };
    let s1 = get("agent:main:main");
    assert_eq!(
        s1.verdict,
        Verdict::Skipped(SkipWhy::SelfRecovering),
        "{s1:?}"
    );
    assert!(s1.reason.contains("interrupted_tool_call"), "{}", s1.reason);
    assert_eq!(get("agent:main:old").verdict, Verdict::Finished);
    let s3 = get("agent:main:embedded");
    assert_eq!(s3.verdict, Verdict::InterruptedToolCall, "{s3:?}");
}

/// Codex may keep rollouts zstd-compressed (`rollout-*.jsonl.zst`): they are found by the
/// walk, decompressed and classified like the plain file; a compressed bomb is refused.
#[test]
fn compressed_codex_rollouts_are_read() {
    let d = tempfile::tempdir().expect("tempdir");
    let plain = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/codex/interrupted-tool-call.jsonl"
    ))
    .expect("fixture");
    let z = zstd::stream::encode_all(&plain[..], 3).expect("compress");
    std::fs::write(
        d.path()
            .join("rollout-2026-10-05T13-02-11-019a5c31-0a7e-7f15-b2c8-4d6e9f1a3b57.jsonl.zst"),
        z,
    )
    .expect("write");
    let rs = scan_dir(d.path(), SourceFormat::Known(Format::Codex));
    assert_eq!(rs.len(), 1, "{rs:?}");
    assert_eq!(rs[0].verdict, Verdict::InterruptedToolCall, "{:?}", rs[0]);
    assert_eq!(rs[0].session, "019a5c31-0a7e-7f15-b2c8-4d6e9f1a3b57");
    let rs = scan_dir(d.path(), SourceFormat::Auto);
    assert_eq!(
        rs[0].verdict,
        Verdict::InterruptedToolCall,
        "auto: {:?}",
        rs[0]
    );
    // Garbage named .zst is unreadable, not a panic.
    std::fs::write(d.path().join("rollout-x.jsonl.zst"), b"not zstd").expect("write");
    let rs = scan_dir(d.path(), SourceFormat::Known(Format::Codex));
    assert!(
        rs.iter()
            .any(|r| r.verdict == Verdict::Skipped(SkipWhy::Unreadable)),
        "{rs:?}"
    );
}

/// The fixture `fmt/name` with a `hole_len` gap after its first line, as a sparse file (a
/// hole: never written) and as a dense twin (the same bytes, zeros written out).
fn holed_twins(dir: &Path, fmt: &str, name: &str, hole_len: u64) -> (PathBuf, PathBuf) {
    use std::io::{Seek, SeekFrom};
    let fx = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(fmt)
            .join(name),
    )
    .expect("fixture");
    let cut = fx
        .iter()
        .position(|b| *b == b'\n')
        .map_or(fx.len(), |i| i + 1);
    let (head, rest) = fx.split_at(cut);
    let sparse = dir.join(format!("sparse-{name}"));
    let dense = dir.join(format!("dense-{name}"));
    let mut f = std::fs::File::create(&sparse).expect("create");
    f.write_all(head).expect("w");
    f.seek(SeekFrom::Current(hole_len as i64)).expect("seek");
    f.write_all(b"\n").expect("w");
    f.write_all(rest).expect("w");
    let mut g = std::fs::File::create(&dense).expect("create");
    g.write_all(head).expect("w");
    g.write_all(&vec![0u8; hole_len as usize]).expect("w");
    g.write_all(b"\n").expect("w");
    g.write_all(rest).expect("w");
    (sparse, dense)
}

/// A window that grows through a hole never reads it (it is collapsed to one NUL, which
/// leaves every line as unparsable as the zeros did), and judges exactly as reading the
/// zeros would: every fixture of every format, sparse against its dense twin.
#[test]
fn a_window_grown_through_a_hole_skips_it_and_judges_as_the_zeros_would() {
    let d = tempfile::tempdir().expect("tempdir");
    let hole = 3u64 << 20;
    let mut checked = 0;
    for fmt in ["lazarus", "pi", "openclaw", "claude-code", "codex"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(fmt);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            let (sparse, dense) = holed_twins(d.path(), fmt, &name, hole);
            // The filesystem must keep the hole, or this test proves nothing.
            let f = std::fs::File::open(&sparse).expect("open");
            let data = rustix::fs::seek(&f, rustix::fs::SeekFrom::Data(4096)).expect(
                "SEEK_DATA: run the tests on a filesystem with sparse files (ext4, xfs, tmpfs, btrfs)",
            );
            assert!(
                data >= hole,
                "{}: the filesystem filled the hole (data at {data}): run the tests on a filesystem with sparse files",
                sparse.display()
            );
            let opts = TailOptions {
                first_window: 512,
                max_window: 8 << 20,
                whole_file_max: 0,
            };
            let f = Some(Format::parse(fmt).expect("format"));
            let mut sb = Vec::new();
            let mut db = Vec::new();
            let s = classify_file(&sparse, f, None, opts, &mut sb).expect("sparse");
            let z = classify_file(&dense, f, None, opts, &mut db).expect("dense");
            assert_eq!(
                (
                    s.classification.verdict,
                    s.classification.torn,
                    &s.classification.session_id
                ),
                (
                    z.classification.verdict,
                    z.classification.torn,
                    &z.classification.session_id
                ),
                "{fmt}/{name}: sparse {:?} vs dense {:?}",
                s.classification,
                z.classification
            );
            assert_eq!(s.window, z.window, "{fmt}/{name}");
            if z.window > hole {
                // grown through the hole: the dense twin held it all, the sparse one one NUL
                assert!(db.len() as u64 > hole, "{fmt}/{name}");
                assert!(sb.len() < 1 << 20, "{fmt}/{name}: {} bytes held", sb.len());
                checked += 1;
            }
        }
    }
    // the header-only sessions of pi and Lazarus: their deciding record is the first line
    assert!(
        checked >= 2,
        "only {checked} fixtures grew through the hole"
    );
}
