//! `lazarus acp --wrap -- AGENT`: the durable proxy, driven by the official ACP client library
//! (the `agent-client-protocol` crate's client side) over the real binary's stdio, in front of
//! a real ACP agent — `lazarus acp` itself (the real Gemini CLI and OpenCode are driven by
//! scripts/capture-real/acp_wrap.py).
//!
//! * The wrapped agent killed with SIGKILL inside a shell call: the proxy starts it again,
//!   takes the session back, shows the call `failed` and in doubt, and the editor's prompt
//!   goes on to its answer — the call never runs twice.
//! * The same with an agent that forgets its sessions when it restarts: it gets a new session
//!   and the conversation the proxy recorded.
//! * The proxy itself killed with its agent: a new proxy and `session/load`: the history comes
//!   back, the call the journal left open is shown in doubt, the next prompt goes on.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    InitializeRequest, LoadSessionRequest, NewSessionRequest, PromptRequest, SessionId,
    SessionUpdate, StopReason, ToolCallStatus,
};
use agent_client_protocol::{AcpAgent, AcpAgentConfig};
use serde_json::Value;

#[macro_use]
mod acp_common;
use acp_common::{Seen, lines, model, said, statuses, text};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

/// The proxy (journal in `dir/proxy`) in front of `lazarus acp` (sessions in `dir/sessions`;
/// with `forgetful`, a shell that deletes them first: an agent that loses its sessions when
/// it restarts).
fn proxy(dir: &Path, model: &str, forgetful: bool) -> AcpAgent {
    let sessions = dir.join("sessions");
    let inner = [
        BIN,
        "acp",
        "--session-dir",
        sessions.to_str().unwrap(),
        "--base-url",
        model,
        "--model",
        "m",
    ];
    let mut args: Vec<String> = vec![
        "acp".into(),
        "--wrap".into(),
        "--session-dir".into(),
        dir.join("proxy").display().to_string(),
        "--".into(),
    ];
    if forgetful {
        args.extend([
            "sh".into(),
            "-c".into(),
            format!("rm -rf '{}'; exec \"$0\" \"$@\"", sessions.display()),
        ]);
    }
    args.extend(inner.iter().map(|s| s.to_string()));
    AcpAgent::new(
        AcpAgentConfig::new(BIN)
            .args(args)
            .env("OPENAI_API_KEY", "test")
            .env("XDG_CONFIG_HOME", dir.join("config").to_str().unwrap())
            .env("XDG_STATE_HOME", dir.join("state").to_str().unwrap()),
    )
}

/// Processes whose command line contains every needle and none of `not`: (pid, parent).
fn processes(needles: &[&str], not: &[&str]) -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid: i32 = stat[stat.rfind(')')? + 2..]
                .split(' ')
                .nth(1)?
                .parse()
                .ok()?;
            (cmd.starts_with(BIN)
                && needles.iter().all(|n| cmd.contains(n))
                && !not.iter().any(|n| cmd.contains(n)))
            .then_some((pid, ppid))
        })
        .collect()
}

/// The topmost of the processes found (not a child of another one found).
fn topmost(found: &[(i32, i32)]) -> Option<i32> {
    found
        .iter()
        .find(|(_, ppid)| !found.iter().any(|(p, _)| p == ppid))
        .map(|(p, _)| *p)
}

/// The wrapped `lazarus acp` (not the proxy, not its reaper, not a call's processes).
fn inner_agent(dir: &Path) -> Option<i32> {
    let sessions = format!("--session-dir {} ", dir.join("sessions").display());
    topmost(&processes(&[BIN, " acp ", &sessions], &["--wrap"]))
}

/// The proxy (its reaper shares its command line and is its child).
fn the_proxy(dir: &Path) -> Option<i32> {
    let journal = dir.join("proxy").display().to_string();
    topmost(&processes(&[BIN, "--wrap", &journal], &[]))
}

fn kill(pid: i32) {
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
}

struct Sandbox {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    ws: PathBuf,
    effect: PathBuf,
}

fn sandbox() -> Sandbox {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    Sandbox {
        effect: ws.join("effect"),
        _tmp: tmp,
        dir,
        ws,
    }
}

