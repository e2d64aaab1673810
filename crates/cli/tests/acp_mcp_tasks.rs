//! An editor's `session/cancel` (ACP) while an MCP call runs: `lazarus acp`, driven by the
//! official ACP client library, with the FastMCP tasks server (PyPI pins,
//! `scripts/mcp-servers/setup.sh`) given as the session's Streamable HTTP MCP server. The
//! cancel reaches the runner's cancellation token:
//!
//! * a call the server made a task gets `tasks/cancel` for that task id, and its outcome is
//!   what the server then reports (`cancelled`); the task's effect never lands;
//! * an ordinary call is told to stop (its request is cancelled) and gets a `cancelled`
//!   outcome; its effect never lands.
//!
//! Either way the turn stops `cancelled`, and there is one `tools/call`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, InitializeRequest, McpServer, McpServerHttp,
    NewSessionRequest, PromptRequest, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, StopReason, TextContent,
};
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Client};
use lazarus_session::{LocalStore, SessionId, Store, StoredRecord};
use lazarus_testkit::mcp_servers;
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

/// How long the tools work before their effect lands: the cancel comes well before.
const WORK_SECS: u64 = 4;

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn requests(log: &Path, method: &str) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["method"] == method)
        .collect()
}

fn effects(counter: &Path, line: &str) -> usize {
    std::fs::read_to_string(counter)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == line)
        .count()
}

/// What one cancelled turn left.
struct Cancelled {
    _tmp: tempfile::TempDir,
    stop: StopReason,
    records: Vec<StoredRecord>,
    log: PathBuf,
    counter: PathBuf,
    /// When the call was seen running (the cancel followed at once).
    seen: Instant,
}

impl Cancelled {
    fn of_kind(&self, kind: &str) -> Vec<&StoredRecord> {
        self.records.iter().filter(|r| r.kind == kind).collect()
    }

    /// Waits past the time the tool's effect would have landed had it not been stopped.
    fn wait_past_the_effect(&self) {
        let until = self.seen + Duration::from_secs(WORK_SECS + 2);
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A prompt through `lazarus acp` whose model calls `tool` (with `tag`) on the tasks server;
/// once `running` says the call runs (from the session's records and the server's request
/// log), the editor sends `session/cancel`.
fn cancel_through_acp(
    tool: &str,
    tag: &str,
    running: fn(&[StoredRecord], &Path) -> bool,
) -> Cancelled {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let (counter, log) = (dir.join("counter.txt"), dir.join("requests.log"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = Killed(
        Command::new(mcp_servers::tasks_python())
            .arg(mcp_servers::script("tasks_server.py"))
            .args(["http", &port.to_string()])
            .env("COUNTER_FILE", &counter)
            .env("REQUEST_LOG", &log)
            .env("POLL_MS", "200")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let until = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "the tasks server did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call(
                "c1",
                format!("mcp__tasks__{tool}"),
                json!({"tag": tag, "secs": WORK_SECS}),
            ))
            .when(When::LastUserContains { text: "go".into() }),
            Step::after_tool_result("c1", ScriptedResponse::text("stopped")).repeat(),
        ])))
        .unwrap();
    let agent = AcpAgent::new(
        AcpAgentConfig::new(BIN)
            .args([
                "acp",
                "--session-dir",
                dir.join("sessions").to_str().unwrap(),
                "--base-url",
                &model.base_url(),
                "--model",
                "m",
            ])
            .env("OPENAI_API_KEY", "test")
            .env("XDG_CONFIG_HOME", dir.join("config").to_str().unwrap())
            .env("XDG_STATE_HOME", dir.join("state").to_str().unwrap()),
    );
    let sessions = dir.join("sessions");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let log1 = log.clone();
    let (stop, session, seen) = rt
        .block_on(async {
            Client
                .v1()
                .on_receive_request(
                    async move |_r: RequestPermissionRequest, responder, _cx| {
                        responder.respond(RequestPermissionResponse::new(
                            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                                "allow_once",
                            )),
                        ))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .connect_with(agent, async move |cx| {
                    cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                        .block_task()
                        .await?;
                    let s = cx
                        .send_request(NewSessionRequest::new(ws.clone()).mcp_servers(vec![
                            McpServer::Http(McpServerHttp::new("tasks", url.clone())),
                        ]))
                        .block_task()
                        .await?;
                    let id = s.session_id.clone();
                    let prompt = cx.send_request(PromptRequest::new(
                        id.clone(),
                        vec![ContentBlock::Text(TextContent::new("go"))],
                    ));
                    // once the call runs, the editor cancels the turn
                    let store = LocalStore::open(&sessions).unwrap();
                    let sid = SessionId::parse(id.0.as_ref()).unwrap();
                    let t0 = Instant::now();
                    loop {
                        let recs = store.records(&sid, 0, usize::MAX).unwrap_or_default();
                        if running(&recs, &log1) {
                            break;
                        }
                        assert!(t0.elapsed() < Duration::from_secs(60), "the call never ran");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    let seen = Instant::now();
                    cx.send_notification(CancelNotification::new(id.clone()))?;
                    let r = prompt.block_task().await?;
                    Ok((r.stop_reason, id.0.to_string(), seen))
                })
                .await
        })
        .expect("the connection");
    rt.block_on(model.shutdown());
    let records = LocalStore::open(&dir.join("sessions"))
        .unwrap()
        .records(&SessionId::parse(&session).unwrap(), 0, usize::MAX)
        .unwrap();
    let out = Cancelled {
        _tmp: tmp,
        stop,
        records,
        log,
        counter,
        seen,
    };
    // the server lives on past the cancel: an effect not stopped would land now
    out.wait_past_the_effect();
    out
}

#[test]
fn an_editors_session_cancel_sends_tasks_cancel_for_the_running_task() {
    let c = cancel_through_acp("task_bump", "acp", |recs, _| {
        recs.iter().any(|r| r.kind == "tool_task")
    });
    assert_eq!(c.stop, StopReason::Cancelled);
    let task = c.of_kind("tool_task")[0].data["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let cancels: Vec<String> = requests(&c.log, "tasks/cancel")
        .iter()
        .map(|r| r["taskId"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(cancels, [task], "tasks/cancel for that task");
    let outcome = &c.of_kind("tool_outcome")[0].data;
    assert_eq!(outcome["status"], "cancelled", "{outcome}");
    assert_eq!(
        c.of_kind("tool_task_status").last().unwrap().data["status"],
        "cancelled",
        "the status the server reported after tasks/cancel"
    );
    assert_eq!(requests(&c.log, "tools/call").len(), 1);
    assert_eq!(
        effects(&c.counter, "task_bump acp"),
        0,
        "the cancelled task had its effect"
    );
}

#[test]
fn an_editors_session_cancel_stops_an_ordinary_call_with_a_cancelled_outcome() {
    let c = cancel_through_acp("plain_wait", "acp", |_, log| {
        requests(log, "tools/call")
            .iter()
            .any(|r| r["name"] == "plain_wait")
    });
    assert_eq!(c.stop, StopReason::Cancelled);
    assert!(
        c.of_kind("tool_task").is_empty(),
        "an ordinary tool is no task"
    );
    let outcome = &c
        .of_kind("tool_outcome")
        .first()
        .unwrap_or_else(|| panic!("no outcome for the stopped call: {:?}", c.records))
        .data;
    assert_eq!(outcome["status"], "cancelled", "{outcome}");
    assert_eq!(requests(&c.log, "tools/call").len(), 1);
    assert_eq!(
        effects(&c.counter, "plain_wait acp"),
        0,
        "the server was not told to stop"
    );
}
