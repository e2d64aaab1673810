//! The mistakes a new user makes, run against the real binary: each gets a clear error (what,
//! where, what to do), the exit code the help promises, and nothing written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

/// `lazarus ARGS` with a session directory that does not exist yet, standard input empty
/// and not a terminal, no model server (a port nothing listens on).
fn lazarus(home: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("LAZARUS_SESSION_DIR", home.join("sessions"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("HOME", home)
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env_remove("LAZARUS_STORE")
        .env_remove("LAZARUS_MODEL")
        .env_remove("LAZARUS_LOG")
        .env_remove("LAZARUS_TOKEN")
        .current_dir(home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn expect(home: &Path, args: &[&str], code: i32) -> Output {
    let o = lazarus(home, args);
    assert_eq!(
        o.status.code(),
        Some(code),
        "lazarus {args:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    o
}

/// Every path under `root` (files and directories), sorted.
fn files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
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

/// Finding 1: a mistyped `--session` without a prompt is an error naming the nearest ids,
/// and creates nothing; creating takes a prompt or `--new`.
#[test]
fn a_mistyped_session_is_an_error_with_suggestions_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    expect(home, &["sessions", "create", "--id", "fix-tests"], 0);
    expect(home, &["sessions", "create", "--id", "docs"], 0);
    let before = files(home);

    let o = expect(home, &["run", "--session", "fix-tsets", "--model", "m"], 1);
    let err = stderr(&o);
    assert!(err.contains("no session fix-tsets"), "{err}");
    assert!(err.contains("did you mean fix-tests?"), "{err}");
    assert!(!err.contains("docs"), "only near ids are suggested: {err}");
    assert!(err.contains("--new"), "says how to create: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert_eq!(files(home), before, "nothing written for a mistyped id");

    // an id far from every existing one: no suggestion, the same rule
    let o = expect(home, &["run", "--session", "zzzzzzzzzz", "--model", "m"], 1);
    assert!(!stderr(&o).contains("did you mean"), "{}", stderr(&o));
    assert_eq!(files(home), before);

    // --new creates it (empty: nothing to ask the model), and only once
    expect(
        home,
        &["run", "--session", "fix-tsets", "--new", "--model", "m"],
        0,
    );
    assert!(home.join("sessions/fix-tsets.jsonl").exists());
    let o = expect(
        home,
        &["run", "--session", "fix-tsets", "--new", "--model", "m"],
        1,
    );
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
    assert!(stderr(&o).contains("drop it to resume"), "{}", stderr(&o));

    // and resuming it without a prompt works
    expect(home, &["run", "--session", "fix-tsets", "--model", "m"], 0);
}

/// Finding 2: arguments are checked before anything touches the disk.
#[test]
fn arguments_are_checked_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["run", "--tools", "shell,grep", "-p", "x", "--model", "m"],
            1,
            "unknown tool \"grep\"",
        ),
        (
            &["run", "--store", "mysql://db/x", "-p", "x", "--model", "m"],
            2,
            "postgres://",
        ),
        (
            &[
                "run",
                "--examples",
                "missing.json",
                "-p",
                "x",
                "--model",
                "m",
            ],
            1,
            "missing.json",
        ),
        (
            &[
                "run",
                "--workspace",
                "no-such-dir",
                "-p",
                "x",
                "--model",
                "m",
            ],
            1,
            "no-such-dir",
        ),
        (
            &[
                "run",
                "--message-id",
                "m1",
                "--session",
                "s",
                "--model",
                "m",
            ],
            2,
            "--message-id",
        ),
        (&["run", "--shell-timeout", "ten", "-p", "x"], 2, "30s"),
        (&["run", "--sandbox", "loose", "-p", "x"], 2, "loose"),
        (
            &["serve", "--listen", "0.0.0.0:0", "--model", "m"],
            1,
            "--allow-remote",
        ),
        (
            &["serve", "--tools", "grep", "--model", "m"],
            1,
            "unknown tool",
        ),
        (
            &["serve", "--store", "mysql://db/x", "--model", "m"],
            2,
            "postgres://",
        ),
    ];
    for (args, code, says) in cases {
        let o = expect(home, args, *code);
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert_eq!(
            files(home),
            Vec::<PathBuf>::new(),
            "{args:?} wrote something"
        );
    }
}

/// `lazarus run` with nothing to do (no prompt, empty standard input, no session) is a usage
/// error: exit 2, and no session directory appears.
#[test]
fn run_with_nothing_to_do_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let o = expect(home, &["run", "--model", "m"], 2);
    let err = stderr(&o);
    assert!(err.contains("nothing to do"), "{err}");
    assert!(err.contains("--new"), "{err}");
    assert_eq!(files(home), Vec::<PathBuf>::new());
}

/// Finding 7: LAZARUS_SESSION_DIR and LAZARUS_STORE both in the environment is a clear usage
/// error (not clap's "cannot be used with" for flags nobody gave); a flag beats either.
#[test]
fn two_stores_in_the_environment_get_a_clear_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let both = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("LAZARUS_SESSION_DIR", home.join("sessions"))
            .env("LAZARUS_STORE", "postgres://nobody@127.0.0.1:9/none")
            .env("XDG_CONFIG_HOME", home.join("config"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let o = both(&["sessions", "list"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("both set in the environment"), "{err}");
    assert!(err.contains("--session-dir DIR or --store URL"), "{err}");
    assert!(!err.contains("cannot be used with"), "{err}");
    // a flag chooses
    let dir = home.join("chosen");
    let o = both(&["sessions", "--session-dir", dir.to_str().unwrap(), "list"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(dir.is_dir());
    // two flags: usage
    let o = both(&[
        "sessions",
        "--session-dir",
        "x",
        "--store",
        "postgres://h/db",
        "list",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("give one of them"), "{}", stderr(&o));
}

/// Issue 12: text from sessions (inputs, answers, tool output) is shown with its control
/// characters escaped, so an escape sequence in it cannot drive the terminal.
#[test]
fn control_characters_in_session_text_are_shown_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    expect(home, &["sessions", "create", "--id", "s"], 0);
    let evil = "clear\x1b[2J title\x1b]0;pwned\x07 csi\u{9b}31m\nsecond line";
    expect(home, &["sessions", "send", "s", evil], 0);
    let o = expect(home, &["sessions", "show", "s"], 0);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !out.contains('\x1b') && !out.contains('\x07') && !out.contains('\u{9b}'),
        "{out:?}"
    );
    assert!(
        out.contains("clear\\x1b[2J title\\x1b]0;pwned\\x07 csi\\u{9b}31m\nsecond line"),
        "{out}"
    );
    for args in [&["sessions", "list"][..], &["sessions", "tree"]] {
        let o = expect(home, args, 0);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            !out.contains('\x1b') && !out.contains('\x07'),
            "{args:?}: {out:?}"
        );
    }
    // --json keeps the exact text (JSON escapes it)
    let o = expect(home, &["sessions", "show", "s", "--json"], 0);
    let line = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    assert_eq!(v["data"]["text"], evil);
}

/// Finding 3: no model server → one line at the end (what, where, what to do), not one per
/// attempt; no colour codes on a pipe even with logging on; nothing on stdout; no silent
/// `default` model name.
#[test]
fn no_model_server_is_one_clear_line() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let run = |log: Option<&str>| {
        let mut c = Command::new(BIN);
        c.args(["run", "--model", "m", "-p", "hi", "--session", "s"])
            .env("LAZARUS_SESSION_DIR", home.join("sessions"))
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
            .env_remove("LAZARUS_LOG")
            .env_remove("NO_COLOR")
            .env_remove("LAZARUS_STORE")
            .current_dir(home)
            .stdin(Stdio::null());
        if let Some(log) = log {
            c.env("LAZARUS_LOG", log);
        }
        c.output().unwrap()
    };
    // with every attempt logged: still no colour codes on a pipe
    let o = run(Some("info"));
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(!err.contains('\x1b'), "colour on a pipe: {err:?}");
    assert!(err.contains("attempt=2"), "logged: {err}");

    let o = run(None);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let errors: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    let line = errors[0];
    assert!(
        line.starts_with("error: model request failed after 4 attempts"),
        "{line}"
    );
    assert!(
        line.contains("http://127.0.0.1:9/v1/chat/completions"),
        "{line}"
    );
    assert_eq!(line.matches("Connection refused").count(), 1, "{line}");
    assert_eq!(
        line.matches("127.0.0.1:9").count(),
        1,
        "no repetition: {line}"
    );
    assert!(line.contains("--session s"), "says what to do: {line}");
    assert_eq!(err.matches("Connection refused").count(), 1, "{err}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "",
        "stdout is the transcript"
    );

    // without --model the server is asked; unreachable: a usage error naming --model
    let o = expect(home, &["run", "-p", "hi", "--session", "t"], 2);
    let err = stderr(&o);
    assert!(err.contains("no --model given"), "{err}");
    assert!(err.contains("http://127.0.0.1:9/v1/models"), "{err}");
    assert!(!home.join("sessions/t.jsonl").exists());
}

/// Without --model, the server's only model is used (and said).
#[test]
fn the_servers_only_model_is_used_without_model() {
    use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::text("hello there"),
        )])))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let o = Command::new(BIN)
        .args(["run", "-p", "hi", "--base-url", &server.base_url()])
        .env("LAZARUS_SESSION_DIR", home.join("sessions"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("LAZARUS_MODEL")
        .env_remove("LAZARUS_STORE")
        .current_dir(home)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("model: scripted (the only model"),
        "{}",
        stderr(&o)
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello there\n");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["model"], "scripted");
}