/// The records of the proxy's journal (one session), as JSON.
fn journal(dir: &Path) -> Vec<Value> {
    let files: Vec<PathBuf> = std::fs::read_dir(dir.join("proxy"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(files.len(), 1, "one journal: {files:?}");
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn verify_journal(dir: &Path) {
    let o = std::process::Command::new(BIN)
        .args(["sessions", "list", "--json", "--session-dir"])
        .arg(dir.join("proxy"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let list: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(list.len(), 1, "{out}");
    let id = list[0]["id"].as_str().expect("a proxy session").to_string();
    assert_eq!(list[0]["meta"]["host"], "acp-proxy", "{out}");
    let o = std::process::Command::new(BIN)
        .args(["sessions", "verify", &id, "--session-dir"])
        .arg(dir.join("proxy"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Waits for the call to have run once.
async fn ran(effect: &Path) {
    let t0 = Instant::now();
    while lines(effect) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "the call never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The proxy in front of `lazarus acp`, the wrapped agent killed inside the call: the turn
/// goes on to the model's answer, the call shown in doubt, run once. With `forgetful`, the
/// agent lost the session: it got a new one and the recorded conversation.
fn killed_mid_tool(forgetful: bool) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt.block_on(model(
        "The call was cut off; I will check the file before running anything again.",
        30,
    ));
    let url = model.base_url();
    let sb = sandbox();
    let seen: Seen = Arc::default();
    let (dir, ws, effect) = (sb.dir.clone(), sb.ws.clone(), sb.effect.clone());
    let stop = rt
        .block_on(async {
            client!(seen)
                .connect_with(proxy(&dir, &url, forgetful), async move |cx| {
                    cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                        .block_task()
                        .await?;
                    let s = cx
                        .send_request(NewSessionRequest::new(ws.clone()))
                        .block_task()
                        .await?;
                    let prompt = cx.send_request(PromptRequest::new(
                        s.session_id.clone(),
                        text("append a line"),
                    ));
                    ran(&effect).await;
                    let pid = inner_agent(&dir).expect("the wrapped lazarus acp runs");
                    kill(pid);
                    // the same prompt's answer: the turn went on in the agent started again
                    let r = prompt.block_task().await?;
                    assert_ne!(inner_agent(&dir), Some(pid), "a new agent");
                    Ok(r.stop_reason)
                })
                .await
        })
        .expect("the editor's connection survives the agent's death");
    assert_eq!(stop, StopReason::EndTurn);
    let c1 = statuses(&seen, "c1");
    assert!(
        c1.iter().any(|(s, c)| *s == ToolCallStatus::Failed
            && c.contains("Cut off")
            && c.contains("signal 9")),
        "the call shown cut off: {c1:?}"
    );
    let all = said(&seen);
    let name = if forgetful { "sh" } else { "lazarus" };
    assert!(
        all.contains(&format!(
            "Lazarus: the agent ({name}) killed by signal 9 (SIGKILL) and was started again"
        )),
        "{all}"
    );
    if forgetful {
        assert!(all.contains("it could not load this session"), "{all}");
    } else {
        assert!(all.contains("it has this session back"), "{all}");
    }
    assert!(
        all.contains("will check the file"),
        "the model's answer: {all}"
    );
    assert_eq!(lines(&sb.effect), 1, "the side effect happened once");
    // the model was told which call is in doubt (and, when the agent lost it, the story)
    let asked: Vec<String> = model.requests().iter().map(|r| r.to_string()).collect();
    let told = asked
        .iter()
        .find(|b| b.contains("interrupted (the agent process stopped"))
        .expect("the resume message reached the model");
    assert!(told.contains("echo ran >> effect"), "{told}");
    assert!(told.contains("effect is unknown"), "{told}");
    if forgetful {
        assert!(told.contains("The conversation so far"), "{told}");
        assert!(told.contains("User: append a line"), "{told}");
    }
    // the journal: the call announced, closed in doubt; a valid session
    let records = journal(&sb.dir);
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "host_call_intent" && r["data"]["call_id"] == "c1")
    );
    assert!(records.iter().any(|r| {
        r["kind"] == "host_call_outcome"
            && r["data"]["result"]
                .as_str()
                .is_some_and(|t| t.starts_with("in doubt"))
    }));
    verify_journal(&sb.dir);
    rt.block_on(model.shutdown());
}

#[test]
fn the_wrapped_agent_killed_mid_tool_comes_back_and_the_turn_goes_on() {
    killed_mid_tool(false);
}

#[test]
fn an_agent_that_lost_the_session_gets_the_recorded_conversation() {
    killed_mid_tool(true);
}

#[test]
fn a_new_proxy_loads_the_session_the_agent_closes_its_cut_off_call() {
    proxy_killed(false);
}

#[test]
fn a_new_proxy_loads_a_session_the_agent_lost_from_its_journal() {
    proxy_killed(true);
}

/// The proxy and its agent killed together inside a call; a new proxy, `session/load`, the
/// next prompt. `lazarus acp` loads the session itself and closes its call in doubt; an
/// agent that lost it (`forgetful`) gets a new one, the editor the journal's replay with the
/// call closed in doubt by the proxy.
fn proxy_killed(forgetful: bool) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt.block_on(model(
        "The call was cut off; I will check the file before running anything again.",
        30,
    ));
    let url = model.base_url();
    let sb = sandbox();
    let seen: Seen = Arc::default();
    let (dir, ws, effect) = (sb.dir.clone(), sb.ws.clone(), sb.effect.clone());
    let got: Arc<Mutex<Option<SessionId>>> = Arc::default();
    let got1 = got.clone();
    // the proxy and its agent killed together, inside the call
    let first = rt.block_on(async {
        client!(seen)
            .connect_with(proxy(&dir, &url, forgetful), async move |cx| {
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                let s = cx
                    .send_request(NewSessionRequest::new(ws.clone()))
                    .block_task()
                    .await?;
                *got1.lock().unwrap() = Some(s.session_id.clone());
                let prompt =
                    cx.send_request(PromptRequest::new(s.session_id, text("append a line")));
                ran(&effect).await;
                kill(the_proxy(&dir).expect("the proxy runs"));
                assert!(prompt.block_task().await.is_err());
                Ok(())
            })
            .await
    });
    assert!(first.is_err(), "the proxy was killed");
    let sid = got.lock().unwrap().clone().unwrap();
    let t0 = Instant::now();
    while inner_agent(&sb.dir).is_some() {
        if t0.elapsed() > Duration::from_secs(10) {
            let ps = std::process::Command::new("ps")
                .args(["-ef", "--forest"])
                .output()
                .unwrap();
            panic!(
                "the agent did not die with its proxy:\n{}",
                String::from_utf8_lossy(&ps.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    // a new proxy: the editor loads the session, then goes on
    let seen: Seen = Arc::default();
    let (dir, ws) = (sb.dir.clone(), sb.ws.clone());
    let load_seen = seen.clone();
    let stop = rt
        .block_on(async {
            client!(seen)
                .connect_with(proxy(&dir, &url, forgetful), async move |cx| {
                    cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                        .block_task()
                        .await?;
                    cx.send_request(LoadSessionRequest::new(sid.clone(), ws.clone()))
                        .block_task()
                        .await?;
                    let history = load_seen.lock().unwrap().clone();
                    assert!(
                        history
                            .iter()
                            .any(|u| matches!(u, SessionUpdate::UserMessageChunk(_))),
                        "the history is back: {history:?}"
                    );
                    let r = cx
                        .send_request(PromptRequest::new(sid.clone(), text("go on")))
                        .block_task()
                        .await?;
                    Ok(r.stop_reason)
                })
                .await
        })
        .expect("the second connection");
    assert_eq!(stop, StopReason::EndTurn);
    let c1 = statuses(&seen, "c1");
    assert_eq!(
        c1.last().map(|(s, _)| *s),
        Some(ToolCallStatus::Failed),
        "{c1:?}"
    );
    let all = said(&seen);
    if forgetful {
        // the journal's replay, the call closed by the proxy, the agent given the story
        assert!(
            c1.iter()
                .any(|(s, c)| *s == ToolCallStatus::Failed
                    && c.contains("before this proxy started")),
            "the proxy's own word on the cut-off call: {c1:?}"
        );
        assert!(all.contains("1 tool call was cut off"), "{all}");
        assert!(all.contains("it could not load this session"), "{all}");
    } else {
        // the agent's own replay closed it in doubt; the journal took its word
        assert!(
            c1.iter()
                .any(|(s, c)| *s == ToolCallStatus::Failed && c.contains("cut off by a crash")),
            "{c1:?}"
        );
    }
    assert!(all.contains("will check the file"), "{all}");
    assert_eq!(lines(&sb.effect), 1, "the side effect happened once");
    if forgetful {
        let asked: Vec<String> = model.requests().iter().map(|r| r.to_string()).collect();
        assert!(
            asked
                .iter()
                .any(|b| b.contains("interrupted (the agent process stopped")
                    && b.contains("The conversation so far")
                    && b.contains("go on")),
            "the resume message and the story went in front of the next prompt"
        );
    }
    let records = journal(&sb.dir);
    let outcome = records
        .iter()
        .find(|r| r["kind"] == "host_call_outcome" && r["data"]["call_id"] == "c1")
        .expect("the call's end is journaled");
    let result = outcome["data"]["result"].as_str().unwrap();
    if forgetful {
        assert!(result.starts_with("in doubt"), "{result}");
    } else {
        assert!(
            result.starts_with("failed: This call was cut off"),
            "{result}"
        );
    }
    verify_journal(&sb.dir);
    rt.block_on(model.shutdown());
}

#[test]
fn wrap_needs_an_agent_and_refuses_run_flags() {
    let o = std::process::Command::new(BIN)
        .args(["acp", "--wrap"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--wrap needs the agent's command"));
    let o = std::process::Command::new(BIN)
        .args(["acp", "--wrap", "--model", "m", "--", "gemini", "--acp"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--model does not apply with --wrap"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = std::process::Command::new(BIN)
        .args(["acp", "--", "gemini", "--acp"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("without --wrap"));
}
