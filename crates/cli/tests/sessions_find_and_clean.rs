//! Finding sessions (`list` order, columns, filters; `verify --all` summary) and cleaning
//! them up (`rm`, `prune`; forks of a removed parent), against the real binary.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use lazarus_session::{LocalStore, SessionId, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn lazarus(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("LAZARUS_SESSION_DIR", dir)
        .env("XDG_CONFIG_HOME", dir.join("no-config"))
        .env_remove("LAZARUS_STORE")
        .env_remove("LAZARUS_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[track_caller]
fn expect(dir: &Path, args: &[&str], code: i32) -> (String, String) {
    let o = lazarus(dir, args);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert_eq!(
        o.status.code(),
        Some(code),
        "lazarus {args:?}\n{out}\n{err}"
    );
    (out, err)
}

fn ids_of_json(out: &str) -> Vec<String> {
    out.lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn list_is_newest_first_with_title_status_workspace_and_age_and_filters() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let dir = dir.as_path();
    // a workspace whose name holds an escape sequence: shown escaped
    let ws = tmp.path().join("app\x1b[31mred");
    std::fs::create_dir(&ws).unwrap();
    expect(dir, &["sessions", "create", "--id", "oldest"], 0);
    expect(dir, &["sessions", "create", "--id", "middle"], 0);
    expect(
        dir,
        &["sessions", "send", "middle", "fix the flaky login test"],
        0,
    );
    // "newest" has a workspace (created by run; the model is unreachable: failed)
    expect(
        dir,
        &[
            "run",
            "--session",
            "newest",
            "-p",
            "write the docs",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--workspace",
            ws.to_str().unwrap(),
        ],
        1,
    );
    // oldest gets activity last: it is the newest now
    expect(dir, &["sessions", "send", "oldest", "late activity"], 0);

    let (out, _) = expect(dir, &["sessions", "list", "--json"], 0);
    assert_eq!(ids_of_json(&out), ["oldest", "newest", "middle"]);

    let (out, _) = expect(dir, &["sessions", "list"], 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("ID")
            && lines[0].contains("TITLE")
            && lines[0].contains("WORKSPACE")
            && lines[0].contains("ACTIVE"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("oldest ")
            && lines[1].contains("late activity")
            && lines[1].contains("pending"),
        "{out}"
    );
    assert!(
        lines[2].starts_with("newest ") && lines[2].contains("failed"),
        "{out}"
    );
    assert!(
        lines[2].contains("app\\x1b[31mred"),
        "workspace shown escaped: {out}"
    );
    assert!(!out.contains('\x1b'), "{out:?}");
    assert!(
        lines[1].ends_with("just now") || lines[1].ends_with("s ago"),
        "{out}"
    );

    let (out, _) = expect(
        dir,
        &["sessions", "list", "--status", "pending", "--json"],
        0,
    );
    assert_eq!(ids_of_json(&out), ["oldest", "middle"]);
    let (out, _) = expect(dir, &["sessions", "list", "--search", "FLAKY", "--json"], 0);
    assert_eq!(ids_of_json(&out), ["middle"]);
    let (out, _) = expect(
        dir,
        &[
            "sessions",
            "list",
            "--workspace",
            ws.to_str().unwrap(),
            "--json",
        ],
        0,
    );
    assert_eq!(ids_of_json(&out), ["newest"]);
    let (out, _) = expect(dir, &["sessions", "list", "--status", "in_doubt"], 0);
    assert!(out.contains("(no sessions)"), "{out}");
    let (_, err) = expect(dir, &["sessions", "list", "--status", "bogus"], 2);
    assert!(err.contains("in_doubt"), "lists the statuses: {err}");
}

/// The table shows a page (the newest 50) and says what it left out; `--limit`, `--offset`
/// and `--all` choose another; `--json` writes every session unless limited.
#[test]
fn the_table_shows_a_page_and_says_what_it_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // more than a page, made directly (a create per process would take long)
    let store = LocalStore::open(dir).unwrap();
    let n = 57;
    for k in 0..n {
        let mut s = store
            .create(lazarus_session::CreateOptions {
                id: Some(SessionId::parse(&format!("p{k:02}")).unwrap()),
                meta: None,
            })
            .unwrap();
        if k % 2 == 0 {
            s.append_input("m", "user", &format!("even {k}")).unwrap();
        }
    }
    let rows = |out: &str| -> Vec<String> {
        out.lines()
            .skip(1)
            .filter(|l| l.starts_with('p'))
            .map(|l| l.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    let (all_json, _) = expect(dir, &["sessions", "list", "--json"], 0);
    let order = ids_of_json(&all_json);
    assert_eq!(order.len(), n, "--json writes every session");

    let (out, _) = expect(dir, &["sessions", "list"], 0);
    assert_eq!(rows(&out), order[..50], "{out}");
    assert_eq!(
        out.lines().last().unwrap(),
        "(showing 1–50 of 57 sessions; --offset 50 for the next ones, --all for every one)",
        "{out}"
    );
    let (out, _) = expect(dir, &["sessions", "list", "--offset", "50"], 0);
    assert_eq!(rows(&out), order[50..], "{out}");
    assert_eq!(
        out.lines().last().unwrap(),
        "(showing 51–57 of 57 sessions; --all for every one)"
    );
    let (out, _) = expect(dir, &["sessions", "list", "--all"], 0);
    assert_eq!(rows(&out), order, "{out}");
    assert!(!out.contains("showing"), "{out}");
    let (out, _) = expect(
        dir,
        &[
            "sessions", "list", "--limit", "3", "--offset", "2", "--json",
        ],
        0,
    );
    assert_eq!(ids_of_json(&out), order[2..5]);
    // a filter: counted against what matches
    let (out, _) = expect(
        dir,
        &["sessions", "list", "--status", "pending", "--limit", "4"],
        0,
    );
    assert_eq!(rows(&out).len(), 4);
    assert_eq!(
        out.lines().last().unwrap(),
        "(showing 1–4 of 29 matching (57 in all); --offset 4 for the next ones, --all for every one)"
    );
    let (out, _) = expect(dir, &["sessions", "list", "--offset", "99"], 0);
    assert!(out.contains("(no sessions)"), "{out}");
    assert_eq!(
        out.lines().last().unwrap(),
        "(showing none of 57 sessions: --offset 99 is past the last one)"
    );
}

#[test]
fn verify_all_ends_with_a_summary_and_names_ids_in_json() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for id in ["a", "b", "c"] {
        expect(dir, &["sessions", "create", "--id", id], 0);
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("b.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"seq\":1,\"garbage").unwrap();
    let (out, err) = expect(dir, &["sessions", "verify", "--all"], 1);
    assert_eq!(
        out.lines().last().unwrap(),
        "checked 3 sessions: 2 clean, 1 with problems (1 problems in all)",
        "{out}"
    );
    assert!(
        !err.contains('\r'),
        "no progress bar off a terminal: {err:?}"
    );
    let (out, err) = expect(dir, &["sessions", "verify", "--all", "--json"], 1);
    let ids: Vec<String> = ids_of_json(&out);
    assert_eq!(ids, ["a", "b", "c"]);
    assert!(
        err.contains("checked 3 sessions"),
        "summary on stderr with --json: {err}"
    );
    let (_, err) = expect(dir, &["sessions", "verify"], 2);
    assert!(err.contains("--all"), "{err}");
}

#[test]
fn rm_refuses_a_live_writer_and_owed_work_and_forks_of_a_removed_parent_still_work() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::text("done"),
        )
        .repeat()])))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let dir = dir.as_path();
    let url = server.base_url();
    let run = |args: &[&str]| {
        let mut a = vec!["run", "--base-url", &url, "--workspace"];
        let ws = tmp.path().to_str().unwrap();
        a.push(ws);
        a.extend_from_slice(args);
        expect(dir, &a, 0)
    };
    run(&["--session", "parent", "-p", "one"]);
    run(&["--session", "parent", "-p", "two"]);
    expect(
        dir,
        &[
            "sessions",
            "fork",
            "parent",
            "--at-turn",
            "1",
            "--id",
            "child",
        ],
        0,
    );
    std::fs::write(
        dir.join("parent.jsonl.cut-20260101T000000.000000Z"),
        b"debris",
    )
    .unwrap();

    // a live writer: refused, even with --force
    let store = LocalStore::open(dir).unwrap();
    let held = store.open(&SessionId::literal("parent")).unwrap();
    let (_, err) = expect(dir, &["sessions", "rm", "parent", "--force"], 1);
    assert!(err.contains("in use by"), "{err}");
    drop(held);
    assert!(dir.join("parent.jsonl").exists());

    // owed work: refused without --force
    expect(dir, &["sessions", "send", "child", "pending question"], 0);
    let (_, err) = expect(dir, &["sessions", "rm", "child"], 1);
    assert!(
        err.contains("owes work") && err.contains("--force"),
        "{err}"
    );
    let (_, err) = expect(dir, &["sessions", "rm", "nope"], 1);
    assert!(err.contains("no session"), "{err}");

    let (out, _) = expect(dir, &["sessions", "rm", "parent"], 0);
    assert_eq!(out, "removed parent\n");
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("parent"))
        .collect();
    assert!(
        left.is_empty(),
        "ledger, debris and lock all gone: {left:?}"
    );

    // the fork holds its prefix: it shows, verifies, continues and lists as a root
    let (out, _) = expect(dir, &["sessions", "show", "child"], 0);
    assert!(
        out.contains("> one") && out.contains("pending question"),
        "{out}"
    );
    expect(dir, &["sessions", "verify", "child"], 0);
    run(&["--session", "child"]);
    let (out, _) = expect(dir, &["sessions", "tree"], 0);
    assert!(out.starts_with("child "), "{out}");
    let st = store.load(&SessionId::literal("child")).unwrap();
    assert_eq!(st.status(), lazarus_session::Status::Idle);
}

