//! `lazarus acp` driven by the official ACP client library (the `agent-client-protocol`
//! crate's client side), over the real binary's stdio: a prompt whose shell call needs the
//! person's permission runs once; `lazarus acp` killed with SIGKILL inside the call, a new
//! one, `session/load` — the history comes back with the cut-off call `failed` and in doubt —
//! and the next prompt resumes it (receipt, model told) without running the call again.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    InitializeRequest, LoadSessionRequest, NewSessionRequest, PromptRequest, SessionNotification,
    SessionUpdate, StopReason, ToolCallStatus,
};
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Client};

#[macro_use]
mod acp_common;
use acp_common::{Seen, lines, model, said, statuses, text};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn agent(dir: &Path, model: &str) -> AcpAgent {
    AcpAgent::new(
        AcpAgentConfig::new(BIN)
            .args([
                "acp",
                "--session-dir",
                dir.join("sessions").to_str().unwrap(),
                "--base-url",
                model,
                "--model",
                "m",
            ])
            .env("OPENAI_API_KEY", "test")
            .env("XDG_CONFIG_HOME", dir.join("config").to_str().unwrap())
            .env("XDG_STATE_HOME", dir.join("state").to_str().unwrap()),
    )
}

/// The process of `lazarus acp` serving `dir`'s sessions.
fn agent_pid(dir: &Path) -> Option<i32> {
    let needle = dir.join("sessions").display().to_string();
    let all: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
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
            (cmd.starts_with(BIN) && cmd.contains(" acp ") && cmd.contains(&needle))
                .then_some((pid, ppid))
        })
        .collect();
    // the agent, not the processes its shell call forked (they share its command line)
    all.iter()
        .find(|(_, ppid)| !all.iter().any(|(p, _)| p == ppid))
        .map(|(p, _)| *p)
}

#[test]
fn an_acp_session_survives_kill_9_mid_tool_and_the_call_never_runs_twice() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt.block_on(model(
        "It was cut off; I checked the file and will not run it again.",
        30,
    ));
    let url = model.base_url();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let ws: PathBuf = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let effect = ws.join("effect");

    // first connection: a session, a prompt, the person allows the call; killed inside it
    let seen: Seen = Arc::default();
    let (ws1, dir1, effect1) = (ws.clone(), dir.clone(), effect.clone());
    let got: Arc<Mutex<Option<agent_client_protocol::v1::schema::SessionId>>> = Arc::default();
    let got1 = got.clone();
    let first = rt.block_on(async {
        client!(seen)
            .connect_with(agent(&dir1, &url), async move |cx| {
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                let s = cx
                    .send_request(NewSessionRequest::new(ws1.clone()))
                    .block_task()
                    .await?;
                let id = s.session_id.clone();
                *got1.lock().unwrap() = Some(id.clone());
                let prompt = cx.send_request(PromptRequest::new(id.clone(), text("append a line")));
                let t0 = Instant::now();
                while lines(&effect1) == 0 {
                    assert!(t0.elapsed() < Duration::from_secs(30), "the call never ran");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let pid = agent_pid(&dir1).expect("lazarus acp runs");
                rustix::process::kill_process(
                    rustix::process::Pid::from_raw(pid).unwrap(),
                    rustix::process::Signal::KILL,
                )
                .unwrap();
                // the prompt ends without an answer: the agent is gone
                assert!(prompt.block_task().await.is_err());
                Ok(())
            })
            .await
    });
    // the connection ends with the agent's death
    let err = first.expect_err("the agent was killed").to_string();
    assert!(err.contains("SIGKILL") || err.contains("signal"), "{err}");
    let session_id = got.lock().unwrap().clone().expect("a session was made");
    assert!(
        statuses(&seen, "c1")
            .iter()
            .any(|(s, _)| *s == ToolCallStatus::InProgress),
        "{:?}",
        seen.lock().unwrap()
    );

    // a new agent: session/load replays the history, the cut-off call failed and in doubt
    let seen: Seen = Arc::default();
    let s2 = seen.clone();
    let (ws2, id2) = (ws.clone(), session_id.clone());
    let seen_load = seen.clone();
    let stop = rt.block_on(async {
        Client
            .v1()
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    s2.lock().unwrap().push(n.update);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(agent(&dir, &url), async move |cx| {
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                cx.send_request(LoadSessionRequest::new(id2.clone(), ws2.clone()))
                    .block_task()
                    .await?;
                let replayed = seen_load.lock().unwrap().len();
                let history = seen_load.lock().unwrap().clone();
                assert!(
                    history.iter().any(|u| matches!(u, SessionUpdate::UserMessageChunk(_))),
                    "the prompt is replayed: {history:?}"
                );
                assert!(
                    history.iter().any(|u| matches!(u, SessionUpdate::ToolCall(t) if t.tool_call_id.0.as_ref() == "c1")),
                    "the call is replayed: {history:?}"
                );
                let last = history.iter().rev().find_map(|u| match u {
                    SessionUpdate::ToolCallUpdate(t) if t.tool_call_id.0.as_ref() == "c1" => {
                        t.fields.status
                    }
                    _ => None,
                });
                assert_eq!(last, Some(ToolCallStatus::Failed), "cut off: failed, never left in progress");
                assert!(format!("{history:?}").contains("cut off by a crash"), "{history:?}");
                assert!(replayed > 0);
                let r = cx
                    .send_request(PromptRequest::new(id2.clone(), text("go on")))
                    .block_task()
                    .await?;
                Ok(r.stop_reason)
            })
            .await
            .expect("second connection")
    });
    assert_eq!(stop, StopReason::EndTurn);
    let all = said(&seen);
    assert!(all.contains("1 in doubt"), "the receipt is shown: {all}");
    assert!(all.contains("will not run it again"), "{all}");
    let closed = statuses(&seen, "c1");
    assert!(
        closed
            .iter()
            .any(|(s, c)| *s == ToolCallStatus::Failed
                && c.contains("interrupted before its result")),
        "the call closed in doubt: {closed:?}"
    );
    assert_eq!(lines(&effect), 1, "the side effect happened once");
    let o = std::process::Command::new(BIN)
        .args(["sessions", "verify", session_id.0.as_ref(), "--session-dir"])
        .arg(dir.join("sessions"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    rt.block_on(model.shutdown());
}
