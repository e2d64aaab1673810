//! `lazarus boot-resume` through the real binary on Gemini CLI and OpenCode sessions (copies
//! of real captures, found in each program's default home), with fake `gemini` / `opencode`
//! executables that record how they were called; and the `unknown_format` verdict of every
//! format, named with the version seen and counted in the summary.
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn real(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../boot-resume/tests/fixtures/real")
        .join(rel)
}

fn fixture(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../boot-resume/tests/fixtures")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir").flatten() {
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

/// OpenCode's database and WAL from a capture (stored compressed), into `dir`.
fn opencode_db(scenario: &str, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("mkdir");
    let src = real(&format!("opencode/{scenario}/home/.local/share/opencode"));
    for f in ["opencode.db", "opencode.db-wal"] {
        let z = std::fs::File::open(src.join(format!("{f}.zst"))).expect("open");
        std::fs::write(dir.join(f), zstd::decode_all(z).expect("zstd")).expect("write");
    }
    dir.join("opencode.db")
}

fn sql(db: &Path, statement: &str) {
    let c = rusqlite::Connection::open(db).expect("open");
    c.execute_batch(statement).expect("sql");
}

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let s = Sandbox {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        std::fs::create_dir_all(s.root().join("fakebin")).expect("bin");
        std::fs::create_dir_all(s.root().join("records")).expect("rec");
        s
    }
    fn root(&self) -> &Path {
        self.dir.path()
    }
    fn home(&self) -> PathBuf {
        self.root().join("home")
    }
    /// A fake program recording its cwd, `$PWD` and argv, NUL-separated.
    fn fake(&self, name: &str) {
        let p = self.root().join("fakebin").join(name);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\nout=\"{}/{name}.$$\"\nprintf '%s\\0' \"$(pwd -P)\" \"$PWD\" \"$@\" > \"$out.tmp\" && mv \"$out.tmp\" \"$out\"\n",
                self.root().join("records").display()
            ),
        )
        .expect("fake");
        let mut perm = std::fs::metadata(&p).expect("md").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&p, perm).expect("chmod");
    }
    /// Recorded calls of `name`: (cwd, $PWD, argv without argv[0]).
    fn calls(&self, name: &str) -> Vec<(String, String, Vec<String>)> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(self.root().join("records"))
            .expect("rec")
            .flatten()
        {
            let f = e.file_name().to_string_lossy().into_owned();
            if f.starts_with(&format!("{name}.")) && !f.ends_with(".tmp") {
                let b = std::fs::read(e.path()).expect("read");
                let mut parts: Vec<String> = b
                    .split(|&c| c == 0)
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect();
                parts.pop();
                let cwd = parts.remove(0);
                let pwd = parts.remove(0);
                v.push((cwd, pwd, parts));
            }
        }
        v
    }
    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("boot-resume")
            .args(args)
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", self.root().join("fakebin").display()),
            )
            .env("HOME", self.home())
            .env("XDG_STATE_HOME", self.root().join("state"))
            .current_dir(self.root())
            .output()
            .expect("run lazarus")
    }
}

fn json_lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

