//! MCP tasks under the ledger, against a real server nobody here wrote: FastMCP 4.1.4 with
//! `fastmcp-tasks` 4.1.4 on the MCP Python SDK 2.3.0 (PyPI, `scripts/mcp-servers/setup.sh`),
//! over Streamable HTTP, started by the test and living longer than `lazarus run`. The
//! server logs every JSON-RPC request it receives (`tasks_server.py`), so the tests count
//! the `tools/call`s, `tasks/get`s and `tasks/cancel`s it really got.
//!
//! * a task that completes: its handle recorded before the first poll, polled at the
//!   server's interval, its status change and its inline result recorded;
//! * `lazarus run` killed (SIGKILL) after the task was created: the resume polls the same
//!   task id, one effect, no second `tools/call`; the receipt counts it;
//! * the server restarted before the resume: in doubt, named, no second call;
//! * SIGINT while the task works: `tasks/cancel` for that id, outcome `cancelled`; an
//!   ordinary call stopped by SIGINT: `notifications/cancelled` and a `cancelled` outcome;
//! * kill -9 at every step between the request and the first recorded poll (failpoints):
//!   never a second `tools/call` (`LAZARUS_MCP_TASK_KILL_ROUNDS` rounds of 6 kills; 1 by
//!   default, 34 for the 204-kill run);
//! * a gateway killed while a task works polls it again when it starts.

mod serve_common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lazarus_session::record::{OutcomeStatus, TaskStatus};
use lazarus_session::{LocalStore, SessionId, Status, Store, StoredRecord};
use lazarus_testkit::mcp_servers;
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The FastMCP tasks server over Streamable HTTP; killed when dropped.
struct TasksServer {
    child: std::process::Child,
}

impl Drop for TasksServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts the server on `port`, its effects in `counter`, its requests in `log`, asking to
/// be polled every `poll_ms`.
fn start_server(port: u16, counter: &Path, log: &Path, poll_ms: u64) -> TasksServer {
    let child = Command::new(mcp_servers::tasks_python())
        .arg(mcp_servers::script("tasks_server.py"))
        .args(["http", &port.to_string()])
        .env("COUNTER_FILE", counter)
        .env("REQUEST_LOG", log)
        .env("POLL_MS", poll_ms.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "the tasks server did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    TasksServer { child }
}

/// One JSON-RPC request the server logged.
fn requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The `tools/call`s of `tool` whose `tag` argument is `tag`.
fn tool_calls(log: &Path, tool: &str, tag: &str) -> usize {
    requests(log)
        .iter()
        .filter(|r| {
            r["method"] == "tools/call" && r["name"] == tool && r["arguments"]["tag"] == tag
        })
        .count()
}

/// The task ids of every request of `method` (`tasks/get`, `tasks/cancel`).
fn task_requests(log: &Path, method: &str) -> Vec<String> {
    requests(log)
        .iter()
        .filter(|r| r["method"] == method)
        .map(|r| r["taskId"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn effects(counter: &Path, line: &str) -> usize {
    std::fs::read_to_string(counter)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == line)
        .count()
}

/// A model that calls `tool` with `args` once, then says it is done.
fn model(rt: &tokio::runtime::Runtime, tool: &str, args: Value) -> ScriptedServer {
    rt.block_on(ScriptedServer::start(Script::new([
        Step::reply(ScriptedResponse::tool_call(
            "c1",
            format!("mcp__tasks__{tool}"),
            args,
        ))
        .when(When::LastUserContains { text: "go".into() })
        .repeat(),
        Step::after_tool_result("c1", ScriptedResponse::text("All done.")).repeat(),
    ])))
    .unwrap()
}

struct Setup {
    tmp: tempfile::TempDir,
    dir: PathBuf,
    ws: PathBuf,
    config: PathBuf,
    counter: PathBuf,
}

fn setup(port: u16, extra_config: &str) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, ws) = (tmp.path().join("sessions"), tmp.path().join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    let config = tmp.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[mcp_servers.tasks]\nurl = \"http://127.0.0.1:{port}/mcp\"\n{extra_config}"),
    )
    .unwrap();
    let counter = tmp.path().join("counter.txt");
    Setup {
        tmp,
        dir,
        ws,
        config,
        counter,
    }
}

