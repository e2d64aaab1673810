//! `lazarus boot-resume --inject lazarus=URL` against the real gateway: a session cut off by
//! a SIGKILLed `lazarus run` is resumed exactly once, even when boot-resume runs twice.

mod serve_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use lazarus_session::SessionId;
use lazarus_session::{LocalStore, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};
use serve_common::*;

#[test]
fn boot_resume_injects_once_even_when_run_twice() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call(
                "c1",
                "shell",
                json!({"command": "echo ran >> side.txt; sleep 5"}),
            ))
            .when(When::LastUserContains {
                text: "use the tool".into(),
            })
            .repeat(),
            Step::after_tool_result("c1", ScriptedResponse::text("Finished.")).repeat(),
        ])))
        .unwrap();
    let dir = tempdir();
    let sessions = dir.path().join("sessions");
    let g = Gateway::start(&mut serve_cmd(dir.path(), &server.base_url(), &[]));

    // a session cut off inside a shell call by a SIGKILLed `lazarus run`
    let ws = dir.path().join("workspaces").join("br");
    std::fs::create_dir_all(&ws).unwrap();
    let mut run = Command::new(BIN)
        .args(["run", "--json", "--session", "br", "--message-id", "m1"])
        .args(["-p", "please use the tool", "--max-tokens", "64"])
        .arg("--session-dir")
        .arg(&sessions)
        .arg("--workspace")
        .arg(&ws)
        .args(["--base-url", &server.base_url()])
        .env("OPENAI_API_KEY", "test")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for line in BufReader::new(run.stdout.take().unwrap()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap_or(Value::Null);
        if v["kind"] == "tool_start" {
            std::thread::sleep(Duration::from_millis(100));
            break;
        }
    }
    let pid = rustix::process::Pid::from_child(&run);
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    run.wait().unwrap();

    let boot_resume = || {
        Command::new(BIN)
            .args(["boot-resume", "--window", "0", "--json"])
            .arg("--source")
            .arg(format!("lazarus:{}", sessions.display()))
            .arg("--inject")
            .arg(format!("lazarus={}", g.url))
            .env("LAZARUS_TOKEN", TOKEN)
            .env("XDG_STATE_HOME", dir.path().join("xdg"))
            .output()
            .unwrap()
    };
    let first = boot_resume();
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&first.stdout),
        String::from_utf8_lossy(&first.stderr)
    );
    let second = boot_resume();
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    wait_session(&g.url, "br", Duration::from_secs(20), |v| {
        v["status"] == "idle" && v["turns"] == 2
    });
    // and once more after it finished: nothing new
    let third = boot_resume();
    assert_eq!(third.status.code(), Some(0));

    let store = LocalStore::open(&sessions).unwrap();
    let recs = store.records(&SessionId::literal("br"), 0, 1000).unwrap();
    let controls = recs.iter().filter(|r| r.kind == "control").count();
    let receipts: Vec<_> = recs.iter().filter(|r| r.kind == "resume").collect();
    assert_eq!(controls, 1, "one resume event recorded: {recs:#?}");
    assert_eq!(receipts.len(), 1, "one resume: {receipts:#?}");
    assert_eq!(receipts[0].data["trigger"], "event");
    assert_eq!(receipts[0].data["calls_in_doubt"], 1);
    let side = std::fs::read_to_string(ws.join("side.txt")).unwrap();
    assert_eq!(side.lines().count(), 1, "the shell call never ran twice");
    let st = store.load(&SessionId::literal("br")).unwrap();
    assert_eq!(st.pending_inputs.len(), 0);
    assert!(st.input_ids.contains_key("m1"));
    drop(g);
    rt.block_on(server.shutdown());
}