fn show(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn gemini_and_opencode_sessions_are_resumed_once_in_their_project_naming_the_interrupted_call() {
    let s = Sandbox::new();
    s.fake("gemini");
    s.fake("opencode");
    // Gemini CLI: ~/.gemini, its project root pointed at a directory that exists here.
    copy_dir(
        &real("gemini-cli/killed-in-tool/home/.gemini"),
        &s.home().join(".gemini"),
    );
    let gproj = s.root().join("gemini project");
    std::fs::create_dir_all(&gproj).expect("mkdir");
    std::fs::write(
        s.home().join(".gemini/tmp/work/.project_root"),
        gproj.to_string_lossy().as_bytes(),
    )
    .expect("write");
    // OpenCode: ~/.local/share/opencode/opencode.db, its directory pointed here too.
    let db = opencode_db("killed-in-tool", &s.home().join(".local/share/opencode"));
    let oproj = s.root().join("opencode project");
    std::fs::create_dir_all(&oproj).expect("mkdir");
    sql(
        &db,
        &format!(
            "UPDATE session SET directory = '{}'",
            oproj.to_string_lossy()
        ),
    );

    let o = s.run(&["--window", "0", "--json"]);
    assert!(o.status.success(), "{}", show(&o));
    let lines = json_lines(&o);
    let by = |f: &str| {
        lines
            .iter()
            .find(|l| l["format"] == f)
            .unwrap_or_else(|| panic!("no {f} report: {lines:?}"))
    };
    for f in ["gemini-cli", "opencode"] {
        assert_eq!(by(f)["verdict"], "interrupted_tool_call", "{}", by(f));
        assert_eq!(by(f)["action"], "resumed", "{}", by(f));
    }

    let g = s.calls("gemini");
    assert_eq!(g.len(), 1, "{g:?}");
    let (cwd, _, argv) = &g[0];
    assert_eq!(Path::new(cwd), gproj.canonicalize().expect("canon"));
    assert_eq!(
        &argv[..4],
        &[
            "--resume".to_string(),
            "1bf2a0f3-e3e9-451e-af3c-a2ec0de17cc6".into(),
            "-p".into(),
            argv[3].clone()
        ]
    );
    // Gemini CLI drops the unrecorded call on resume: the message must say it was running
    // and that its effect is unknown, not just "continue".
    assert!(
        argv[3].contains("had not recorded") && argv[3].contains("effect is unknown"),
        "{}",
        argv[3]
    );

    let oc = s.calls("opencode");
    assert_eq!(oc.len(), 1, "{oc:?}");
    let (cwd, pwd, argv) = &oc[0];
    assert_eq!(Path::new(cwd), oproj.canonicalize().expect("canon"));
    // OpenCode takes the project from $PWD.
    assert_eq!(Path::new(pwd), oproj.as_path());
    assert_eq!(
        &argv[..3],
        &[
            "run".to_string(),
            "--session".into(),
            "ses_dbaeaccccffeeAZWKzAI66TYc7".into()
        ]
    );
    assert!(
        argv[3].contains("bash {\"command\":\"echo run >> count.txt")
            && argv[3].contains("call01")
            && argv[3].contains("effect is unknown"),
        "{}",
        argv[3]
    );

    // Never twice: the same tails are already resumed.
    let o = s.run(&["--window", "0", "--json"]);
    assert!(o.status.success(), "{}", show(&o));
    for l in json_lines(&o)
        .iter()
        .filter(|l| l["format"] == "gemini-cli" || l["format"] == "opencode")
    {
        assert_eq!(l["why"], "already_resumed", "{l}");
    }
    assert_eq!(s.calls("gemini").len(), 1);
    assert_eq!(s.calls("opencode").len(), 1);
    // The database was only read.
    let c = rusqlite::Connection::open(&db).expect("open");
    let n: i64 = c
        .query_row("SELECT count(*) FROM message", [], |r| r.get(0))
        .expect("count");
    assert_eq!(n, 2);
}

#[test]
fn an_opencode_session_whose_title_matches_the_skip_pattern_is_skipped() {
    let s = Sandbox::new();
    let db = opencode_db("killed-in-tool", &s.root().join("oc"));
    sql(
        &db,
        "UPDATE session SET title = 'nightly cron: tidy the repo'",
    );
    let src = format!("opencode:{}", s.root().join("oc").display());
    let verdicts = |extra: &[&str]| {
        let mut args = vec![
            "--window",
            "0",
            "--dry-run",
            "--json",
            "--source",
            src.as_str(),
        ];
        args.extend_from_slice(extra);
        let o = s.run(&args);
        assert!(o.status.success(), "{}", show(&o));
        json_lines(&o)
            .iter()
            .map(|l| format!("{}/{}", l["verdict"], l["why"]))
            .collect::<Vec<_>>()
    };
    // the default pattern (cron|heartbeat|subagent|system) names the title
    assert_eq!(verdicts(&[]), ["\"skipped\"/\"skip_pattern\""]);
    assert_eq!(
        verdicts(&["--skip-pattern", ""]),
        ["\"interrupted_tool_call\"/null"]
    );
}

/// `fixture` with every line passed through `edit`.
fn edited(rel: &str, edit: impl Fn(&mut Value)) -> String {
    let mut out = String::new();
    for l in fixture(rel).lines() {
        let mut v: Value = serde_json::from_str(l).expect("json");
        edit(&mut v);
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out
}

#[test]
fn a_version_no_reader_knows_is_unknown_format_with_the_version_for_every_format() {
    let s = Sandbox::new();
    let put = |rel: &str, text: String| {
        let p = s.root().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
    };
    put(
        "lazarus/0199a3c2-7e10-7d3a-9b42-1e6c0d8f2a71.jsonl",
        edited("lazarus/interrupted-tool-call.jsonl", |v| {
            if v["kind"] == "header" {
                v["data"]["version"] = 2.into();
            }
        }),
    );
    put(
        "pi/2026-10-05T10-00-00-000Z_s1.jsonl",
        edited("pi/interrupted-tool-call.jsonl", |v| {
            if v["type"] == "session" {
                v["version"] = 9.into();
            }
        }),
    );
    put(
        "claude/proj/s.jsonl",
        edited("claude-code/interrupted-tool-call.jsonl", |v| {
            if v.get("version").is_some() {
                v["version"] = "3.0.1".into();
            }
        }),
    );
    put(
        "codex/rollout-2026-10-05T13-02-11-019a5c33-8c2d-7e40-a9f6-0b1c7d5e2f68.jsonl",
        edited("codex/interrupted-tool-call.jsonl", |v| {
            if v["type"] == "session_meta" {
                v["payload"]["cli_version"] = "1.2.0".into();
            }
        }),
    );
    // Gemini CLI has no version marker: the legacy single-object file, and a recording
    // whose first line is not the metadata object.
    put(
        "gemini/tmp/p/chats/session-2025-06-01T10-00-abcd1234.json",
        r#"{"sessionId":"abcd1234","messages":[]}"#.into(),
    );
    put(
        "gemini/tmp/q/chats/session-2026-12-05T07-23-ffff0000.jsonl",
        "{\"id\":\"m1\",\"type\":\"user\",\"content\":[{\"text\":\"hi there, fix it\"}]}\n".into(),
    );
    let odb = opencode_db("killed-in-tool", &s.root().join("opencode"));
    sql(&odb, "UPDATE session SET version = '2.0.0'");
    // OpenClaw: an agent database whose schema is newer than the reader's.
    let adb = s.root().join("openclaw/agents/main/agent");
    std::fs::create_dir_all(&adb).expect("mkdir");
    let adb = adb.join("openclaw-agent.sqlite");
    sql(
        &adb,
        "CREATE TABLE schema_meta(role TEXT, schema_version INTEGER, app_version TEXT);
         INSERT INTO schema_meta VALUES ('agent', 99, '2027.1.0');
         CREATE TABLE transcript_events(session_id TEXT, seq INTEGER, event_json TEXT, created_at INTEGER, event_zstd BLOB);
         INSERT INTO transcript_events VALUES ('s-1', 0, '{\"type\":\"session\",\"version\":3,\"id\":\"s-1\"}', 1781773648000, NULL);",
    );
    let src = |f: &str, d: &str| format!("{f}:{}", s.root().join(d).display());
    let sources = [
        src("lazarus", "lazarus"),
        src("pi", "pi"),
        src("claude-code", "claude"),
        src("codex", "codex"),
        src("gemini-cli", "gemini"),
        src("opencode", "opencode"),
        src("openclaw", "openclaw"),
    ];
    let mut args: Vec<&str> = vec!["--window", "0", "--dry-run"];
    for x in &sources {
        args.extend(["--source", x.as_str()]);
    }
    let mut json_args = args.clone();
    json_args.push("--json");
    let o = s.run(&json_args);
    assert!(o.status.success(), "{}", show(&o));
    let lines = json_lines(&o);
    let want = [
        ("lazarus", "2"),
        ("pi", "9"),
        ("claude-code", "3.0.1"),
        ("codex", "1.2.0"),
        ("gemini-cli", "legacy .json (before 0.5x)"),
        (
            "gemini-cli",
            "a first line without sessionId and projectHash",
        ),
        ("opencode", "2.0.0"),
        ("openclaw", "99"),
    ];
    for (format, version) in want {
        let r = lines
            .iter()
            .find(|l| l["format"] == format && l["seen_version"] == version)
            .unwrap_or_else(|| panic!("no {format} report with version {version}: {lines:#?}"));
        assert_eq!(r["verdict"], "unknown_format", "{r}");
        assert_eq!(r["action"], "none", "{r}");
        assert!(
            r["reason"].as_str().is_some_and(|x| x.contains(version)),
            "{r}"
        );
    }
    assert_eq!(lines.len(), want.len(), "{lines:#?}");
    // Counted in the summary.
    let o = s.run(&args);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("unknown_format 8"), "{}", show(&o));
}
