//! A damaged-file corpus derived from the real captures, the way users report damage (a BOM
//! from an editor, CRLF line ends, NULs after a power cut, a torn write, a file of zeros, an
//! empty file, symbolic links, FIFOs, and for the SQLite stores a corrupt, a locked, a
//! WAL-torn and a foreign database, links to a database and to a FIFO): scanned *beside* the
//! good captures, as `lazarus boot-resume` scans a directory. Every good file keeps the
//! verdict of its true ending; every damaged one is a row of the report (what `--json`
//! prints) with a reason, never a crash, a hang or a line on stderr only.
mod common;

use common::{copy_dir, expected_for, format_of, outcome, root, scan_dir};
use lazarus_boot_resume::scan::Report;
use lazarus_boot_resume::{SkipWhy, Verdict};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// What a damaged file must get.
#[derive(Debug, Clone)]
enum Want {
    /// The verdict its clean original gets (outcome string).
    Same(String),
    /// Skipped as unreadable, the reason starting with (or containing) this.
    Unreadable { starts: &'static str },
    /// Skipped, unreadable or empty.
    SkippedEmptyOrUnreadable,
    /// Any verdict, the last line reported torn.
    Torn,
    /// Any row, with a reason.
    AnyRow,
}

fn mkfifo(p: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        p,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
}

/// The one transcript file of a capture directory (not a sub-agent's, not a side file).
fn transcript(dir: &Path) -> PathBuf {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).expect("dir").flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with("subagents") {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, &mut v);
    assert_eq!(v.len(), 1, "{}: {v:?}", dir.display());
    v.remove(0)
}

