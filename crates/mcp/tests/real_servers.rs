//! The MCP client against real servers, no mocks: the reference servers from npm
//! (`server-filesystem`, `server-everything`, `server-memory`), a server written with the
//! official Python SDK (`counter_server.py`, over stdio and Streamable HTTP), and a hand-written
//! server that breaks the protocol on purpose (`hostile_server.py`). Installed by
//! `scripts/mcp-servers/setup.sh`; without them these tests fail, naming the script.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lazarus_agent::tools::{CallRef, ToolContext, ToolHooks, ToolSource, ToolStatus};
use lazarus_mcp::config::{Server, ServerConfig};
use lazarus_mcp::server::{CallEnd, McpServer, RESULT_BYTES_MAX};
use lazarus_mcp::tool::McpSource;
use lazarus_testkit::mcp_servers;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

fn stdio(name: &str, command: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
    let cfg = ServerConfig {
        command: Some(command.display().to_string()),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        enabled: true,
        ..ServerConfig::default()
    };
    cfg.resolve(name, "test").expect("a valid configuration")
}

fn counter(dir: &Path) -> (Server, PathBuf) {
    let file = dir.join("counter.txt");
    let script = mcp_servers::script("counter_server.py");
    let s = stdio(
        "counter",
        &mcp_servers::python(),
        &[script.to_str().unwrap(), "stdio"],
        &[("COUNTER_FILE", file.to_str().unwrap())],
    );
    (s, file)
}

fn hostile(mode: &str, env: &[(&str, &str)]) -> Server {
    let script = mcp_servers::script("hostile_server.py");
    stdio(
        "hostile",
        &mcp_servers::python(),
        &[script.to_str().unwrap(), mode],
        env,
    )
}

fn args(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("arguments must be an object"),
    }
}

async fn call(server: &McpServer, tool: &str, a: Value) -> CallEnd {
    server
        .call(
            tool,
            args(a),
            Some("s/c1"),
            None,
            &mut |_: &str| {},
            &CancellationToken::new(),
        )
        .await
}

fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A free local port (bound, then released for the server to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something listens on `port` (at most 20 s).
fn wait_listening(port: u16) {
    for _ in 0..400 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens on port {port} after 20 s");
}

/// A child process killed when the test ends.
struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn filesystem_server_lists_annotated_tools_and_writes_files() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let entry = mcp_servers::npm_server("filesystem");
    let s = stdio(
        "files",
        &mcp_servers::node(),
        &[entry.to_str().unwrap(), ws.to_str().unwrap()],
        &[],
    );
    let server = McpServer::start(s, &ws, None).await.expect("starts");
    assert_eq!(server.info.name, "secure-filesystem-server");
    // it knows only `initialize`: the 2026-07-28 probe falls back, and no tasks
    assert_eq!(server.info.protocol_version, "2025-11-25");
    assert!(!server.info.tasks);
    let tools = server.tools_now();
    let write = tools
        .iter()
        .find(|t| t.name == "write_file")
        .expect("write_file listed");
    assert_eq!(write.annotations["idempotentHint"], json!(true));
    assert_eq!(write.annotations["destructiveHint"], json!(true));
    let read = tools.iter().find(|t| t.name == "read_text_file").unwrap();
    assert_eq!(read.annotations["readOnlyHint"], json!(true));
    let target = ws.join("hello.txt");
    let end = call(
        &server,
        "write_file",
        json!({"path": target, "content": "hello from lazarus"}),
    )
    .await;
    assert_answered(&end);
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "hello from lazarus"
    );
    let end = call(&server, "read_text_file", json!({"path": target})).await;
    let CallEnd::Answered { text, is_error } = end else {
        panic!("{end:?}")
    };
    assert!(!is_error);
    assert!(text.contains("hello from lazarus"), "{text}");
    // outside the allowed directory: the tool's own error, as an error result
    let end = call(&server, "read_text_file", json!({"path": "/etc/hostname"})).await;
    assert!(
        matches!(end, CallEnd::Answered { is_error: true, .. }),
        "{end:?}"
    );
}

#[tokio::test]
async fn everything_server_reports_progress_and_structured_results() {
    let dir = tempfile::tempdir().unwrap();
    let entry = mcp_servers::npm_server("everything");
    let s = stdio(
        "everything",
        &mcp_servers::node(),
        &[entry.to_str().unwrap(), "stdio"],
        &[],
    );
    let server = McpServer::start(s, dir.path(), None).await.expect("starts");
    let names: Vec<String> = server.tools_now().into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"echo".to_string()), "{names:?}");
    let mut progress = Vec::new();
    let end = server
        .call(
            "trigger-long-running-operation",
            args(json!({"duration": 1, "steps": 3})),
            Some("s/c9"),
            None,
            &mut |t: &str| progress.push(t.to_string()),
            &CancellationToken::new(),
        )
        .await;
    assert_answered(&end);
    // the last notification may race the answer; those that came are the server's, in order
    assert!(!progress.is_empty(), "no progress seen");
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p, &format!("{}/3", i + 1), "{progress:?}");
    }
    let end = call(
        &server,
        "get-structured-content",
        json!({"location": "New York"}),
    )
    .await;
    let CallEnd::Answered { text, .. } = end else {
        panic!("{end:?}")
    };
    assert!(text.contains("temperature"), "{text}");
}

