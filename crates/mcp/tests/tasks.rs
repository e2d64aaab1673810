//! MCP tasks against the real FastMCP server with `fastmcp-tasks` (PyPI, installed by
//! `scripts/mcp-servers/setup.sh`): the client speaks 2026-07-28 with the Tasks extension,
//! follows a task to its end over stdio and Streamable HTTP, asks a new connection for a task
//! an earlier one made, names a task the server does not know, and gives `tool_timeout_sec`
//! its meaning for tasks (a wait; a cancel only when configured).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lazarus_agent::process::ProcessGroupRef;
use lazarus_agent::tools::{
    Reattached, TaskHandle, TaskStatus, Tool, ToolContext, ToolHooks, ToolSource, ToolStatus,
};
use lazarus_mcp::config::{Server, ServerConfig};
use lazarus_mcp::server::{CallEnd, McpServer};
use lazarus_mcp::tool::McpSource;
use lazarus_session::state::TaskInfo;
use lazarus_testkit::mcp_servers;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Hooks that keep what the tool reported.
#[derive(Default)]
struct Seen {
    tasks: Vec<TaskHandle>,
    statuses: Vec<TaskStatus>,
    reattached: Vec<Reattached>,
}

impl ToolHooks for Seen {
    fn started(&mut self, _: Option<ProcessGroupRef>) -> Result<(), String> {
        Ok(())
    }
    fn task_created(&mut self, task: &TaskHandle) -> Result<(), String> {
        self.tasks.push(task.clone());
        Ok(())
    }
    fn task_status(&mut self, _: &str, status: TaskStatus, _: Option<&str>) -> Result<(), String> {
        self.statuses.push(status);
        Ok(())
    }
    fn task_reattached(&mut self, seen: Reattached) {
        self.reattached.push(seen);
    }
}

fn config(cfg: ServerConfig) -> Server {
    ServerConfig {
        enabled: true,
        ..cfg
    }
    .resolve("tasks", "test")
    .expect("a valid configuration")
}

fn stdio_server(counter: &Path) -> Server {
    config(ServerConfig {
        command: Some(mcp_servers::tasks_python().display().to_string()),
        args: vec![
            mcp_servers::script("tasks_server.py").display().to_string(),
            "stdio".into(),
        ],
        env: BTreeMap::from([
            ("COUNTER_FILE".to_string(), counter.display().to_string()),
            ("POLL_MS".to_string(), "100".to_string()),
        ]),
        ..ServerConfig::default()
    })
}

/// The server over Streamable HTTP, killed when dropped.
struct Http {
    child: std::process::Child,
    port: u16,
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http(counter: &Path, log: &Path) -> Http {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(mcp_servers::tasks_python())
        .arg(mcp_servers::script("tasks_server.py"))
        .args(["http", &port.to_string()])
        .env("COUNTER_FILE", counter)
        .env("REQUEST_LOG", log)
        .env("POLL_MS", "100")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..1200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Http { child, port };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the tasks server did not listen");
}

fn http_server(port: u16, extra: impl FnOnce(&mut ServerConfig)) -> Server {
    let mut cfg = ServerConfig {
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        ..ServerConfig::default()
    };
    extra(&mut cfg);
    config(cfg)
}

fn tool(server: Arc<McpServer>, name: &str) -> Arc<dyn Tool> {
    McpSource::new(vec![server])
        .unwrap()
        .tools()
        .into_iter()
        .find(|t| t.name() == format!("mcp__tasks__{name}"))
        .unwrap()
}

fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn logged(log: &Path, method: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["method"] == method)
        .count()
}

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("counter.txt");
    (dir, counter)
}

#[tokio::test]
async fn over_stdio_the_server_speaks_2026_07_28_and_a_task_is_followed_to_its_end() {
    let (dir, counter) = tmp();
    let server = McpServer::start(stdio_server(&counter), dir.path(), None)
        .await
        .expect("starts");
    assert_eq!(server.info.protocol_version, "2026-07-28");
    assert!(server.info.tasks, "both declared the Tasks extension");
    let server = Arc::new(server);
    let t = tool(server.clone(), "task_bump");
    // the intent's basis says a cut-off call must never be sent again
    let basis = t.rerun().basis.unwrap();
    assert_eq!(basis["tasks"], json!(true));
    assert!(!t.rerun().idempotent);
    let ctx = ToolContext::new(dir.path());
    let mut seen = Seen::default();
    let out = t
        .run(&ctx, &json!({"tag": "s1", "secs": 0.5}), &mut seen)
        .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.text);
    assert_eq!(out.text, "task bumped s1");
    assert_eq!(seen.tasks.len(), 1);
    let handle = &seen.tasks[0];
    assert_eq!(
        (handle.status, handle.poll_interval_ms, handle.ttl_ms),
        (TaskStatus::Working, Some(100), Some(900_000))
    );
    assert_eq!(handle.fingerprint, server.config.fingerprint());
    assert_eq!(seen.statuses, [TaskStatus::Completed]);
    assert_eq!(lines(&counter), ["task_bump s1"]);
}