/// The damaged twins of one transcript, each in its own copy of the capture directory.
fn jsonl_variants(capture: &Path, into: &Path, want_clean: &str) -> Vec<(PathBuf, Want)> {
    let mut out = Vec::new();
    let mut variant = |kind: &str, f: &dyn Fn(&[u8]) -> Option<Vec<u8>>, want: Want| {
        let dir = into.join(format!("damaged-{kind}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        copy_dir(capture, &dir);
        let t = transcript(&dir);
        let bytes = std::fs::read(&t).expect("read");
        match f(&bytes) {
            Some(b) => std::fs::write(&t, b).expect("write"),
            None => {
                // replaced by what the kind names, beside the bytes
                let good = t.with_extension("good");
                std::fs::rename(&t, &good).expect("rename");
                match kind {
                    "symlink" => std::os::unix::fs::symlink(&good, &t).expect("symlink"),
                    "dangling-symlink" => {
                        std::os::unix::fs::symlink(t.with_extension("gone"), &t).expect("symlink")
                    }
                    "fifo" => mkfifo(&t),
                    other => panic!("{other}"),
                }
            }
        }
        out.push((t, want));
    };
    let same = || Want::Same(want_clean.to_string());
    variant(
        "bom",
        &|b| Some([b"\xEF\xBB\xBF".as_slice(), b].concat()),
        same(),
    );
    variant(
        "crlf",
        &|b| {
            Some(
                b.split(|c| *c == b'\n')
                    .collect::<Vec<_>>()
                    .join(b"\r\n".as_slice()),
            )
        },
        same(),
    );
    variant(
        "nul-tail",
        &|b| Some([b, &[0u8; 16384][..]].concat()),
        same(),
    );
    variant(
        "nul-page",
        &|b| {
            let mut v = b.to_vec();
            let at = (v.len() / 2) & !4095;
            let end = (at + 4096).min(v.len());
            v[at..end].fill(0);
            Some(v)
        },
        Want::AnyRow,
    );
    variant(
        "torn-line",
        &|b| {
            let end = b.len() - 1;
            let start = b[..end]
                .iter()
                .rposition(|c| *c == b'\n')
                .map_or(0, |i| i + 1);
            Some(b[..start + (end - start) / 2].to_vec())
        },
        Want::Torn,
    );
    variant(
        "all-nul",
        &|b| Some(vec![0u8; b.len()]),
        Want::SkippedEmptyOrUnreadable,
    );
    variant(
        "zero-length",
        &|_| Some(Vec::new()),
        Want::SkippedEmptyOrUnreadable,
    );
    variant(
        "symlink",
        &|_| None,
        Want::Unreadable {
            starts: "symbolic link",
        },
    );
    variant(
        "dangling-symlink",
        &|_| None,
        Want::Unreadable {
            starts: "symbolic link",
        },
    );
    variant(
        "fifo",
        &|_| None,
        Want::Unreadable {
            starts: "not a regular file",
        },
    );
    out
}

/// Raw bytes of a stored database file (`.zst` for OpenCode's).
fn db_bytes(dir: &Path, name: &str) -> Option<Vec<u8>> {
    let z = dir.join(format!("{name}.zst"));
    if z.exists() {
        return Some(zstd::decode_all(std::fs::File::open(z).expect("open")).expect("zstd"));
    }
    std::fs::read(dir.join(name)).ok()
}

/// A database another connection holds with an exclusive lock, for as long as it lives.
struct Locked(#[allow(dead_code)] rusqlite::Connection);

fn lock_exclusively(db: &Path) -> Locked {
    let c = rusqlite::Connection::open(db).expect("open for the lock");
    c.execute_batch("PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS lazarus_test_lock(x); INSERT INTO lazarus_test_lock VALUES (1);")
        .expect("take the lock");
    Locked(c)
}

/// The database twins of one capture's store (`name` in `store_dir`, relative to the capture):
/// each in a directory of its own, where discovery looks for it.
fn db_variants(
    capture: &Path,
    store_dir: &str,
    name: &str,
    into: &Path,
    want_clean: &str,
    locks: &mut Vec<Locked>,
) -> Vec<(PathBuf, Want)> {
    let src = capture.join(store_dir);
    let main = db_bytes(&src, name).expect("database");
    let wal = db_bytes(&src, &format!("{name}-wal"));
    let mut out = Vec::new();
    let place = |kind: &str| -> PathBuf {
        let d = into.join(format!("damaged-{kind}")).join(store_dir);
        std::fs::create_dir_all(&d).expect("mkdir");
        d.join(name)
    };
    let write = |db: &Path, main: &[u8], wal: Option<&[u8]>| {
        std::fs::write(db, main).expect("write");
        if let Some(w) = wal {
            std::fs::write(db.with_file_name(format!("{name}-wal")), w).expect("write wal");
        }
    };
    // followed: a link to the database (its WAL beside the target)
    let elsewhere = into.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let target = elsewhere.join(name);
    write(&target, &main, wal.as_deref());
    let db = place("symlink-to-database");
    std::os::unix::fs::symlink(&target, &db).expect("symlink");
    out.push((db, Want::Same(want_clean.to_string())));
    // refused by name: a link to a FIFO, a FIFO, a dangling link, a directory
    let fifo = elsewhere.join("a-fifo");
    mkfifo(&fifo);
    let db = place("symlink-to-fifo");
    std::os::unix::fs::symlink(&fifo, &db).expect("symlink");
    out.push((
        db,
        Want::Unreadable {
            starts: "a symbolic link to a FIFO",
        },
    ));
    let db = place("fifo");
    mkfifo(&db);
    out.push((
        db,
        Want::Unreadable {
            starts: "it is a FIFO",
        },
    ));
    let db = place("dangling-symlink");
    std::os::unix::fs::symlink(elsewhere.join("gone.db"), &db).expect("symlink");
    out.push((
        db,
        Want::Unreadable {
            starts: "a symbolic link that leads nowhere",
        },
    ));
    let db = place("directory");
    std::fs::create_dir(&db).expect("mkdir");
    out.push((
        db,
        Want::Unreadable {
            starts: "it is a directory",
        },
    ));
    // SQLite's own errors first
    let db = place("corrupt-header");
    let mut bad = main.clone();
    bad[..100].fill(0x5a);
    write(&db, &bad, None);
    out.push((
        db,
        Want::Unreadable {
            starts: "file is not a database",
        },
    ));
    let db = place("not-its-schema");
    drop(rusqlite::Connection::open(&db).and_then(|c| c.execute_batch("CREATE TABLE other(x);")));
    out.push((
        db,
        Want::Unreadable {
            starts: "not the schema this build reads",
        },
    ));
    let db = place("locked");
    write(&db, &main, wal.as_deref());
    locks.push(lock_exclusively(&db));
    out.push((
        db,
        Want::Unreadable {
            starts: "database is locked",
        },
    ));
    // a WAL cut in the middle of a frame (a power cut while OpenCode wrote): SQLite reads
    // the transactions before the cut
    if let Some(w) = &wal {
        let db = place("wal-torn");
        write(&db, &main, Some(&w[..w.len() / 2 + 7]));
        out.push((db, Want::AnyRow));
    }
    out
}

fn check(r: &Report, want: &Want) -> Result<(), String> {
    if r.reason.trim().is_empty() {
        return Err("no reason".into());
    }
    let ok = match want {
        Want::Same(v) => outcome(r) == *v,
        Want::Unreadable { starts } => {
            r.verdict == Verdict::Skipped(SkipWhy::Unreadable)
                && (r.reason.starts_with(starts) || r.reason.contains(starts))
        }
        Want::SkippedEmptyOrUnreadable => matches!(
            r.verdict,
            Verdict::Skipped(SkipWhy::Empty | SkipWhy::Unreadable)
        ),
        Want::Torn => r.torn,
        Want::AnyRow => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("want {want:?}"))
    }
}

#[test]
fn every_damaged_file_is_a_row_with_a_reason_and_every_good_one_keeps_its_verdict() {
    // (program, the capture damaged, its SQLite store: directory and name)
    type Store = Option<(&'static str, &'static str)>;
    let programs: [(&str, &str, Store); 6] = [
        ("claude", "killed-in-mcp-tool", None),
        ("codex", "killed-in-mcp-tool", None),
        ("pi", "killed-in-tool", None),
        ("gemini-cli", "killed-in-tool", None),
        (
            "opencode",
            "killed-in-tool",
            Some(("home/.local/share/opencode", "opencode.db")),
        ),
        (
            "openclaw",
            "embedded-killed-in-tool",
            Some(("home/.openclaw/agents/main/agent", "openclaw-agent.sqlite")),
        ),
    ];
    let mut failures = Vec::new();
    let (mut good, mut damaged) = (0, 0);
    let mut locks = Vec::new();
    for (program, victim, store) in programs {
        let endings: Value = serde_json::from_slice(
            &std::fs::read(root().join(program).join("endings.json")).expect("endings"),
        )
        .expect("endings parse");
        let corpus = tempfile::tempdir().expect("tempdir");
        // the good captures
        let mut entries = Vec::new();
        for (scenario, entry) in endings.as_object().expect("object") {
            let dir = root().join(program).join(scenario);
            if scenario.starts_with('_') || !dir.is_dir() {
                continue;
            }
            let to = corpus.path().join(format!("good-{scenario}"));
            std::fs::create_dir_all(&to).expect("mkdir");
            copy_dir(&dir, &to);
            entries.push((to, entry.clone()));
        }
        // the damaged twins of one of them
        let victim_dir = root().join(program).join(victim);
        let want_clean = {
            let d = tempfile::tempdir().expect("tempdir");
            copy_dir(&victim_dir, d.path());
            let rs = scan_dir(format_of(program), d.path(), 4096);
            outcome(&rs[0])
        };
        let variants = match store {
            None => jsonl_variants(&victim_dir, corpus.path(), &want_clean),
            Some((dir, name)) => db_variants(
                &victim_dir,
                dir,
                name,
                corpus.path(),
                &want_clean,
                &mut locks,
            ),
        };
        let reports = scan_dir(format_of(program), corpus.path(), 4096);
        for (dir, entry) in &entries {
            let mine: Vec<&Report> = reports
                .iter()
                .filter(|r| Path::new(&r.path).starts_with(dir))
                .collect();
            if mine.is_empty() {
                failures.push(format!("{program} {}: no row", dir.display()));
            }
            for r in mine {
                good += 1;
                let (want, got) = (expected_for(entry, r), outcome(r));
                if want != got {
                    failures.push(format!(
                        "{program} good {}: got {got} ({}), want {want}",
                        dir.display(),
                        r.reason
                    ));
                }
            }
        }
        for (path, want) in &variants {
            damaged += 1;
            let rows: Vec<&Report> = reports
                .iter()
                .filter(|r| Path::new(&r.path) == path.as_path())
                .collect();
            if rows.is_empty() {
                failures.push(format!("{program} {}: no row", path.display()));
            }
            for r in rows {
                if let Err(e) = check(r, want) {
                    failures.push(format!(
                        "{program} {}: {} ({}): {e}",
                        path.display(),
                        outcome(r),
                        r.reason
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(good > 50 && damaged >= 58, "{good} good, {damaged} damaged");
    eprintln!("{good} good rows kept their verdicts beside {damaged} damaged files");
}

/// A database another program locks between discovery and the reading of its sessions: the
/// scan waits for it once, at most `WAIT_PER_DATABASE` in all (it waited 2 s per statement, 8 s
/// for one OpenClaw database), and each of its sessions is a row saying SQLite's error.
#[test]
fn a_locked_database_costs_one_bounded_wait_however_many_sessions_it_holds() {
    use lazarus_boot_resume::discover::{self, Source, SourceFormat};
    use lazarus_boot_resume::scan::{self, ScanOptions};
    use lazarus_boot_resume::sqlite::WAIT_PER_DATABASE;
    let d = tempfile::tempdir().expect("tempdir");
    copy_dir(&root().join("openclaw/embedded-killed-in-tool"), d.path());
    let db = d
        .path()
        .join("home/.openclaw/agents/main/agent/openclaw-agent.sqlite");
    {
        // three more sessions, copies of the real one
        let c = rusqlite::Connection::open(&db).expect("open");
        c.execute_batch("PRAGMA foreign_keys=OFF").expect("pragma");
        let cols: Vec<String> = c
            .prepare("SELECT name FROM pragma_table_info('transcript_events')")
            .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
            .expect("columns");
        let rest: Vec<&str> = cols
            .iter()
            .map(String::as_str)
            .filter(|c| *c != "session_id")
            .collect();
        for n in 2..=4 {
            c.execute(
                &format!(
                    "INSERT INTO transcript_events(session_id, {r}) SELECT 'copy-{n}', {r} FROM transcript_events WHERE session_id = (SELECT MIN(session_id) FROM transcript_events WHERE session_id NOT LIKE 'copy-%')",
                    r = rest.join(", ")
                ),
                [],
            )
            .expect("copy a session");
        }
    }
    let (cands, problems) = discover::candidates(
        &[Source {
            format: SourceFormat::Known(lazarus_boot_resume::Format::Openclaw),
            path: d.path().to_path_buf(),
        }],
        true,
    );
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(cands.len(), 4, "{cands:#?}");
    let _lock = lock_exclusively(&db);
    let opts = ScanOptions {
        window: None,
        threads: 1,
        ..Default::default()
    };
    let reports = scan::scan(&cands, &opts, None);
    for r in &reports {
        assert_eq!(r.verdict, Verdict::Skipped(SkipWhy::Unreadable), "{r:?}");
        assert!(r.reason.starts_with("database is locked"), "{}", r.reason);
    }
    let budget = &cands[0].sqlite.as_ref().expect("a database session").budget;
    let spent = budget.spent();
    assert!(
        spent <= WAIT_PER_DATABASE + std::time::Duration::from_millis(500),
        "waited {spent:?} for one database"
    );
    assert!(
        spent >= WAIT_PER_DATABASE / 2,
        "waited only {spent:?}: the lock was never waited for"
    );
}