#[tokio::test]
async fn everything_server_over_streamable_http() {
    let port = free_port();
    let entry = mcp_servers::npm_server("everything");
    let _server_process = Child(
        std::process::Command::new(mcp_servers::node())
            .arg(&entry)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(port);
    let cfg = ServerConfig {
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        http_headers: [("X-Lazarus-Test".to_string(), "1".to_string())].into(),
        enabled: true,
        ..ServerConfig::default()
    };
    let s = cfg.resolve("everything", "test").unwrap();
    let server = McpServer::start(s, Path::new("/"), None)
        .await
        .expect("starts over HTTP");
    let end = call(&server, "echo", json!({"message": "over http"})).await;
    let CallEnd::Answered { text, is_error } = end else {
        panic!("{end:?}")
    };
    assert!(!is_error);
    assert!(text.contains("over http"), "{text}");
}

#[tokio::test]
async fn memory_server_keeps_what_it_was_told() {
    let dir = tempfile::tempdir().unwrap();
    let entry = mcp_servers::npm_server("memory");
    let store = dir.path().join("memory.jsonl");
    let s = stdio(
        "memory",
        &mcp_servers::node(),
        &[entry.to_str().unwrap()],
        &[("MEMORY_FILE_PATH", store.to_str().unwrap())],
    );
    let server = McpServer::start(s, dir.path(), None).await.expect("starts");
    let end = call(
        &server,
        "create_entities",
        json!({"entities": [{"name": "lazarus", "entityType": "project", "observations": ["survives kill -9"]}]}),
    )
    .await;
    assert_answered(&end);
    let end = call(&server, "read_graph", json!({})).await;
    let CallEnd::Answered { text, .. } = end else {
        panic!("{end:?}")
    };
    assert!(text.contains("survives kill -9"), "{text}");
}

#[tokio::test]
async fn python_sdk_server_gets_the_idempotency_key_and_reports_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (s, file) = counter(dir.path());
    let server = McpServer::start(s, dir.path(), None).await.expect("starts");
    assert_eq!(
        (server.info.name.as_str(), server.info.version.as_str()),
        ("lazarus-counter", "1.2.3")
    );
    let end = call(&server, "bump", json!({})).await;
    assert_answered(&end);
    assert_eq!(lines(&file), ["bump s/c1"]);
    // a tool that raises: an error result, not a lost call
    let end = call(&server, "fail", json!({})).await;
    let CallEnd::Answered { text, is_error } = end else {
        panic!("{end:?}")
    };
    assert!(is_error, "{text}");
    assert!(text.contains("fail"), "{text}");
    // an unknown tool: the server's own refusal, nothing ran
    let end = call(&server, "no_such_tool", json!({})).await;
    assert!(
        matches!(
            &end,
            CallEnd::Refused(_) | CallEnd::Answered { is_error: true, .. }
        ),
        "{end:?}"
    );
    assert_eq!(lines(&file).len(), 1);
}

