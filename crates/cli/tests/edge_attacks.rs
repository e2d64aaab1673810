//! The session's edges against a hostile model, through `lazarus run` (rows 1–8 and 10–12 of
//! the issue "the sandbox's edges"; `serve_edge_attacks.rs` runs them through `lazarus
//! serve`, row 9 there too). The tool-call rows (`attack_common::edges`) run on a real
//! terminal (`lazarus_testkit::pty`), with descriptors open that a supervisor leaves, as root
//! and as uid 65534 (`setpriv`); afterwards the person's shell reads the terminal and runs
//! what it got, and git runs in the workspace. Every attack prints `held` or `BROKE`; a test
//! fails on any `BROKE`.

mod attack_common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use attack_common::edges::{
    EdgeAttack, EdgeFixture, calls, edge_attacks, judge_all, q, read_only_attacks,
};
use lazarus_session::{LocalStore, SessionId, Store};
use lazarus_testkit::pty::Pty;
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The binary where `uid` may run it (an unprivileged user cannot reach the build's).
fn binary_for(uid: Option<u32>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("lazarus");
    std::fs::copy(BIN, &bin).unwrap();
    if uid.is_some() {
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (dir, bin)
}

/// `setpriv … ` to become `uid`, or nothing.
fn as_user(uid: Option<u32>) -> String {
    match uid {
        Some(u) => format!("setpriv --reuid={u} --regid={u} --clear-groups -- "),
        None => String::new(),
    }
}

fn script_of(list: &[EdgeAttack]) -> Script {
    Script::new([
        Step::reply(calls(list)).when(When::LastUserContains {
            text: "attack".into(),
        }),
        Step::after_tool_result(
            format!("e{}", list.len() - 1),
            ScriptedResponse::text("done"),
        )
        .repeat(),
    ])
}

/// Runs `list` as the calls of one `lazarus run` on a terminal, started from a shell that
/// left descriptors open, then the person's shell and git; returns the verdicts' failures
/// and the model's first request.
fn run_on_terminal(
    f: &EdgeFixture,
    list: &[EdgeAttack],
    extra: &[&str],
) -> (Vec<String>, serde_json::Value) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(ScriptedServer::start(script_of(list))).unwrap();
    let (_bin_dir, bin) = binary_for(f.uid);
    let run = format!(
        "{user}{bin} run --session edge -p attack --workspace {ws} --session-dir {sessions} --base-url {url} --mcp-config {mcp} --shell-timeout 60s {extra}",
        user = as_user(f.uid),
        bin = q(&bin),
        ws = q(&f.ws),
        sessions = q(&f.sessions),
        url = server.base_url(),
        mcp = q(&f.mcp_config),
        extra = extra.join(" "),
    );
    let line = format!(
        "{open}; {run}; echo LAZARUS-EXIT=$?; exec 7>&- 8<&- 9<&-; {after}",
        open = f.open_descriptors(),
        after = f.person_after()
    );
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(&line)
        .current_dir(&f.ws)
        .env_remove("LAZARUS_CONFIG")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("LAZARUS_SESSION_DIR")
        .env_remove("LAZARUS_STORE")
        .env_remove("LAZARUS_SANDBOX_TEST_UNSUPPORTED")
        .envs(f.env());
    let pty = Pty::spawn(&mut cmd);
    let (status, shown) = pty.finish(Duration::from_secs(240));
    let text = String::from_utf8_lossy(&shown).into_owned();
    assert!(
        text.contains("LAZARUS-EXIT=0"),
        "lazarus run failed:\n{text}"
    );
    let banner = text
        .lines()
        .find(|l| l.starts_with("sandbox:"))
        .unwrap_or("(no sandbox line)");
    eprintln!(
        "== edge attacks through run as uid {} ==\n{banner}",
        f.uid.unwrap_or_else(|| rustix::process::geteuid().as_raw())
    );
    let st = LocalStore::open(&f.sessions)
        .unwrap()
        .load(&SessionId::literal("edge"))
        .unwrap();
    let mut broke = judge_all(f, list, |id| st.tool_result_text(id).to_string(), &shown);
    // the person's shell ends its line unless something it read made it leave
    if broke.is_empty() && !(status.success() && text.contains("PERSON-DONE")) {
        broke.push(format!(
            "the person's shell did not finish ({status}):\n{text}"
        ));
    }
    let first = server.requests().into_iter().next().unwrap_or_default();
    (broke, first)
}

fn assert_held(broke: &[String]) {
    assert!(
        broke.is_empty(),
        "attacks that broke through the session's edges:\n{}",
        broke.join("\n")
    );
}

fn edges_through_run(uid: Option<u32>) {
    let f = EdgeFixture::new(uid, None);
    let (broke, _) = run_on_terminal(&f, &edge_attacks(&f), &[]);
    assert_held(&broke);
    // row 7: read-only means read-only, for the file tools too; they are not even offered
    let f = EdgeFixture::new(uid, None);
    let (broke, first) = run_on_terminal(&f, &read_only_attacks(&f), &["--sandbox read-only"]);
    let offered: Vec<String> = first["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(offered.contains(&"shell".to_string()), "{offered:?}");
    for w in ["write_file", "edit_file"] {
        assert!(
            !offered.iter().any(|o| o == w),
            "{w} is offered under --sandbox read-only: {offered:?}"
        );
    }
    assert_held(&broke);
}

#[test]
fn every_edge_attack_holds_through_run_for_this_user() {
    if in_ci() && !is_root() {
        panic!("CI runs the attack set as root; this run is not root");
    }
    edges_through_run(None);
}

#[test]
fn every_edge_attack_holds_through_run_for_an_unprivileged_user() {
    if !is_root() {
        assert!(!in_ci(), "CI must be root to switch user (setpriv)");
        eprintln!("skipped: not root; the other test is the unprivileged run");
        return;
    }
    edges_through_run(Some(NOBODY));
}