#[tokio::test]
async fn a_new_connection_asks_for_a_task_an_earlier_one_made_and_never_calls_again() {
    let (dir, counter) = tmp();
    let log = dir.path().join("requests.log");
    let h = http(&counter, &log);
    // the first client makes the task, then goes away
    let first = McpServer::start(http_server(h.port, |_| {}), dir.path(), None)
        .await
        .expect("starts");
    let mut args = serde_json::Map::new();
    args.insert("tag".into(), json!("n1"));
    args.insert("secs".into(), json!(1.0));
    let end = first
        .call(
            "task_bump",
            args,
            Some("s/c1"),
            None,
            &mut |_| {},
            &CancellationToken::new(),
        )
        .await;
    let CallEnd::Task(task) = end else {
        panic!("no task: {end:?}")
    };
    drop(first);
    // a brand-new client asks for it by id
    let second = Arc::new(
        McpServer::start(http_server(h.port, |_| {}), dir.path(), None)
            .await
            .expect("starts"),
    );
    let t = tool(second.clone(), "task_bump");
    let info = TaskInfo {
        seq: 6,
        server: "tasks".into(),
        fingerprint: second.config.fingerprint(),
        task_id: task.task_id.clone(),
        ttl_ms: task.ttl_ms,
        poll_interval_ms: task.poll_interval_ms,
        created_at: lazarus_ledger::clock::now_ts(),
        status: TaskStatus::Working,
        status_seq: 6,
        message: None,
    };
    let ctx = ToolContext::new(dir.path());
    let mut seen = Seen::default();
    let out = t
        .reattach(&ctx, &info, &mut seen)
        .expect("MCP tools reattach")
        .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.text);
    assert_eq!(out.text, "task bumped n1");
    assert_eq!(seen.reattached, [Reattached::StillWorking]);
    assert_eq!(seen.statuses, [TaskStatus::Completed]);
    assert_eq!(logged(&log, "tools/call"), 1, "called again");
    assert_eq!(lines(&counter), ["task_bump n1"]);
    // a task the server does not know: lost, in doubt, with the server's own words
    let unknown = TaskInfo {
        task_id: "no-such-task".into(),
        created_at: "2026-01-01T00:00:00.000Z".into(),
        ..info.clone()
    };
    let mut seen = Seen::default();
    let out = t.reattach(&ctx, &unknown, &mut seen).unwrap().await;
    assert_eq!(out.status, ToolStatus::InDoubt, "{}", out.text);
    let [Reattached::Lost(why)] = seen.reattached.as_slice() else {
        panic!("{:?}", seen.reattached)
    };
    assert!(
        why.contains("no-such-task") && why.contains("not found"),
        "{why}"
    );
    assert!(why.contains("past its TTL"), "{why}");
    // another program under the name cannot know it: lost before anything is asked
    let other = TaskInfo {
        fingerprint: "sha256:another".into(),
        ..info
    };
    let gets = logged(&log, "tasks/get");
    let mut seen = Seen::default();
    let out = t.reattach(&ctx, &other, &mut seen).unwrap().await;
    assert_eq!(out.status, ToolStatus::InDoubt);
    assert!(out.text.contains("another program"), "{}", out.text);
    assert_eq!(logged(&log, "tasks/get"), gets);
}

#[tokio::test]
async fn tool_timeout_sec_is_a_wait_for_a_task_and_a_cancel_only_when_configured() {
    let (dir, counter) = tmp();
    let log = dir.path().join("requests.log");
    let h = http(&counter, &log);
    for cancel in [false, true] {
        let tag = if cancel { "cancelled" } else { "left" };
        let server = Arc::new(
            McpServer::start(
                http_server(h.port, |c| {
                    c.tool_timeout_sec = Some(1);
                    c.cancel_task_on_timeout = cancel;
                }),
                dir.path(),
                None,
            )
            .await
            .expect("starts"),
        );
        let t = tool(server, "task_bump");
        let ctx = ToolContext::new(dir.path());
        let mut seen = Seen::default();
        let out = t
            .run(&ctx, &json!({"tag": tag, "secs": 2.5}), &mut seen)
            .await;
        assert_eq!(out.status, ToolStatus::Timeout, "{}", out.text);
        assert_eq!(seen.tasks.len(), 1);
        if cancel {
            assert!(out.text.contains("was cancelled"), "{}", out.text);
            assert_eq!(logged(&log, "tasks/cancel"), 1);
        } else {
            assert!(out.text.contains("not cancelled"), "{}", out.text);
            assert_eq!(logged(&log, "tasks/cancel"), 0);
        }
    }
    // the task left running lands its effect; the cancelled one never does
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(lines(&counter), ["task_bump left"]);
}

#[tokio::test]
async fn a_stop_cancels_the_task_and_records_what_the_server_says() {
    let (dir, counter) = tmp();
    let log = dir.path().join("requests.log");
    let h = http(&counter, &log);
    let server = Arc::new(
        McpServer::start(http_server(h.port, |_| {}), dir.path(), None)
            .await
            .expect("starts"),
    );
    let t = tool(server, "task_bump");
    let ctx = ToolContext::new(dir.path());
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        cancel.cancel();
    });
    let mut seen = Seen::default();
    let out = t
        .run(&ctx, &json!({"tag": "stop", "secs": 5}), &mut seen)
        .await;
    assert_eq!(out.status, ToolStatus::Cancelled, "{}", out.text);
    assert!(
        out.settled,
        "the server was told and answered: recorded, not left"
    );
    assert_eq!(seen.statuses.last(), Some(&TaskStatus::Cancelled));
    assert_eq!(logged(&log, "tasks/cancel"), 1);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        lines(&counter).is_empty(),
        "the cancelled task had its effect"
    );
}
