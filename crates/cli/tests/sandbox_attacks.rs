//! The shell sandbox against a hostile model: every attack of `attack_common::list` runs as a
//! real shell call of `lazarus run` (a scripted model asks for them all), with credentials
//! planted in lazarus's own environment, in another process, in `$HOME` behind symbolic
//! links, in another session's ledger and in a gateway token file. Each attack prints
//! `held` or `BROKE`; a test fails on any `BROKE`.
//!
//! Run as root (CI is root: these tests fail there if they are not) and as an unprivileged
//! user (uid 65534 through `setpriv`, which only root can do; a non-root run of the suite
//! takes that path itself).

mod attack_common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use attack_common::list::attacks;
use attack_common::{Attack, Fixture};
use lazarus_session::{LocalStore, SessionId, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");
/// The process bounds the attacks run under: as root, 400 (enforced by the PID namespace's
/// `pid_max`, whose floor is 301); unprivileged, 64 (below that floor: `RLIMIT_NPROC` in the
/// user namespace). The banner printed with the verdicts names the mechanism.
const ROOT_MAX_PROCESSES: u32 = 400;
const USER_MAX_PROCESSES: u32 = 64;
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

fn script(list: &[Attack]) -> Script {
    let mut r = ScriptedResponse::default();
    for (i, a) in list.iter().enumerate() {
        r = r.with_call(format!("a{i}"), "shell", json!({ "command": a.command }));
    }
    Script::new([
        Step::reply(r).when(When::LastUserContains {
            text: "attack".into(),
        }),
        Step::after_tool_result(
            format!("a{}", list.len() - 1),
            ScriptedResponse::text("done"),
        )
        .repeat(),
    ])
}

/// Runs every attack through `lazarus run` as `uid` (`None`: this process's user) and
/// returns the verdicts, printed as they are judged.
fn run_attacks(tag: &str, uid: Option<u32>, max: u32) -> Vec<(String, Result<(), String>)> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let f = Fixture::new(tag, uid);
    let list = attacks(&f, max);
    let server = rt.block_on(ScriptedServer::start(script(&list))).unwrap();
    // an unprivileged user cannot run the binary where the build put it (under /root, say)
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = bin_dir.path().join("lazarus");
    std::fs::copy(BIN, &bin).unwrap();
    std::fs::set_permissions(bin_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = match uid {
        Some(u) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={u}"))
                .arg(format!("--regid={u}"))
                .args(["--clear-groups", "--"])
                .arg(&bin);
            c
        }
        None => Command::new(&bin),
    };
    cmd.args(["run", "--session", "attacker", "-p", "attack"])
        .arg("--sandbox-max-processes")
        .arg(max.to_string())
        .arg("--session-dir")
        .arg(&f.sessions)
        .arg("--workspace")
        .arg(&f.ws)
        .args(["--base-url", &server.base_url(), "--shell-timeout", "300s"])
        .args(["--system-prompt", &f.canaries.argv])
        .envs(f.secret_env())
        .env("LAZARUS_CONFIG", f.state.join("no-config.toml"))
        .env_remove("LAZARUS_SANDBOX_TEST_UNSUPPORTED")
        .current_dir(&f.ws)
        .stdin(Stdio::null());
    let out = cmd
        .output()
        .expect("lazarus run (as the attacked user) starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let banner = stderr
        .lines()
        .find(|l| l.starts_with("sandbox:"))
        .unwrap_or("(no sandbox line)");
    eprintln!(
        "== attacks as {} ==\n{banner}",
        match uid {
            Some(u) => format!("uid {u}"),
            None => format!("uid {}", rustix::process::geteuid().as_raw()),
        }
    );
    let st = LocalStore::open(&f.sessions)
        .unwrap()
        .load(&SessionId::literal("attacker"))
        .unwrap();
    let mut verdicts = Vec::new();
    for (i, a) in list.iter().enumerate() {
        let text = st.tool_result_text(&format!("a{i}")).to_string();
        let v = (a.judge)(&f, &text);
        match &v {
            Ok(()) => eprintln!("attack {}: held", a.name),
            Err(why) => eprintln!("attack {}: BROKE ({why})", a.name),
        }
        verdicts.push((a.name.to_string(), v));
    }
    verdicts
}

fn assert_held(verdicts: &[(String, Result<(), String>)]) {
    let broke: Vec<String> = verdicts
        .iter()
        .filter_map(|(n, v)| v.as_ref().err().map(|w| format!("{n}: {w}")))
        .collect();
    assert!(
        broke.is_empty(),
        "attacks that broke the sandbox:\n{}",
        broke.join("\n")
    );
}

#[test]
fn every_attack_holds_for_this_user() {
    if in_ci() && !is_root() {
        panic!(
            "CI runs the attack set as root (the default in most containers); this run is not root"
        );
    }
    let max = if is_root() {
        ROOT_MAX_PROCESSES
    } else {
        USER_MAX_PROCESSES
    };
    assert_held(&run_attacks("self", None, max));
}

#[test]
fn every_attack_holds_for_an_unprivileged_user() {
    if !is_root() {
        if in_ci() {
            panic!("CI must be root to run the attack set as an unprivileged user (setpriv)");
        }
        eprintln!(
            "skipped: not root, so this user is the unprivileged one and `every_attack_holds_for_this_user` covers it"
        );
        return;
    }
    assert_held(&run_attacks("nobody", Some(NOBODY), USER_MAX_PROCESSES));
}
