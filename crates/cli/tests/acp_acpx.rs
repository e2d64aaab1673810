//! `lazarus acp` under a real third-party ACP client: `acpx` from npm
//! (`scripts/acp/setup.sh`), with `--agent "lazarus acp …"`, against the scripted model
//! server. A prompt's shell call (allowed by `--approve-all`) is cut off by SIGKILL of the
//! agent; the next prompt through acpx (which starts a new agent and loads its session)
//! finishes the turn: the call shown failed and in doubt, the receipt shown, the side effect
//! made once, the ledger whole.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lazarus_testkit::acp_clients;

mod acp_common;
use acp_common::{lines, model};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

/// `acpx` in `ws`, with its own home (its sessions and queue) and the pinned Node first.
fn acpx(dir: &Path, ws: &Path, agent: &str, args: &[&str]) -> Command {
    let mut c = Command::new(acp_clients::acpx());
    let path = format!(
        "{}:{}",
        acp_clients::node_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    c.args(["--agent", agent, "--ttl", "5"])
        .args(args)
        .current_dir(ws)
        .env("PATH", path)
        .env("HOME", dir.join("home"))
        .env("OPENAI_API_KEY", "test")
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .stdin(Stdio::null());
    c
}

/// Pids of the processes whose command line holds `needle` and starts with `prefix`.
fn pids(prefix: &str, needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (cmd.starts_with(prefix) && cmd.contains(needle)).then_some(pid)
        })
        .collect()
}

fn parent(pid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 2..];
            rest.split(' ').nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

fn kill9(pid: i32) {
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

#[test]
fn acpx_drives_lazarus_acp_through_a_kill_9_mid_tool() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt.block_on(model(
        "It was cut off; I checked the file and will not run it again.",
        60,
    ));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let ws: PathBuf = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let sessions = dir.join("sessions");
    let agent = format!(
        "{BIN} acp --session-dir {} --base-url {} --model m",
        sessions.display(),
        model.base_url()
    );
    let o = acpx(&dir, &ws, &agent, &["sessions", "new"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let mut first = acpx(
        &dir,
        &ws,
        &agent,
        &["--approve-all", "prompt", "append a line"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let t0 = Instant::now();
    while lines(&ws.join("effect")) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "the call never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    // the agent, not the processes its shell call forked (they share its command line)
    let all = pids(BIN, &sessions.display().to_string());
    let agents: Vec<i32> = all
        .iter()
        .copied()
        .filter(|p| !all.contains(&parent(*p)))
        .collect();
    assert_eq!(agents.len(), 1, "one lazarus acp: {agents:?} of {all:?}");
    kill9(agents[0]);
    let _ = first.wait();

    let second = acpx(&dir, &ws, &agent, &["--approve-all", "prompt", "go on"])
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&second.stdout),
        String::from_utf8_lossy(&second.stderr)
    );
    assert!(second.status.success(), "{out}");
    assert!(
        out.contains("interrupted before its result was recorded"),
        "{out}"
    );
    assert!(out.contains("1 in doubt"), "{out}");
    assert!(out.contains("will not run it again"), "{out}");
    assert_eq!(
        lines(&ws.join("effect")),
        1,
        "the side effect happened once"
    );
    // the session is a Lazarus session like any other
    let o = Command::new(BIN)
        .args(["sessions", "list", "--json", "--session-dir"])
        .arg(&sessions)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&o.stdout).to_string();
    let id = listed
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["id"].as_str().unwrap_or_default().to_string())
        .next()
        .expect("the ACP session is listed");
    let o = Command::new(BIN)
        .args(["sessions", "verify", &id, "--session-dir"])
        .arg(&sessions)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // acpx's queue owner and anything of ours left
    for p in pids("", &dir.display().to_string()) {
        kill9(p);
    }
    rt.block_on(model.shutdown());
}
