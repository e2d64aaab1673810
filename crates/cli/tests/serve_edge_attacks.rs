//! The session's edges against a hostile model, through `lazarus serve`: the tool-call rows
//! of `attack_common::edges` (the terminal the gateway was started from, its configuration
//! in a session's workspace, git, descriptors, `--sandbox read-only`) as one session's calls,
//! made by an API message, as root and as uid 65534. The gateway runs on a real terminal
//! from a shell that left descriptors open; once it stopped, the person's shell reads the
//! terminal and runs what it got, and git runs in the session's workspace. Every attack
//! prints `held` or `BROKE`; a test fails on any `BROKE`.

mod attack_common;
mod serve_common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use attack_common::edges::{
    EdgeAttack, EdgeFixture, calls, edge_attacks, judge_all, q, read_only_attacks,
};
use lazarus_session::{LocalStore, SessionId, Store};
use lazarus_testkit::pty::Pty;
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::json;
use serve_common::{TOKEN, call, wait_session};

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

fn binary_for(uid: Option<u32>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("lazarus");
    std::fs::copy(serve_common::BIN, &bin).unwrap();
    if uid.is_some() {
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (dir, bin)
}

fn as_user(uid: Option<u32>) -> String {
    match uid {
        Some(u) => format!("setpriv --reuid={u} --regid={u} --clear-groups -- "),
        None => String::new(),
    }
}

/// Runs `list` as the calls of session `attacker` of a `lazarus serve` started on a
/// terminal; the verdicts' failures and the model's first request.
fn serve_on_terminal(
    f: &EdgeFixture,
    list: &[EdgeAttack],
    extra: &[&str],
) -> (Vec<String>, serde_json::Value) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let script = Script::new([
        Step::reply(calls(list)).when(When::LastUserContains {
            text: "attack".into(),
        }),
        Step::after_tool_result(
            format!("e{}", list.len() - 1),
            ScriptedResponse::text("done"),
        )
        .repeat(),
    ]);
    let server = rt.block_on(ScriptedServer::start(script)).unwrap();
    let (_bin_dir, bin) = binary_for(f.uid);
    let files = tempfile::tempdir().unwrap();
    let (out, err, pidfile) = (
        files.path().join("serve.out"),
        files.path().join("serve.err"),
        files.path().join("serve.pid"),
    );
    let serve = format!(
        "{user}{bin} serve --listen 127.0.0.1:0 --max-tokens 64 --session-dir {sessions} --workspace-root {root} --token-file {token} --base-url {url} --mcp-config {mcp} {extra} >{out} 2>{err} & echo $! >{pid}; wait $!; echo SERVE-EXIT=$?",
        user = as_user(f.uid),
        bin = q(&bin),
        sessions = q(&f.sessions),
        root = q(f.root()),
        token = q(&f.state.join("gateway.token")),
        url = server.base_url(),
        mcp = q(&f.mcp_config),
        extra = extra.join(" "),
        out = q(&out),
        err = q(&err),
        pid = q(&pidfile),
    );
    let line = format!(
        "{open}; {serve}; exec 7>&- 8<&- 9<&-; {after}",
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
        .env_remove("NOTIFY_SOCKET")
        .env_remove("LAZARUS_SANDBOX_TEST_UNSUPPORTED")
        .env("LAZARUS_TOKEN", TOKEN)
        .envs(f.env());
    let pty = Pty::spawn(&mut cmd);
    // the gateway's address, from its standard output
    let t0 = Instant::now();
    let url = loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if let Some(u) = text
            .lines()
            .find_map(|l| l.strip_prefix("lazarus gateway listening on "))
        {
            break u.trim().to_string();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the gateway did not listen: {}\n{}",
            std::fs::read_to_string(&err).unwrap_or_default(),
            String::from_utf8_lossy(&pty.shown())
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let errors = std::fs::read_to_string(&err).unwrap_or_default();
    let banner = errors
        .lines()
        .find(|l| l.starts_with("sandbox:"))
        .unwrap_or("(no sandbox line)")
        .to_string();
    let (st, v) = call(
        &url,
        "POST",
        "/v1/sessions",
        Some(json!({"id": "attacker"})),
    );
    assert_eq!(st, 201, "{v}");
    let (st, v) = call(
        &url,
        "POST",
        "/v1/sessions/attacker/messages",
        Some(json!({"text": "attack", "message_id": "a1"})),
    );
    assert!(st == 200 || st == 202, "{st} {v}");
    wait_session(&url, "attacker", Duration::from_secs(180), |v| {
        v["status"] == "idle" && v["turns"].as_u64() >= Some(2)
    });
    // the operator stops the gateway; their shell then reads the terminal
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let (status, shown) = pty.finish(Duration::from_secs(120));
    let text = String::from_utf8_lossy(&shown).into_owned();
    assert!(text.contains("SERVE-EXIT=0"), "the gateway failed:\n{text}");
    eprintln!(
        "== edge attacks through serve as uid {} ==\n{banner}",
        f.uid.unwrap_or_else(|| rustix::process::geteuid().as_raw())
    );
    let st = LocalStore::open(&f.sessions)
        .unwrap()
        .load(&SessionId::literal("attacker"))
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

fn edges_through_serve(uid: Option<u32>) {
    let f = EdgeFixture::new(uid, Some("attacker"));
    let (broke, _) = serve_on_terminal(&f, &edge_attacks(&f), &[]);
    assert_held(&broke);
    let f = EdgeFixture::new(uid, Some("attacker"));
    let (broke, first) = serve_on_terminal(&f, &read_only_attacks(&f), &["--sandbox read-only"]);
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
fn every_edge_attack_holds_through_serve_for_this_user() {
    if in_ci() && !is_root() {
        panic!("CI runs the attack set as root; this run is not root");
    }
    edges_through_serve(None);
}

#[test]
fn every_edge_attack_holds_through_serve_for_an_unprivileged_user() {
    if !is_root() {
        assert!(!in_ci(), "CI must be root to switch user (setpriv)");
        eprintln!("skipped: not root; the other test is the unprivileged run");
        return;
    }
    edges_through_serve(Some(NOBODY));
}
