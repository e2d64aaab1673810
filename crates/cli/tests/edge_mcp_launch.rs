//! The session's edges at an MCP server's launch (rows 1, 3 and 6 of the issue "the
//! sandbox's edges" for the programs lazarus starts besides shell calls): a stdio server,
//! unconfined or with `sandbox = true`, started by `lazarus run` and by `lazarus serve` from
//! a terminal with descriptors left open (`exec 7>>log 8<dir 9<>/dev/tty`), gets no
//! controlling terminal and no descriptor but 0, 1 and 2. The server here is a shell that
//! records what it has and then fails to start (so it needs no MCP SDK and runs as uid
//! 65534 too); its start-up error ends the command. As root and as uid 65534.

mod edge_common;

use std::time::Duration;

use edge_common::*;
use lazarus_testkit::pty::Pty;
use serde_json::json;

/// What the server found, written where it may write (the workspace): its descriptors, and
/// a mark for each way out that worked.
const PROBE: &str = "ls /proc/self/fd > NAME.fds 2>&1; if (: >/dev/tty) 2>/dev/null; then touch NAME.tty; fi; if (echo leaked >&7) 2>/dev/null; then touch NAME.fd7; fi; if ls /proc/self/fd/8/ >/dev/null 2>&1; then touch NAME.fd8; fi; if [ -t 9 ] 2>/dev/null; then touch NAME.fd9; fi; exit 1";

fn probe_server(p: &Person, name: &str, sandbox: bool) -> std::path::PathBuf {
    let f = p.ws.join(format!("{name}.mcp.json"));
    std::fs::write(
        &f,
        json!({"mcpServers": {name: {
            "command": "sh",
            "args": ["-c", PROBE.replace("NAME", name)],
            "sandbox": sandbox,
        }}})
        .to_string(),
    )
    .unwrap();
    p.own(&f);
    f
}

fn launch(uid: Option<u32>, serve: bool, sandbox: bool) {
    let p = Person::new(uid);
    let name = if sandbox { "boxed" } else { "plain" };
    let config = probe_server(&p, name, sandbox).display().to_string();
    let log = p.outside.join("ci.log");
    std::fs::write(&log, "ci log\n").unwrap();
    let ws = p.ws.display().to_string();
    let sessions = p.sessions.display().to_string();
    let args: Vec<&str> = if serve {
        vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--session-dir",
            &sessions,
            "--workspace-root",
            &ws,
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--mcp-config",
            &config,
        ]
    } else {
        vec![
            "run",
            "--session-dir",
            &sessions,
            "--workspace",
            &ws,
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--mcp-config",
            &config,
            "-p",
            "hello",
        ]
    };
    let line = format!(
        "exec 7>>{log} 8<{outside} 9<>/dev/tty; LAZARUS_TOKEN=test-token-0123456789 {cmd}; echo LAZARUS-EXIT=$?",
        log = q(&log),
        outside = q(&p.outside),
        cmd = p.line(&args),
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c").arg(line).current_dir(&p.ws);
    let (_, shown) = Pty::spawn(&mut cmd).finish(Duration::from_secs(120));
    let shown = String::from_utf8_lossy(&shown).into_owned();
    assert!(
        shown.contains("LAZARUS-EXIT=1") || shown.contains("LAZARUS-EXIT=2"),
        "the probe fails to start, and so does the command: {shown}"
    );
    let fds = std::fs::read_to_string(p.ws.join(format!("{name}.fds")))
        .unwrap_or_else(|e| panic!("the server never ran ({e}): {shown}"));
    let mut fds: Vec<u32> = fds
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    fds.sort_unstable();
    // 0, 1, 2, and the directory `ls` itself opened
    assert_eq!(
        fds,
        [0, 1, 2, 3],
        "{name} (serve: {serve}) inherited descriptors"
    );
    for mark in ["tty", "fd7", "fd8", "fd9"] {
        assert!(
            !p.ws.join(format!("{name}.{mark}")).exists(),
            "{name} (serve: {serve}) reached {mark}"
        );
    }
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "ci log\n");
    eprintln!(
        "MCP server launch, {} {name}, uid {:?}: fds {fds:?}; no terminal, no inherited descriptor: held",
        if serve { "serve" } else { "run" },
        uid
    );
}

#[test]
fn an_mcp_server_gets_no_terminal_and_no_inherited_descriptor() {
    for serve in [false, true] {
        for sandbox in [false, true] {
            launch(None, serve, sandbox);
        }
    }
}

#[test]
fn an_mcp_server_gets_no_terminal_and_no_inherited_descriptor_unprivileged() {
    if can_switch_user() {
        for serve in [false, true] {
            for sandbox in [false, true] {
                launch(Some(NOBODY), serve, sandbox);
            }
        }
    }
}