#[tokio::test]
async fn python_sdk_server_over_streamable_http() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("counter.txt");
    let port = free_port();
    let _server_process = Child(
        std::process::Command::new(mcp_servers::python())
            .arg(mcp_servers::script("counter_server.py"))
            .args(["http", &port.to_string()])
            .env("COUNTER_FILE", &file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(port);
    let cfg = ServerConfig {
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        bearer_token_env_var: Some("PATH".into()), // any set variable: sent as a bearer token
        enabled: true,
        ..ServerConfig::default()
    };
    let s = cfg.resolve("counter", "test").unwrap();
    let server = McpServer::start(s, dir.path(), None)
        .await
        .expect("starts over HTTP");
    let mut progress = Vec::new();
    let end = server
        .call(
            "slow",
            args(json!({"steps": 3})),
            Some("s/c2"),
            None,
            &mut |t: &str| progress.push(t.to_string()),
            &CancellationToken::new(),
        )
        .await;
    assert_answered(&end);
    assert_eq!(progress, ["step 1 (1/3)", "step 2 (2/3)", "step 3 (3/3)"]);
    let end = call(&server, "set_flag", json!({})).await;
    assert!(matches!(end, CallEnd::Answered { .. }), "{end:?}");
    assert_eq!(lines(&file), ["set_flag s/c1"]);
}

#[tokio::test]
async fn a_changed_tool_list_is_listed_again() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = counter(dir.path());
    let server = Arc::new(McpServer::start(s, dir.path(), None).await.expect("starts"));
    let source = McpSource::new(vec![server.clone()]).unwrap();
    let before: Vec<String> = source
        .tools()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    assert!(!before.contains(&"mcp__counter__late".to_string()));
    let end = call(&server, "add_tool", json!({})).await;
    assert!(matches!(end, CallEnd::Answered { .. }), "{end:?}");
    // the source's watcher lists again after the notification
    let mut after = Vec::new();
    for _ in 0..100 {
        after = source
            .tools()
            .iter()
            .map(|t| t.name().to_string())
            .collect();
        if after.contains(&"mcp__counter__late".to_string()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        after.contains(&"mcp__counter__late".to_string()),
        "{after:?}"
    );
}

#[tokio::test]
async fn a_result_over_the_limit_is_cut_and_the_cut_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = counter(dir.path());
    let server = McpServer::start(s, dir.path(), None).await.expect("starts");
    let end = call(&server, "big", json!({"kib": 3000})).await;
    let CallEnd::Answered { text, .. } = end else {
        panic!("{end:?}")
    };
    assert!(text.len() < RESULT_BYTES_MAX + 200, "{}", text.len());
    assert!(
        text.ends_with(&format!(
            "[Lazarus: the result was {} bytes; cut to the first {RESULT_BYTES_MAX}]",
            3000 * 1024
        )),
        "{}",
        &text[text.len() - 120..]
    );
}

#[tokio::test]
async fn a_hanging_call_times_out_and_is_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("hostile.log");
    let mut s = hostile("hang-call", &[("HOSTILE_LOG", log.to_str().unwrap())]);
    s.tool_timeout = Duration::from_secs(1);
    let server = McpServer::start(s, dir.path(), None).await.expect("starts");
    let end = call(&server, "work", json!({})).await;
    assert_eq!(end, CallEnd::TimedOut);
    let mut seen = String::new();
    for _ in 0..100 {
        seen = std::fs::read_to_string(&log).unwrap_or_default();
        if seen.contains("cancelled") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        seen.lines().any(|l| l.starts_with("cancelled")),
        "no notifications/cancelled reached the server: {seen}"
    );
}

#[tokio::test]
async fn an_abandoned_call_is_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("hostile.log");
    let s = hostile("hang-call", &[("HOSTILE_LOG", log.to_str().unwrap())]);
    let server = McpServer::start(s, dir.path(), None).await.expect("starts");
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c2.cancel();
    });
    let end = server
        .call(
            "work",
            Map::new(),
            Some("s/c1"),
            None,
            &mut |_: &str| {},
            &cancel,
        )
        .await;
    assert_eq!(end, CallEnd::Abandoned);
    for _ in 0..100 {
        if std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("cancelled")
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no notifications/cancelled reached the server");
}

#[tokio::test]
async fn garbage_and_unknown_ids_on_stdout_do_not_confuse_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = McpServer::start(hostile("garbage", &[]), dir.path(), None)
        .await
        .expect("starts despite the garbage");
    let end = call(&server, "work", json!({})).await;
    assert_eq!(
        end,
        CallEnd::Answered {
            text: "worked".into(),
            is_error: false
        }
    );
}

#[tokio::test]
async fn an_answer_to_an_id_never_sent_fails_the_start_naming_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let e = McpServer::start(hostile("wrong-id", &[]), dir.path(), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"hostile\"") && e.contains("987654"), "{e}");
}

#[tokio::test]
async fn a_server_that_dies_mid_call_leaves_the_call_lost_with_its_words() {
    let dir = tempfile::tempdir().unwrap();
    let server = McpServer::start(hostile("die-in-call", &[]), dir.path(), None)
        .await
        .expect("starts");
    let end = call(&server, "work", json!({})).await;
    assert!(matches!(end, CallEnd::Lost(_)), "{end:?}");
}

/// The hostile server's `work` tool as the runner sees it, and a context for call `s/c1`.
async fn hostile_tool(
    dir: &Path,
    mode: &str,
    timeout: Option<Duration>,
) -> (Arc<dyn lazarus_agent::tools::Tool>, ToolContext) {
    let mut s = hostile(mode, &[]);
    if let Some(t) = timeout {
        s.tool_timeout = t;
    }
    let server = Arc::new(McpServer::start(s, dir, None).await.expect("starts"));
    let tool = McpSource::new(vec![server])
        .unwrap()
        .tools()
        .into_iter()
        .find(|t| t.name() == "mcp__hostile__work")
        .unwrap();
    let mut ctx = ToolContext::new(dir);
    ctx.call = Some(CallRef {
        session: "s".into(),
        call_id: "c1".into(),
        idempotency_key: "s/c1".into(),
        traceparent: None,
    });
    (tool, ctx)
}

