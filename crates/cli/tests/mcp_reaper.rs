//! MCP servers die with their runner: `lazarus run` is killed with SIGKILL while an MCP tool
//! works silently, and within a second nothing of any of its servers is alive — one started
//! through `sh -c` (which forks it), one through `npx -c` (npm's exec: node, which forks a
//! shell, which forks the server), and a sandboxed one — and the silent tool never finishes
//! its work after the runner is gone. The servers are the Python SDK's, made to outlive a
//! gone client (`LINGER_SECS`, as servers holding background work do) so only a kill ends
//! them (`scripts/mcp-servers/setup.sh`).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lazarus_testkit::mcp_servers;
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

/// The most the servers may outlive their runner (the bound).
const GONE_WITHIN: Duration = Duration::from_secs(1);

/// `(pid, parent pid, state, command name)` of every process.
fn processes() -> Vec<(i32, i32, char, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid …; comm may hold spaces and parentheses
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let rest: Vec<&str> = stat[close + 2..].split(' ').collect();
        let state = rest[0].chars().next().unwrap_or('?');
        let ppid = rest[1].parse().unwrap_or(0);
        out.push((pid, ppid, state, comm));
    }
    out
}

/// Every process below `root`, with its command name.
fn descendants(root: i32) -> Vec<(i32, String)> {
    let all = processes();
    let mut found: Vec<(i32, String)> = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (pid, ppid, _, comm) in &all {
            if *ppid == p && !found.iter().any(|(f, _)| f == pid) {
                found.push((*pid, comm.clone()));
                frontier.push(*pid);
            }
        }
    }
    found
}

/// Which of `pids` still live (a zombie is dead: it only waits to be reaped).
fn alive(pids: &BTreeSet<i32>) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|(pid, _, state, _)| pids.contains(pid) && *state != 'Z' && *state != 'X')
        .map(|(pid, ..)| pid)
        .collect()
}

fn toml_str(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

#[test]
fn no_process_of_any_server_outlives_a_killed_runner_by_a_second() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let counter = ws.join("counter.txt");
    let python = mcp_servers::python();
    let script = mcp_servers::script("counter_server.py");
    let npm_dir = mcp_servers::cache().join("servers");
    assert!(npm_dir.is_dir(), "run scripts/mcp-servers/setup.sh first");
    // sh -c forks the server (`; exit` keeps sh from exec'ing it); npx runs npm's exec,
    // node, which forks a shell that forks the server; the third is sandboxed (its own PID
    // namespace). Each would live 60 s after its client is gone.
    let line = format!(
        "'{}' '{}' stdio; exit $?",
        python.display(),
        script.display()
    );
    let config = tmp.path().join("config.toml");
    let server = |name: &str, command: &str, args: String, counter: &Path, extra: &str| {
        format!(
            "[mcp_servers.{name}]\ncommand = {command:?}\nargs = [{args}]\nenv = {{ COUNTER_FILE = {}, LINGER_SECS = \"60\" }}\n{extra}\n",
            toml_str(counter)
        )
    };
    std::fs::write(
        &config,
        server("counter", "sh", format!("\"-c\", {line:?}"), &counter, "")
            + &server(
                "vianpx",
                "npx",
                format!("\"--offline\", \"-c\", {line:?}"),
                &ws.join("npx.txt"),
                &format!("cwd = {}", toml_str(&npm_dir)),
            )
            + &server(
                "boxed",
                "sh",
                format!("\"-c\", {line:?}"),
                &ws.join("boxed.txt"),
                "sandbox = true",
            ),
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // the model calls the silent tool: it works 3 s, then writes its effect
    let model = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::tool_call("c1", "mcp__counter__work", json!({"secs": 3.0})),
        )])))
        .unwrap();
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--json",
            "--session",
            "s",
            "--model",
            "m",
            "-p",
            "go",
        ])
        .arg("--session-dir")
        .arg(tmp.path().join("sessions"))
        .arg("--workspace")
        .arg(&ws)
        .args(["--base-url", &model.base_url()])
        .env("LAZARUS_CONFIG", &config)
        .env("OPENAI_API_KEY", "test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let runner = child.id() as i32;
    // the call has started (its tool_start is durable): the server works on it now
    let stdout = child.stdout.take().unwrap();
    let mut started = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if line.contains("\"kind\":\"tool_start\"") {
            started = true;
            break;
        }
    }
    assert!(started, "the call never started");
    let started_at = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    let below = descendants(runner);
    let names: Vec<&str> = below.iter().map(|(_, c)| c.as_str()).collect();
    // the servers and what they started: each reaper, the shells, npm's node, the three
    // Pythons, and the sandbox's leader and init
    assert_eq!(
        names.iter().filter(|n| n.starts_with("python")).count(),
        3,
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| *n == "node" || n.starts_with("npm")),
        "npx runs node: {names:?}"
    );
    let pids: BTreeSet<i32> = below.iter().map(|(p, _)| *p).collect();
    child.kill().unwrap(); // SIGKILL
    let t0 = Instant::now();
    let _ = child.wait();
    let mut left = alive(&pids);
    while !left.is_empty() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
        left = alive(&pids);
    }
    let took = t0.elapsed();
    let survivors: Vec<String> = below
        .iter()
        .filter(|(p, _)| left.contains(p))
        .map(|(p, c)| format!("{p} {c}"))
        .collect();
    assert!(
        left.is_empty() && took <= GONE_WITHIN,
        "processes of the servers outlived the runner by {took:?}: {survivors:?} (of {names:?})"
    );
    eprintln!(
        "{} processes below the runner, all gone {} ms after its SIGKILL",
        pids.len(),
        took.as_millis()
    );
    // the silent tool's work would land 3 s after it started: it never does
    let wait = Duration::from_millis(3800).saturating_sub(started_at.elapsed());
    std::thread::sleep(wait);
    let effects = std::fs::read_to_string(&counter).unwrap_or_default();
    assert!(
        !effects.contains("work"),
        "the tool finished its work after its runner was killed: {effects:?}"
    );
    rt.block_on(model.shutdown());
}
