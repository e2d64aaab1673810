//! Every `--json` output of the command line against `docs/json.md`: the table "Command
//! outputs" names each command's members; the names table fixes the time format and the
//! status words. A member the document does not name, a time in another format or a status
//! outside the list fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use lazarus_session::{LocalStore, SessionId, Store};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");
const DOC: &str = include_str!("../../../docs/json.md");

/// Backticked words of a markdown fragment.
fn ticked(s: &str) -> Vec<String> {
    s.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The section of the document under heading `title`.
fn section<'a>(title: &str) -> &'a str {
    let start = DOC
        .find(&format!("## {title}\n"))
        .unwrap_or_else(|| panic!("docs/json.md has no section {title:?}"));
    let rest = &DOC[start + title.len() + 4..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

/// The documented status words.
fn statuses() -> BTreeSet<String> {
    section("Session status")
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| ticked(l).into_iter().next())
        .collect()
}

/// The members of the session summary (from its example).
fn summary_members() -> BTreeSet<String> {
    let s = section("Session summary");
    let json = s
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("a summary example");
    let v: Value = serde_json::from_str(json).expect("the example parses");
    v.as_object().unwrap().keys().cloned().collect()
}

/// Command (as written in the table, e.g. `sessions send --json`) → documented members.
fn command_table() -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for line in section("Command outputs").lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[1].starts_with('`') {
            continue;
        }
        let members: BTreeSet<String> = if cells[3].contains("the session summary") {
            summary_members()
        } else {
            ticked(cells[3]).into_iter().collect()
        };
        for cmd in ticked(cells[1]) {
            out.insert(cmd, members.clone());
        }
    }
    out
}

fn is_time(s: &str) -> bool {
    // 2026-12-03T10:00:00.000Z
    s.len() == 24
        && s.ends_with('Z')
        && s.as_bytes()[10] == b'T'
        && s.as_bytes()[19] == b'.'
        && s.parse::<jiff::Timestamp>().is_ok()
}

/// Checks one output line of `cmd` against the document.
fn check_line(cmd: &str, line: &Value, table: &BTreeMap<String, BTreeSet<String>>) {
    let members = table
        .get(cmd)
        .unwrap_or_else(|| panic!("docs/json.md does not list {cmd:?}"));
    let obj = line
        .as_object()
        .unwrap_or_else(|| panic!("{cmd}: not an object: {line}"));
    for (k, v) in obj {
        assert!(
            members.contains(k),
            "{cmd}: member {k:?} is not in docs/json.md ({members:?}); line: {line}"
        );
        if (k.ends_with("_at") || k == "ts") && !v.is_null() {
            assert!(
                v.as_str().is_some_and(is_time),
                "{cmd}: {k} = {v} is not RFC 3339 UTC with milliseconds"
            );
        }
        if k == "status" {
            assert!(
                v.as_str().is_some_and(|s| statuses().contains(s)),
                "{cmd}: status {v} is not a documented word"
            );
        }
    }
    if members.contains("parent") && members.contains("id") && members.contains("status") {
        assert!(obj.contains_key("parent"), "{cmd}: parent missing: {line}");
    }
}

fn run(dir: &Path, args: &[&str]) -> Vec<Value> {
    let o = Command::new(BIN)
        .args(args)
        .env("LAZARUS_SESSION_DIR", dir)
        .env_remove("LAZARUS_STORE")
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("OPENAI_API_KEY", "test")
        .output()
        .unwrap();
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: {e}: {l:?}")))
        .collect()
}