#[tokio::test]
async fn a_tool_whose_server_dies_is_in_doubt_never_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, ctx) = hostile_tool(dir.path(), "die-in-call", None).await;
    let out = tool.run(&ctx, &json!({}), &mut NoHooks).await;
    assert_eq!(out.status, ToolStatus::InDoubt, "{}", out.text);
    assert!(out.text.contains("\"hostile\""), "{}", out.text);
    assert!(out.text.contains("effect is unknown"), "{}", out.text);
}

/// A call past `tool_timeout_sec` ends `timeout` (not `error`), the model told its effect is
/// unknown; a call abandoned (Ctrl-C) ends `cancelled`.
#[tokio::test]
async fn a_hanging_tool_ends_timeout_and_an_abandoned_one_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, ctx) = hostile_tool(dir.path(), "hang-call", Some(Duration::from_secs(1))).await;
    let out = tool.run(&ctx, &json!({}), &mut NoHooks).await;
    assert_eq!(out.status, ToolStatus::Timeout, "{}", out.text);
    assert!(out.text.contains("effect is unknown"), "{}", out.text);

    let (tool, ctx) = hostile_tool(dir.path(), "hang-call", None).await;
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let out = tool.run(&ctx, &json!({}), &mut NoHooks).await;
    assert_eq!(out.status, ToolStatus::Cancelled, "{}", out.text);
}

/// The call was answered, without `isError`.
fn assert_answered(end: &CallEnd) {
    assert!(
        matches!(
            end,
            CallEnd::Answered {
                is_error: false,
                ..
            }
        ),
        "{end:?}"
    );
}

struct NoHooks;
impl ToolHooks for NoHooks {
    fn started(
        &mut self,
        _: Option<lazarus_agent::process::ProcessGroupRef>,
    ) -> Result<(), String> {
        Ok(())
    }
}

#[tokio::test]
async fn a_line_over_the_transport_limit_is_dropped_and_the_call_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = hostile("huge-line", &[("HOSTILE_MIB", "40")]);
    s.tool_timeout = Duration::from_secs(3);
    let server = McpServer::start(s, dir.path(), None).await.expect("starts");
    let end = call(&server, "work", json!({})).await;
    assert_eq!(end, CallEnd::TimedOut);
}

#[tokio::test]
async fn a_big_line_within_the_transport_limit_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let server = McpServer::start(hostile("huge-line", &[]), dir.path(), None)
        .await
        .expect("starts");
    let CallEnd::Answered { text, .. } = call(&server, "work", json!({})).await else {
        panic!("no answer")
    };
    assert!(
        text.contains("[Lazarus: the result was 4194304 bytes"),
        "cut not said"
    );
}

#[tokio::test]
async fn startup_failures_name_the_server_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    // exits at once: its stderr is in the message
    let e = McpServer::start(hostile("exit-at-start", &[]), dir.path(), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"hostile\""), "{e}");
    assert!(e.contains("cannot find my configuration file"), "{e}");
    // never answers initialize: the startup timeout
    let mut s = hostile("silent", &[]);
    s.startup_timeout = Duration::from_secs(1);
    let e = McpServer::start(s, dir.path(), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("startup_timeout_sec"), "{e}");
    // a program that does not exist
    let s = stdio("ghost", Path::new("/nonexistent/mcp-server"), &[], &[]);
    let e = McpServer::start(s, dir.path(), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"ghost\"") && e.contains("/nonexistent/mcp-server"),
        "{e}"
    );
    // nothing listens at the URL
    let cfg = ServerConfig {
        url: Some(format!("http://127.0.0.1:{}/mcp", free_port())),
        enabled: true,
        ..ServerConfig::default()
    };
    let e = McpServer::start(cfg.resolve("remote", "test").unwrap(), dir.path(), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"remote\""), "{e}");
}

#[tokio::test]
async fn a_tool_without_a_schema_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = McpServer::start(hostile("no-schema", &[]), dir.path(), None)
        .await
        .map(|s| format!("started with tools {:?}", s.tools_now()))
        .unwrap_or_else(|e| e.to_string());
    assert!(e.contains("\"hostile\""), "{e}");
    assert!(e.contains("schemaless"), "{e}");
}

#[tokio::test]
async fn two_tools_that_would_share_a_model_name_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Arc::new(
        McpServer::start(hostile("dup-names", &[]), dir.path(), None)
            .await
            .expect("starts"),
    );
    let e = McpSource::new(vec![server])
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("do.it") && e.contains("do_it"), "{e}");
}