#[test]
fn prune_removes_old_finished_sessions_keeps_owed_work_and_dry_run_removes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    expect(dir, &["sessions", "create", "--id", "empty"], 0);
    expect(dir, &["sessions", "create", "--id", "owes"], 0);
    expect(dir, &["sessions", "send", "owes", "answer me"], 0);

    // nothing is older than 30 days
    let (out, _) = expect(dir, &["sessions", "prune", "--older-than", "30d"], 0);
    assert!(out.starts_with("removed 0 sessions"), "{out}");

    let (out, _) = expect(
        dir,
        &["sessions", "prune", "--older-than", "0s", "--dry-run"],
        0,
    );
    assert!(out.contains("would remove empty (new"), "{out}");
    assert!(!out.contains("owes"), "{out}");
    assert!(dir.join("empty.jsonl").exists());

    let (out, _) = expect(dir, &["sessions", "prune", "--older-than", "0s"], 0);
    assert!(out.contains("removed empty"), "{out}");
    assert!(
        out.lines()
            .last()
            .unwrap()
            .starts_with("removed 1 sessions ("),
        "{out}"
    );
    assert!(!dir.join("empty.jsonl").exists());
    assert!(
        dir.join("owes.jsonl").exists(),
        "owed work is kept by default"
    );

    let (out, _) = expect(
        dir,
        &[
            "sessions",
            "prune",
            "--older-than",
            "0s",
            "--status",
            "pending",
            "--json",
        ],
        0,
    );
    assert_eq!(ids_of_json(&out), ["owes"]);
    assert!(!dir.join("owes.jsonl").exists());
}