fn lazarus(s: &Setup, session: &str, model_url: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(["run", "--json", "--session", session, "--max-tokens", "64"])
        .arg("--session-dir")
        .arg(&s.dir)
        .arg("--workspace")
        .arg(&s.ws)
        .args(["--base-url", model_url])
        .args(extra)
        .env("LAZARUS_CONFIG", &s.config)
        .env("OPENAI_API_KEY", "test")
        .env_remove("LAZARUS_FAILPOINTS")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn sid(id: &str) -> SessionId {
    SessionId::parse(id).expect("a valid session id")
}

fn records(s: &Setup, session: &str) -> Vec<StoredRecord> {
    LocalStore::open(&s.dir)
        .unwrap()
        .records(&sid(session), 0, usize::MAX)
        .unwrap()
}

fn of_kind<'a>(recs: &'a [StoredRecord], kind: &str) -> Vec<&'a StoredRecord> {
    recs.iter().filter(|r| r.kind == kind).collect()
}

/// Spawns `cmd`, reads its JSON lines until one of `kind` is printed (returned), and sends
/// `signal` then; waits for it to end and returns how.
fn run_until(
    cmd: Command,
    kind: &str,
    signal: rustix::process::Signal,
) -> (Value, std::process::ExitStatus, String) {
    run_until_then(cmd, kind, || {}, signal)
}