#[test]
fn every_command_output_uses_the_documented_names() {
    let table = command_table();
    assert!(table.len() >= 12, "the table was not read: {table:?}");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut seen = BTreeSet::new();
    let mut check = |cmd: &str, args: &[&str], want_lines: bool| {
        let lines = run(dir, args);
        assert!(!want_lines || !lines.is_empty(), "{args:?} printed nothing");
        for l in &lines {
            check_line(cmd, l, &table);
        }
        seen.insert(cmd.to_string());
    };
    check(
        "sessions create --json",
        &["sessions", "create", "--id", "a", "--json"],
        true,
    );
    check(
        "sessions send --json",
        &["sessions", "send", "a", "hello", "--json"],
        true,
    );
    check(
        "sessions fork --json",
        &[
            "sessions",
            "fork",
            "a",
            "--at-turn",
            "0",
            "--id",
            "b",
            "--json",
        ],
        true,
    );
    check(
        "sessions list --json",
        &["sessions", "list", "--json"],
        true,
    );
    check(
        "sessions tree --json",
        &["sessions", "tree", "--json"],
        true,
    );
    check(
        "sessions show --json",
        &["sessions", "show", "a", "--json"],
        true,
    );
    check(
        "sessions verify --json",
        &["sessions", "verify", "--all", "--json"],
        true,
    );
    check(
        "sessions rename --json",
        &["sessions", "rename", "a", "A", "--json"],
        true,
    );
    check(
        "sessions repair --json",
        &["sessions", "repair", "a", "--json"],
        true,
    );
    let out = dir.join("a.export");
    let out_s = out.to_str().unwrap();
    check(
        "sessions export -o FILE --json",
        &["sessions", "export", "a", "-o", out_s, "--json"],
        true,
    );
    check(
        "sessions rm --json",
        &["sessions", "rm", "b", "--json"],
        true,
    );
    check(
        "sessions prune --json",
        &[
            "sessions",
            "prune",
            "--older-than",
            "0s",
            "--dry-run",
            "--json",
        ],
        false,
    );
    // the export taken back after removing the session is an import
    run(dir, &["sessions", "rm", "a", "--force", "--json"]);
    check(
        "sessions import --json",
        &["sessions", "import", out_s, "--json"],
        true,
    );
    // another agent's session
    let claude = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../boot-resume/tests/fixtures/real/claude/background-subagent-done/home/.claude/projects/-home-dev-capture-work/10db40ad-df56-4bd4-89fc-f5ad46bf61f1.jsonl",
    );
    check(
        "sessions import --from AGENT --json",
        &[
            "sessions",
            "import",
            "--from",
            "claude-code",
            claude.to_str().unwrap(),
            "--json",
        ],
        true,
    );
    // queued: another process holds the session
    let store = LocalStore::open(dir).unwrap();
    let held = store.open(&SessionId::literal("a")).unwrap();
    check(
        "sessions send --json",
        &["sessions", "send", "a", "steer", "--json"],
        true,
    );
    drop(held);
    check("config show --json", &["config", "show", "--json"], true);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(lazarus_testkit::ScriptedServer::start(
            lazarus_testkit::Script::new([lazarus_testkit::Step::reply(
                lazarus_testkit::ScriptedResponse::text("hi"),
            )
            .repeat()]),
        ))
        .unwrap();
    let url = server.base_url();
    let ws = dir.join("ws");
    std::fs::create_dir(&ws).unwrap();
    check(
        "run --json",
        &[
            "run",
            "--json",
            "--base-url",
            &url,
            "--workspace",
            ws.to_str().unwrap(),
            "-p",
            "say hi",
        ],
        true,
    );
    // a finished session compacted on demand (the scripted model writes the summary)
    run(
        dir,
        &[
            "run",
            "--json",
            "--session",
            "c",
            "--base-url",
            &url,
            "--workspace",
            ws.to_str().unwrap(),
            "-p",
            "say hi",
        ],
    );
    check(
        "sessions compact --json",
        &[
            "sessions",
            "compact",
            "c",
            "--json",
            "--model",
            "m",
            "--base-url",
            &url,
        ],
        true,
    );

    // approvals: two runs that wait for a decision (exit 3), what waits, and decisions
    let asking = rt
        .block_on(lazarus_testkit::ScriptedServer::start(
            lazarus_testkit::Script::new([
                lazarus_testkit::Step::after_tool_result(
                    "k1",
                    lazarus_testkit::ScriptedResponse::text("ok"),
                )
                .repeat(),
                lazarus_testkit::Step::reply(lazarus_testkit::ScriptedResponse::tool_call(
                    "k1",
                    "shell",
                    serde_json::json!({"command": "true"}),
                ))
                .repeat(),
            ]),
        ))
        .unwrap();
    for id in ["p", "q"] {
        let o = Command::new(BIN)
            .args([
                "run",
                "--json",
                "--session",
                id,
                "--ask-for-approval",
                "untrusted",
            ])
            .args(["--base-url", &asking.base_url(), "--workspace"])
            .arg(&ws)
            .args(["-p", "ask first"])
            .env("LAZARUS_SESSION_DIR", dir)
            .env_remove("LAZARUS_STORE")
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("OPENAI_API_KEY", "test")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    check(
        "sessions approvals --json",
        &["sessions", "approvals", "--json"],
        true,
    );
    check(
        "sessions deny --json",
        &["sessions", "deny", "q", "k1", "--reason", "no", "--json"],
        true,
    );
    for _ in 0..2 {
        // the second time: the same decision, recorded already
        check(
            "sessions approve --json",
            &[
                "sessions", "approve", "p", "k1", "--scope", "always", "--json",
            ],
            true,
        );
    }
    check(
        "approvals list --json",
        &["approvals", "list", "--json"],
        true,
    );

    // MCP servers: a real one and one that exits at start (scripts/mcp-servers/setup.sh)
    let py = lazarus_testkit::mcp_servers::python().display().to_string();
    let mcp_json = dir.join("mcp.json");
    std::fs::write(
        &mcp_json,
        serde_json::json!({"mcpServers": {
            "counter": {
                "command": py,
                "args": [lazarus_testkit::mcp_servers::script("counter_server.py"), "stdio"],
                "env": {"COUNTER_FILE": dir.join("counter.txt")},
            },
            "broken": {
                "command": py,
                "args": [lazarus_testkit::mcp_servers::script("hostile_server.py"), "exit-at-start"],
            },
        }})
        .to_string(),
    )
    .unwrap();
    let mcp_json = mcp_json.display().to_string();
    check(
        "mcp list --json",
        &["mcp", "list", "--json", "--mcp-config", &mcp_json],
        true,
    );
    check(
        "mcp list --json",
        &[
            "mcp",
            "list",
            "--no-start",
            "--json",
            "--mcp-config",
            &mcp_json,
        ],
        true,
    );
    check(
        "mcp check --json",
        &[
            "mcp",
            "check",
            "counter",
            "--json",
            "--mcp-config",
            &mcp_json,
        ],
        true,
    );

    let untested: Vec<_> = table.keys().filter(|k| !seen.contains(*k)).collect();
    assert!(
        untested.is_empty(),
        "documented but not checked here: {untested:?}"
    );
}