/// As [`run_until`], waiting for `ready` between the record and the signal.
fn run_until_then(
    mut cmd: Command,
    kind: &str,
    ready: impl Fn(),
    signal: rustix::process::Signal,
) -> (Value, std::process::ExitStatus, String) {
    let mut child = cmd.spawn().unwrap();
    let pid = rustix::process::Pid::from_child(&child);
    let stdout = child.stdout.take().unwrap();
    let mut seen = Value::Null;
    let mut lines = BufReader::new(stdout).lines();
    for line in lines.by_ref() {
        let Ok(line) = line else { break };
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if v["kind"] == kind {
            seen = v;
            ready();
            let _ = rustix::process::kill_process(pid, signal);
            break;
        }
    }
    // drain the rest so the child never blocks on a full pipe
    std::thread::spawn(move || for _ in lines {});
    let out = child.wait_with_output().unwrap();
    (
        seen,
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn verify(s: &Setup, session: &str) {
    let out = Command::new(BIN)
        .args(["sessions", "verify", session, "--session-dir"])
        .arg(&s.dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "verify {session}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn finish(s: &Setup, session: &str, model_url: &str) -> std::process::Output {
    let out = lazarus(s, session, model_url, &[]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "resume of {session} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn receipt(recs: &[StoredRecord]) -> Value {
    of_kind(recs, "resume")
        .last()
        .map(|r| r.data.clone())
        .unwrap_or_else(|| panic!("no resume receipt"))
}

#[test]
fn a_task_completes_its_handle_recorded_before_it_is_polled_at_the_servers_interval() {
    let rt = rt();
    let port = free_port();
    let s = setup(port, "");
    let log = s.tmp.path().join("requests.log");
    let _server = start_server(port, &s.counter, &log, 200);
    let m = model(&rt, "task_bump", json!({"tag": "t1", "secs": 1.5}));
    let t0 = Instant::now();
    let out = lazarus(&s, "s", &m.base_url(), &["-p", "go"])
        .output()
        .unwrap();
    let took_ms = t0.elapsed().as_millis() as u64;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = records(&s, "s");
    // the order of durable steps: start → the handle → the status change → the outcome
    let kinds: Vec<&str> = recs
        .iter()
        .map(|r| r.kind.as_str())
        .filter(|k| k.starts_with("tool_"))
        .collect();
    assert_eq!(
        kinds,
        [
            "tool_intent",
            "tool_start",
            "tool_task",
            "tool_task_status",
            "tool_outcome"
        ],
        "{recs:?}"
    );
    let task = &of_kind(&recs, "tool_task")[0].data;
    let id = task["task_id"].as_str().unwrap().to_string();
    assert_eq!(task["status"], "working");
    assert_eq!(task["server"], "tasks");
    assert_eq!(task["poll_interval_ms"], 200);
    assert_eq!(task["ttl_ms"], 900000);
    assert!(task["fingerprint"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(
        of_kind(&recs, "tool_task_status")[0].data["status"],
        "completed"
    );
    let outcome = &of_kind(&recs, "tool_outcome")[0].data;
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(outcome["result"], "task bumped t1");
    // the server: one tools/call, polled for this very task, never faster than it asked
    assert_eq!(tool_calls(&log, "task_bump", "t1"), 1);
    let polls = task_requests(&log, "tasks/get");
    assert!(polls.len() >= 2, "{polls:?}");
    assert!(polls.iter().all(|p| *p == id), "{polls:?}");
    assert!(
        polls.len() as u64 <= took_ms / 200 + 2,
        "{} polls in {took_ms} ms: faster than the server's 200 ms",
        polls.len()
    );
    assert_eq!(effects(&s.counter, "task_bump t1"), 1);
    // it spoke 2026-07-28 with the Tasks extension declared on every request
    let call = requests(&log)
        .into_iter()
        .find(|r| r["method"] == "tools/call")
        .unwrap();
    assert_eq!(
        call["meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert!(
        call["meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]
            ["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{call}"
    );
    assert_eq!(call["meta"]["lazarus/idempotency-key"], "s/c1");
    assert!(
        call["meta"].get("traceparent").is_none(),
        "no OpenTelemetry, no traceparent"
    );
    let st = LocalStore::open(&s.dir).unwrap().load(&sid("s")).unwrap();
    let world = &st.world.as_ref().expect("a world").world;
    assert_eq!(
        world.tools.mcp[0].protocol_version.as_deref(),
        Some("2026-07-28")
    );
    // the intent says the call may have become a task: never run again without its id
    let intent = &of_kind(&recs, "tool_intent")[0].data;
    assert_eq!(intent["rerun_basis"]["tasks"], true, "{intent}");
    verify(&s, "s");
}

#[test]
fn a_call_carries_its_spans_traceparent_when_opentelemetry_is_on() {
    let rt = rt();
    let port = free_port();
    let s = setup(port, "");
    let log = s.tmp.path().join("requests.log");
    let _server = start_server(port, &s.counter, &log, 100);
    let m = model(&rt, "maybe_task", json!({"tag": "o1"}));
    // nothing listens there: spans are lost, the run goes on
    let dead = free_port();
    let out = lazarus(&s, "otel", &m.base_url(), &["-p", "go"])
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{dead}"),
        )
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = records(&s, "otel");
    let intent_seq = of_kind(&recs, "tool_intent")[0].seq;
    let call = requests(&log)
        .into_iter()
        .find(|r| r["method"] == "tools/call")
        .unwrap();
    assert_eq!(
        call["meta"]["traceparent"],
        lazarus_telemetry::spans::traceparent("otel", intent_seq),
        "{call}"
    );
    // an optional task tool became a task too: the client declared the extension
    assert_eq!(of_kind(&recs, "tool_task").len(), 1, "{recs:?}");
    assert_eq!(of_kind(&recs, "tool_outcome")[0].data["result"], "maybe o1");
}

/// Kills `lazarus run` once the task's handle is recorded; the task still works.
fn killed_after_the_handle(s: &Setup, session: &str, model_url: &str) -> String {
    let (seen, status, err) = run_until(
        lazarus(s, session, model_url, &["-p", "go"]),
        "tool_task",
        rustix::process::Signal::KILL,
    );
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "{err}"
    );
    seen["data"]["task_id"]
        .as_str()
        .expect("a task handle printed")
        .to_string()
}

#[test]
fn sigkill_after_the_task_was_created_resumes_polling_the_same_task_and_never_calls_again() {
    let rt = rt();
    let port = free_port();
    let s = setup(port, "");
    let log = s.tmp.path().join("requests.log");
    let _server = start_server(port, &s.counter, &log, 200);
    for (session, wait_for_end) in [("working", false), ("away", true)] {
        let m = model(&rt, "task_bump", json!({"tag": session, "secs": 2.5}));
        let id = killed_after_the_handle(&s, session, &m.base_url());
        let line = format!("task_bump {session}");
        if wait_for_end {
            // the task ends while nobody polls
            let until = Instant::now() + Duration::from_secs(30);
            while effects(&s.counter, &line) == 0 {
                assert!(Instant::now() < until, "the task never ended");
                std::thread::sleep(Duration::from_millis(50));
            }
        } else {
            assert_eq!(effects(&s.counter, &line), 0, "still working at the resume");
        }
        let polls_before = task_requests(&log, "tasks/get").len();
        finish(&s, session, &m.base_url());
        let recs = records(&s, session);
        assert_eq!(
            tool_calls(&log, "task_bump", session),
            1,
            "{session}: a second tools/call"
        );
        let polls = task_requests(&log, "tasks/get");
        assert!(
            polls.len() > polls_before,
            "{session}: the resume never polled"
        );
        assert!(
            polls[polls_before..].iter().all(|p| *p == id),
            "{session}: {polls:?}"
        );
        assert_eq!(effects(&s.counter, &line), 1, "{session}: one effect");
        let outcome = &of_kind(&recs, "tool_outcome")[0].data;
        assert_eq!(outcome["status"], "ok", "{session}: {outcome}");
        assert_eq!(outcome["result"], format!("task bumped {session}"));
        let r = receipt(&recs);
        assert_eq!(r["mcp"]["tasks_reattached"], 1, "{session}: {r}");
        let (counted, other) = if wait_for_end {
            ("tasks_finished_while_away", "tasks_still_working")
        } else {
            ("tasks_still_working", "tasks_finished_while_away")
        };
        assert_eq!(r["mcp"][counted], 1, "{session}: {r}");
        assert!(r["mcp"].get(other).is_none(), "{session}: {r}");
        assert_eq!(r["calls_in_doubt"], 0, "{session}: {r}");
        assert!(r["every_call_has_one_result"].as_bool().unwrap());
        let st = LocalStore::open(&s.dir)
            .unwrap()
            .load(&sid(session))
            .unwrap();
        assert_eq!(st.status(), Status::Idle, "{session}");
        assert_eq!(
            st.call("c1").unwrap().task.as_ref().unwrap().status,
            TaskStatus::Completed
        );
        verify(&s, session);
    }
}

#[test]
fn a_server_restarted_before_the_resume_leaves_the_call_in_doubt_named_and_never_called_again() {
    let rt = rt();
    let port = free_port();
    let s = setup(port, "");
    let log = s.tmp.path().join("requests.log");
    let server = start_server(port, &s.counter, &log, 200);
    let m = model(&rt, "task_bump", json!({"tag": "r1", "secs": 30}));
    let id = killed_after_the_handle(&s, "s", &m.base_url());
    // the server goes down with its tasks (kept in memory) and comes back
    drop(server);
    let log2 = s.tmp.path().join("requests-2.log");
    let _server = start_server(port, &s.counter, &log2, 200);
    finish(&s, "s", &m.base_url());
    let recs = records(&s, "s");
    assert_eq!(
        tool_calls(&log2, "task_bump", "r1"),
        0,
        "called again after the restart"
    );
    assert_eq!(
        task_requests(&log2, "tasks/get"),
        std::slice::from_ref(&id),
        "asked once for that task"
    );
    let outcome = &of_kind(&recs, "tool_outcome")[0].data;
    assert_eq!(outcome["status"], "in_doubt", "{outcome}");
    assert!(
        outcome["result"]
            .as_str()
            .unwrap()
            .contains("no longer knows task"),
        "{outcome}"
    );
    let r = receipt(&recs);
    assert_eq!(
        (
            &r["mcp"]["tasks_reattached"],
            &r["mcp"]["tasks_lost"],
            &r["calls_in_doubt"]
        ),
        (&json!(1), &json!(1), &json!(1)),
        "{r}"
    );
    let why = r["in_doubt"][0]["why"].as_str().unwrap();
    assert!(why.contains(&id) && why.contains("not found"), "{why}");
    // the model was told, and nothing ran twice
    let told = rt
        .block_on(async { m.requests() })
        .iter()
        .any(|q| q.to_string().contains("no longer knows task"));
    assert!(told, "the model was not told");
    assert_eq!(effects(&s.counter, "task_bump r1"), 0);
    verify(&s, "s");
}

#[test]
fn sigint_while_the_task_works_sends_tasks_cancel_for_that_task() {
    let rt = rt();
    let port = free_port();
    let s = setup(port, "");
    let log = s.tmp.path().join("requests.log");
    let _server = start_server(port, &s.counter, &log, 200);
    let m = model(&rt, "task_bump", json!({"tag": "c1", "secs": 30}));
    let (seen, status, err) = run_until(
        lazarus(&s, "s", &m.base_url(), &["-p", "go"]),
        "tool_task",
        rustix::process::Signal::INT,
    );
    assert_eq!(status.code(), Some(130), "{err}");
    let id = seen["data"]["task_id"].as_str().unwrap();
    assert_eq!(task_requests(&log, "tasks/cancel"), [id.to_string()]);
    let recs = records(&s, "s");
    let outcome = &of_kind(&recs, "tool_outcome")[0].data;
    assert_eq!(outcome["status"], "cancelled", "{outcome}");
    let status = of_kind(&recs, "tool_task_status");
    assert_eq!(
        status.last().unwrap().data["status"],
        "cancelled",
        "{recs:?}"
    );
    assert_eq!(of_kind(&recs, "interrupted")[0].data["reason"], "sigint");
    assert_eq!(
        effects(&s.counter, "task_bump c1"),
        0,
        "the cancelled task had its effect"
    );
    // resumed, the model hears the call was cancelled; nothing is called again
    finish(&s, "s", &m.base_url());
    assert_eq!(tool_calls(&log, "task_bump", "c1"), 1);
    verify(&s, "s");
}

#[test]
fn sigint_during_an_ordinary_call_tells_the_server_and_records_cancelled() {
    let rt = rt();
    let port = free_port();
    let s = setup(port, "");
    let log = s.tmp.path().join("requests.log");
    let _server = start_server(port, &s.counter, &log, 200);
    let m = model(&rt, "plain_wait", json!({"tag": "p1", "secs": 3}));
    let t0 = Instant::now();
    // stopped once the server has the call
    let (_, status, err) = run_until_then(
        lazarus(&s, "s", &m.base_url(), &["-p", "go"]),
        "tool_start",
        || {
            let until = Instant::now() + Duration::from_secs(30);
            while tool_calls(&log, "plain_wait", "p1") == 0 {
                assert!(Instant::now() < until, "the call never reached the server");
                std::thread::sleep(Duration::from_millis(10));
            }
        },
        rustix::process::Signal::INT,
    );
    assert_eq!(status.code(), Some(130), "{err}");
    let recs = records(&s, "s");
    assert!(
        of_kind(&recs, "tool_task").is_empty(),
        "an ordinary tool is no task"
    );
    let outcome = &of_kind(&recs, "tool_outcome")
        .first()
        .unwrap_or_else(|| panic!("no outcome for the stopped call: {recs:?}"))
        .data;
    assert_eq!(outcome["status"], "cancelled", "{outcome}");
    assert!(
        outcome["result"].as_str().unwrap().contains("told to stop"),
        "{outcome}"
    );
    let st = LocalStore::open(&s.dir).unwrap().load(&sid("s")).unwrap();
    assert_eq!(st.status(), Status::Stopped);
    assert!(st.every_call_has_one_result());
    // the server (still running) was told: on 2026-07-28 over HTTP the call's stream is
    // closed, and FastMCP cancels the tool; its effect, due 3 s after the call, never lands
    while t0.elapsed() < Duration::from_secs(6) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        effects(&s.counter, "plain_wait p1"),
        0,
        "the server was not told to stop"
    );
    assert_eq!(tool_calls(&log, "plain_wait", "p1"), 1);
    verify(&s, "s");
}

/// Where a failpoint cuts the call, in order, and whether its task id is recorded by then.
const KILL_POINTS: [(&str, bool); 6] = [
    ("mcp/before-request", false),
    ("mcp/request-sent", false),
    ("mcp/task-answered", false),
    ("mcp/task-recorded", true),
    ("mcp/poll-answered", true),
    ("mcp/status-recorded", true),
];

#[test]
fn kill_9_at_every_step_between_the_request_and_the_first_recorded_poll_never_calls_twice() {
    let rounds: usize = std::env::var("LAZARUS_MCP_TASK_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let rt = rt();
    let port = free_port();
    // trusted, and the tool says it is idempotent: a plain call cut off would run again; a
    // call that may have become a task never does
    let s = setup(port, "trusted = true\n");
    let log = s.tmp.path().join("requests.log");
    let _server = start_server(port, &s.counter, &log, 100);
    let mut kills = 0;
    let (mut reattached, mut in_doubt) = (0, 0);
    for round in 0..rounds {
        for (k, (point, recorded)) in KILL_POINTS.iter().enumerate() {
            let session = format!("k{round}-{k}");
            let label = format!("{point} round {round}");
            let m = model(&rt, "task_set", json!({"tag": session, "secs": 0.4}));
            let out = lazarus(&s, &session, &m.base_url(), &["-p", "go"])
                .env("LAZARUS_FAILPOINTS", point)
                .output()
                .unwrap();
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&out.status),
                Some(9),
                "{label}: not killed at its point: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            kills += 1;
            if *point == "mcp/task-recorded" {
                // durable before the first poll: killed right after the record, the server
                // has not been asked about the task yet
                let recs = records(&s, &session);
                let task = of_kind(&recs, "tool_task");
                let id = task.first().expect("the handle recorded").data["task_id"]
                    .as_str()
                    .unwrap()
                    .to_string();
                assert!(
                    !task_requests(&log, "tasks/get").contains(&id),
                    "{label}: polled before its handle was recorded"
                );
            }
            finish(&s, &session, &m.base_url());
            let recs = records(&s, &session);
            let basis = &of_kind(&recs, "tool_intent")[0].data["rerun_basis"];
            assert_eq!(
                (
                    &basis["trusted"],
                    &basis["annotations"]["idempotentHint"],
                    &basis["tasks"]
                ),
                (&json!(true), &json!(true), &json!(true)),
                "{label}: {basis}"
            );
            let calls = tool_calls(&log, "task_set", &session);
            assert!(calls <= 1, "{label}: {calls} tools/call");
            let outcome = &of_kind(&recs, "tool_outcome")[0].data;
            let r = receipt(&recs);
            if *recorded {
                assert_eq!(calls, 1, "{label}");
                assert_eq!(outcome["status"], "ok", "{label}: {outcome}");
                assert_eq!(r["mcp"]["tasks_reattached"], 1, "{label}: {r}");
                assert_eq!(
                    effects(&s.counter, &format!("task_set {session}")),
                    1,
                    "{label}"
                );
                reattached += 1;
            } else {
                // no task id recorded: in doubt, saying so, never sent again
                assert_eq!(outcome["status"], "in_doubt", "{label}: {outcome}");
                let why = r["in_doubt"][0]["why"].as_str().unwrap_or_default();
                assert!(why.contains("no task id was recorded"), "{label}: {r}");
                if *point == "mcp/before-request" || *point == "mcp/task-answered" {
                    assert_eq!(calls, usize::from(*point == "mcp/task-answered"), "{label}");
                }
                in_doubt += 1;
            }
            verify(&s, &session);
        }
    }
    // the tasks cut before their record end on the server all the same: at most one effect
    std::thread::sleep(Duration::from_millis(800));
    for round in 0..rounds {
        for k in 0..KILL_POINTS.len() {
            let line = format!("task_set k{round}-{k}");
            assert!(effects(&s.counter, &line) <= 1, "{line} ran twice");
        }
    }
    eprintln!(
        "MCP task kills: {kills} (rounds {rounds} x {} points): {reattached} reattached, {in_doubt} in doubt, no second tools/call",
        KILL_POINTS.len()
    );
}

#[test]
fn a_gateway_killed_while_a_task_works_polls_it_again_when_it_starts() {
    use serve_common::*;
    let rt = rt();
    let port = free_port();
    let state = tempdir();
    let counter = state.path().join("counter.txt");
    let log = state.path().join("requests.log");
    let _server = start_server(port, &counter, &log, 200);
    let config = state.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[mcp_servers.tasks]\nurl = \"http://127.0.0.1:{port}/mcp\"\n"),
    )
    .unwrap();
    let m = model(&rt, "task_bump", json!({"tag": "g1", "secs": 3}));
    let serve = || {
        let mut c = serve_cmd(state.path(), &m.base_url(), &[]);
        c.env("LAZARUS_CONFIG", &config);
        c
    };
    let mut gw = Gateway::start(&mut serve());
    let (st, v) = call(&gw.url, "POST", "/v1/sessions", Some(json!({"id": "g"})));
    assert_eq!(st, 201, "{v}");
    let (st, v) = call(
        &gw.url,
        "POST",
        "/v1/sessions/g/messages",
        Some(json!({"text": "go"})),
    );
    assert!(st == 200 || st == 202, "{st} {v}");
    let store = LocalStore::open(&state.path().join("sessions")).unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let id = loop {
        let recs = store
            .records(&SessionId::literal("g"), 0, usize::MAX)
            .unwrap();
        if let Some(t) = recs.iter().find(|r| r.kind == "tool_task") {
            break t.data["task_id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < until, "no task recorded");
        std::thread::sleep(Duration::from_millis(20));
    };
    gw.kill9();
    let polls_before = task_requests(&log, "tasks/get").len();
    let gw = Gateway::start(&mut serve());
    wait_session(&gw.url, "g", Duration::from_secs(60), |v| {
        v["status"] == "idle"
    });
    let recs = store
        .records(&SessionId::literal("g"), 0, usize::MAX)
        .unwrap();
    assert_eq!(
        tool_calls(&log, "task_bump", "g1"),
        1,
        "a second tools/call"
    );
    let polls = task_requests(&log, "tasks/get");
    assert!(polls.len() > polls_before && polls[polls_before..].iter().all(|p| *p == id));
    let r = receipt(&recs);
    assert_eq!(r["trigger"], "gateway-start", "{r}");
    assert_eq!(r["mcp"]["tasks_reattached"], 1, "{r}");
    let outcome = &of_kind(&recs, "tool_outcome")[0].data;
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(effects(&counter, "task_bump g1"), 1);
    assert_eq!(
        LocalStore::open(&state.path().join("sessions"))
            .unwrap()
            .load(&SessionId::literal("g"))
            .unwrap()
            .call("c1")
            .unwrap()
            .outcome
            .as_ref()
            .unwrap()
            .status,
        OutcomeStatus::Ok
    );
}

#[test]
fn a_gateway_drained_by_sigterm_cancels_the_task_it_still_waits_for() {
    use serve_common::*;
    let rt = rt();
    let port = free_port();
    let state = tempdir();
    let counter = state.path().join("counter.txt");
    let log = state.path().join("requests.log");
    let _server = start_server(port, &counter, &log, 200);
    let config = state.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[mcp_servers.tasks]\nurl = \"http://127.0.0.1:{port}/mcp\"\n"),
    )
    .unwrap();
    let m = model(&rt, "task_bump", json!({"tag": "d1", "secs": 60}));
    let mut gw = Gateway::start(
        serve_cmd(state.path(), &m.base_url(), &["--drain-timeout", "1"])
            .env("LAZARUS_CONFIG", &config),
    );
    let (st, v) = call(&gw.url, "POST", "/v1/sessions", Some(json!({"id": "d"})));
    assert_eq!(st, 201, "{v}");
    let (st, v) = call(
        &gw.url,
        "POST",
        "/v1/sessions/d/messages",
        Some(json!({"text": "go"})),
    );
    assert!(st == 200 || st == 202, "{st} {v}");
    let store = LocalStore::open(&state.path().join("sessions")).unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let id = loop {
        let recs = store.records(&sid("d"), 0, usize::MAX).unwrap();
        if let Some(t) = recs.iter().find(|r| r.kind == "tool_task") {
            break t.data["task_id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < until, "no task recorded");
        std::thread::sleep(Duration::from_millis(20));
    };
    // the drain lets the call run for its budget, then cancels it: tasks/cancel for it
    let status = gw.term();
    assert!(status.success(), "the gateway drained: {status}");
    assert_eq!(task_requests(&log, "tasks/cancel"), [id]);
    let recs = store.records(&sid("d"), 0, usize::MAX).unwrap();
    let outcome = &of_kind(&recs, "tool_outcome")[0].data;
    assert_eq!(outcome["status"], "cancelled", "{outcome}");
    assert_eq!(of_kind(&recs, "interrupted")[0].data["reason"], "shutdown");
    assert_eq!(effects(&counter, "task_bump d1"), 0);
}
