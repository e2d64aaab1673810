//! `lazarus run` with MCP tools, killed with SIGKILL at every point of a call, then run
//! again: the re-run rule of G7 for tools Lazarus did not write, against real servers (the
//! Python SDK's over stdio and Streamable HTTP, npm's filesystem server). Installed by
//! `scripts/mcp-servers/setup.sh`.
//!
//! Kill points: `before-request` (the call's start is recorded, its `tools/call` not yet
//! written: failpoint `mcp/before-request`), `during-work` (the server did the effect and
//! still works: SIGKILL from here once the counter file shows the effect), `after-answer`
//! (the answer arrived, the outcome is not recorded: failpoint `mcp/after-answer`), and
//! `after-outcome` (the outcome is recorded, the next model answer not yet: SIGKILL when the
//! outcome is printed).
//!
//! After each: untrusted server → the call is in doubt and its effect happened at most once;
//! trusted and idempotent (or read-only) → it ran again with the same idempotency key;
//! trusted and destructive → in doubt; a finished call's result is reused. Every scenario
//! checks the receipt's counts, that the model was told, and that the ledger verifies.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lazarus_agent::runner::IN_DOUBT_NOTICE;
use lazarus_session::record::OutcomeStatus;
use lazarus_session::{LocalStore, SessionId, Status, Store};
use lazarus_testkit::mcp_servers;
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kill {
    BeforeRequest,
    DuringWork,
    AfterAnswer,
    AfterOutcome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Stdio,
    Http,
}

/// What resume must have done with the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    InDoubt,
    Rerun,
    Reused,
}

struct Scenario {
    transport: Transport,
    trusted: bool,
    /// Whether the server is trusted when the session is resumed (the operator may change it).
    trusted_at_resume: bool,
    tool: &'static str,
    kill: Kill,
    expect: Expect,
}

fn script(tool: &str, args: Value) -> Script {
    Script::new([
        Step::reply(ScriptedResponse::tool_call(
            "c1",
            format!("mcp__counter__{tool}"),
            args,
        ))
        .when(When::LastUserContains { text: "go".into() })
        .repeat(),
        // slow enough that a kill after the outcome lands before this answer
        Step::after_tool_result("c1", ScriptedResponse::text("All done."))
            .delay_ms(1500)
            .repeat(),
    ])
}

/// A Python SDK server over Streamable HTTP, outliving the killed runner.
struct HttpServer {
    child: std::process::Child,
    port: u16,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_http(counter: &Path) -> HttpServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(mcp_servers::python())
        .arg(mcp_servers::script("counter_server.py"))
        .args(["http", &port.to_string()])
        .env("COUNTER_FILE", counter)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "the HTTP MCP server did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    HttpServer { child, port }
}

/// The configuration file: the counter server, trusted or not, over stdio or HTTP.
fn write_config(dir: &Path, counter: &Path, trusted: bool, http: Option<u16>) -> PathBuf {
    let server = match http {
        None => format!(
            "command = {:?}\nargs = [{:?}, \"stdio\"]\nenv = {{ COUNTER_FILE = {:?} }}\n",
            mcp_servers::python().display().to_string(),
            mcp_servers::script("counter_server.py")
                .display()
                .to_string(),
            counter.display().to_string()
        ),
        Some(port) => format!("url = \"http://127.0.0.1:{port}/mcp\"\n"),
    };
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!("[mcp_servers.counter]\n{server}trusted = {trusted}\n"),
    )
    .unwrap();
    path
}

fn lazarus(config: &Path, dir: &Path, ws: &Path, url: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(["run", "--json", "--session", "s", "--max-tokens", "64"])
        .arg("--session-dir")
        .arg(dir)
        .arg("--workspace")
        .arg(ws)
        .args(["--base-url", url])
        .args(extra)
        .env("LAZARUS_CONFIG", config)
        .env("OPENAI_API_KEY", "test")
        .env_remove("LAZARUS_FAILPOINTS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn counter_lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Runs the first `lazarus run` to the kill point; the process is dead when this returns.
fn first_run(mut cmd: Command, kill: Kill, counter: &Path, label: &str) {
    match kill {
        Kill::BeforeRequest => {
            cmd.env("LAZARUS_FAILPOINTS", "mcp/before-request");
        }
        Kill::AfterAnswer => {
            cmd.env("LAZARUS_FAILPOINTS", "mcp/after-answer");
        }
        Kill::DuringWork | Kill::AfterOutcome => {}
    }
    let mut child = cmd.spawn().unwrap();
    let pid = rustix::process::Pid::from_child(&child);
    let stdout = child.stdout.take().unwrap();
    let kill_now = || {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    };
    match kill {
        Kill::BeforeRequest | Kill::AfterAnswer => {}
        Kill::DuringWork => {
            let until = Instant::now() + Duration::from_secs(30);
            while counter_lines(counter).is_empty() {
                assert!(Instant::now() < until, "{label}: the effect never happened");
                std::thread::sleep(Duration::from_millis(10));
            }
            kill_now();
        }
        Kill::AfterOutcome => {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                if v["kind"] == "tool_outcome" {
                    kill_now();
                    break;
                }
            }
        }
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(9),
        "{label}: the first run was not killed at its point (status {:?}); stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn run_scenario(rt: &tokio::runtime::Runtime, sc: &Scenario) {
    let label = format!(
        "{:?} {} {} killed {:?}",
        sc.transport,
        if sc.trusted { "trusted" } else { "untrusted" },
        sc.tool,
        sc.kill
    );
    let args = match sc.kill {
        // the first call works a long while after its effect; the re-run answers at once
        Kill::DuringWork => json!({"sleep_secs": 60, "sleep_once": true}),
        _ => json!({}),
    };
    let model = rt
        .block_on(ScriptedServer::start(script(sc.tool, args)))
        .unwrap();
    let url = model.base_url();
    let tmp = tempfile::tempdir().unwrap();
    let (dir, ws) = (tmp.path().join("sessions"), tmp.path().join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    let counter = tmp.path().join("counter.txt");
    let http = (sc.transport == Transport::Http).then(|| start_http(&counter));
    let config = write_config(
        tmp.path(),
        &counter,
        sc.trusted,
        http.as_ref().map(|h| h.port),
    );

    first_run(
        lazarus(
            &config,
            &dir,
            &ws,
            &url,
            &["-p", "go", "--message-id", "m1"],
        ),
        sc.kill,
        &counter,
        &label,
    );
    let effects_before = counter_lines(&counter).len();
    let expected_before = match sc.kill {
        Kill::BeforeRequest => 0,
        _ => 1,
    };
    assert_eq!(
        effects_before, expected_before,
        "{label}: effects at the kill"
    );

    let mut extra: Vec<&str> = Vec::new();
    if sc.trusted_at_resume != sc.trusted {
        write_config(
            tmp.path(),
            &counter,
            sc.trusted_at_resume,
            http.as_ref().map(|h| h.port),
        );
        // the trust is part of the session's world: changed behind its back, the resume is
        // refused, naming it, and writes nothing
        let ledger = dir.join("s.jsonl");
        let before = std::fs::read(&ledger).unwrap();
        let out = lazarus(&config, &dir, &ws, &url, &[]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{label}: {err}");
        assert!(
            err.contains(&format!(
                "MCP server counter: recorded trusted = {}, here {}",
                sc.trusted, sc.trusted_at_resume
            )),
            "{label}: {err}"
        );
        assert_eq!(
            std::fs::read(&ledger).unwrap(),
            before,
            "{label}: refused, nothing written"
        );
        // asked for, the change is recorded, and the re-run rule still decides from the intent
        extra.push("--change-world");
    }
    let out = lazarus(&config, &dir, &ws, &url, &extra).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{label}: resume failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = LocalStore::open(&dir).unwrap();
    let st = store.load(&SessionId::literal("s")).unwrap();
    assert_eq!(st.status(), Status::Idle, "{label}");
    assert!(st.every_call_has_one_result(), "{label}");
    let c1 = st.call("c1").expect("the call is recorded");
    let intent = c1.intent.as_ref().expect("an intent");
    assert_eq!(intent.idempotency_key, "s/c1", "{label}");
    let basis = intent
        .rerun_basis
        .as_ref()
        .expect("an MCP call records its basis");
    assert_eq!(basis["server"], "counter", "{label}");
    assert_eq!(basis["server_info"]["name"], "lazarus-counter", "{label}");
    assert_eq!(basis["server_info"]["version"], "1.2.3", "{label}");
    assert_eq!(basis["tool"], sc.tool, "{label}");
    assert_eq!(basis["trusted"], sc.trusted, "{label}");
    let effects = counter_lines(&counter);
    let records = store
        .records(&SessionId::literal("s"), 0, usize::MAX)
        .unwrap();
    let receipt = records
        .iter()
        .find(|r| r.kind == "resume")
        .unwrap_or_else(|| panic!("{label}: no resume receipt"))
        .data
        .clone();
    let requests = rt.block_on(async { model.requests() });
    let told = requests.iter().any(|r| {
        r.to_string()
            .contains(&IN_DOUBT_NOTICE.replace('"', "\\\"")[..60])
    });
    match sc.expect {
        Expect::InDoubt => {
            assert_eq!(
                c1.outcome.as_ref().unwrap().status,
                OutcomeStatus::InDoubt,
                "{label}"
            );
            assert_eq!(
                effects.len(),
                effects_before,
                "{label}: ran again: {effects:?}"
            );
            assert_eq!(receipt["calls_in_doubt"], 1, "{label}: {receipt}");
            assert_eq!(receipt["mcp"]["calls_in_doubt"], 1, "{label}: {receipt}");
            // the receipt names the fact that kept it from running again
            let why = receipt["in_doubt"][0]["why"].as_str().unwrap_or_default();
            let expected = if !sc.trusted {
                "is not trusted"
            } else if sc.trusted_at_resume {
                "neither read-only nor idempotent"
            } else {
                "now; it was allowed when the call started"
            };
            assert!(why.contains(expected), "{label}: {receipt}");
            assert!(told, "{label}: the model was not told the call is in doubt");
        }
        Expect::Rerun => {
            assert_eq!(
                c1.outcome.as_ref().unwrap().status,
                OutcomeStatus::Ok,
                "{label}"
            );
            assert_eq!(effects.len(), effects_before + 1, "{label}: {effects:?}");
            for e in &effects {
                assert_eq!(e, &format!("{} s/c1", sc.tool), "{label}: the key changed");
            }
            assert_eq!(receipt["calls_rerun"], 1, "{label}: {receipt}");
            assert_eq!(receipt["mcp"]["calls_rerun"], 1, "{label}: {receipt}");
            assert!(!told, "{label}");
        }
        Expect::Reused => {
            assert_eq!(
                c1.outcome.as_ref().unwrap().status,
                OutcomeStatus::Ok,
                "{label}"
            );
            assert_eq!(effects.len(), 1, "{label}: {effects:?}");
            assert_eq!(receipt["calls_reused"], 1, "{label}: {receipt}");
            assert_eq!(receipt["mcp"]["calls_reused"], 1, "{label}: {receipt}");
        }
    }
    let verify = Command::new(BIN)
        .args(["sessions", "verify", "s", "--session-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{label}: verify: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn sc(
    transport: Transport,
    trusted: bool,
    tool: &'static str,
    kill: Kill,
    expect: Expect,
) -> Scenario {
    Scenario {
        transport,
        trusted,
        trusted_at_resume: trusted,
        tool,
        kill,
        expect,
    }
}

#[test]
fn an_untrusted_server_call_cut_anywhere_is_in_doubt_and_never_run_twice() {
    let rt = rt();
    for kill in [Kill::BeforeRequest, Kill::DuringWork, Kill::AfterAnswer] {
        // even a tool that says it is idempotent: an untrusted server's hints are not acted on
        for tool in ["bump", "set_flag"] {
            run_scenario(
                &rt,
                &sc(Transport::Stdio, false, tool, kill, Expect::InDoubt),
            );
        }
    }
}

#[test]
fn a_trusted_idempotent_or_read_only_call_runs_again_with_the_same_key() {
    let rt = rt();
    for kill in [Kill::BeforeRequest, Kill::DuringWork, Kill::AfterAnswer] {
        run_scenario(
            &rt,
            &sc(Transport::Stdio, true, "set_flag", kill, Expect::Rerun),
        );
    }
    run_scenario(
        &rt,
        &sc(
            Transport::Stdio,
            true,
            "peek",
            Kill::AfterAnswer,
            Expect::Rerun,
        ),
    );
}

#[test]
fn a_trusted_destructive_call_is_in_doubt() {
    let rt = rt();
    for kill in [Kill::BeforeRequest, Kill::DuringWork, Kill::AfterAnswer] {
        run_scenario(
            &rt,
            &sc(Transport::Stdio, true, "bump", kill, Expect::InDoubt),
        );
    }
}

#[test]
fn a_finished_call_is_reused_from_the_ledger() {
    let rt = rt();
    run_scenario(
        &rt,
        &sc(
            Transport::Stdio,
            false,
            "bump",
            Kill::AfterOutcome,
            Expect::Reused,
        ),
    );
    run_scenario(
        &rt,
        &sc(
            Transport::Stdio,
            true,
            "set_flag",
            Kill::AfterOutcome,
            Expect::Reused,
        ),
    );
}

#[test]
fn over_streamable_http_the_same_rule_holds() {
    let rt = rt();
    for kill in [Kill::BeforeRequest, Kill::DuringWork, Kill::AfterAnswer] {
        run_scenario(
            &rt,
            &sc(Transport::Http, true, "set_flag", kill, Expect::Rerun),
        );
        run_scenario(
            &rt,
            &sc(Transport::Http, false, "bump", kill, Expect::InDoubt),
        );
    }
    run_scenario(
        &rt,
        &sc(
            Transport::Http,
            true,
            "bump",
            Kill::AfterOutcome,
            Expect::Reused,
        ),
    );
}

#[test]
fn a_call_runs_again_only_when_both_the_record_and_today_say_so() {
    let rt = rt();
    // trusted when the call started, no longer trusted at resume: in doubt
    let mut s = sc(
        Transport::Stdio,
        true,
        "set_flag",
        Kill::DuringWork,
        Expect::InDoubt,
    );
    s.trusted_at_resume = false;
    run_scenario(&rt, &s);
    // untrusted when the call started, trusted at resume: still in doubt (the record rules)
    let mut s = sc(
        Transport::Stdio,
        false,
        "set_flag",
        Kill::DuringWork,
        Expect::InDoubt,
    );
    s.trusted_at_resume = true;
    run_scenario(&rt, &s);
}

/// npm's filesystem server, trusted: `write_file` (idempotent) cut after its answer runs
/// again; `edit_file` (not idempotent) is in doubt and its edit is made once.
#[test]
fn the_reference_filesystem_server_under_the_rule() {
    let rt = rt();
    for (tool, expect) in [
        ("write_file", Expect::Rerun),
        ("edit_file", Expect::InDoubt),
    ] {
        let label = format!("filesystem {tool} killed after its answer");
        let tmp = tempfile::tempdir().unwrap();
        let (dir, ws) = (tmp.path().join("sessions"), tmp.path().join("ws"));
        std::fs::create_dir_all(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        let file = ws.join("notes.txt");
        std::fs::write(&file, "hello").unwrap();
        let args = match tool {
            "write_file" => json!({"path": file, "content": "hello again"}),
            _ => json!({"path": file, "edits": [{"oldText": "hello", "newText": "hello world"}]}),
        };
        let model = rt
            .block_on(ScriptedServer::start(Script::new([
                Step::reply(ScriptedResponse::tool_call(
                    "c1",
                    format!("mcp__files__{tool}"),
                    args,
                ))
                .when(When::LastUserContains { text: "go".into() })
                .repeat(),
                Step::after_tool_result("c1", ScriptedResponse::text("All done.")).repeat(),
            ])))
            .unwrap();
        let url = model.base_url();
        let config = tmp.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[mcp_servers.files]\ncommand = {:?}\nargs = [{:?}, {:?}]\ntrusted = true\n",
                mcp_servers::node().display().to_string(),
                mcp_servers::npm_server("filesystem").display().to_string(),
                ws.display().to_string()
            ),
        )
        .unwrap();
        first_run(
            lazarus(&config, &dir, &ws, &url, &["-p", "go"]),
            Kill::AfterAnswer,
            &tmp.path().join("unused"),
            &label,
        );
        let out = lazarus(&config, &dir, &ws, &url, &[]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{label}");
        let st = LocalStore::open(&dir)
            .unwrap()
            .load(&SessionId::literal("s"))
            .unwrap();
        let c1 = st.call("c1").unwrap();
        let basis = c1.intent.as_ref().unwrap().rerun_basis.as_ref().unwrap();
        assert_eq!(
            basis["server_info"]["name"], "secure-filesystem-server",
            "{label}"
        );
        let text = std::fs::read_to_string(&file).unwrap();
        match expect {
            Expect::Rerun => {
                assert_eq!(
                    c1.outcome.as_ref().unwrap().status,
                    OutcomeStatus::Ok,
                    "{label}"
                );
                assert_eq!(text, "hello again", "{label}");
            }
            _ => {
                assert_eq!(
                    c1.outcome.as_ref().unwrap().status,
                    OutcomeStatus::InDoubt,
                    "{label}"
                );
                assert_eq!(text, "hello world", "{label}: edited {text:?}");
            }
        }
    }
}

/// `--ask-for-approval untrusted` with MCP tools: only a trusted server's `readOnlyHint: true`
/// tool runs without asking; a destructive tool, or any tool of an untrusted server (its hints
/// are claims), waits for approval and does nothing until then (the counter shows no effect).
#[test]
fn under_untrusted_approvals_only_a_trusted_read_only_tool_runs_without_asking() {
    let rt = rt();
    for (trusted, tool, asks) in [
        (true, "peek", false),
        (true, "bump", true),
        (false, "peek", true),
    ] {
        let label = format!("{tool} on a server trusted={trusted}");
        let server = rt
            .block_on(ScriptedServer::start(script(tool, json!({}))))
            .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let counter = tmp.path().join("counter.txt");
        let config = write_config(tmp.path(), &counter, trusted, None);
        let dir = tmp.path().join("sessions");
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let out = lazarus(
            &config,
            &dir,
            &ws,
            &server.base_url(),
            &["--ask-for-approval", "untrusted", "-p", "go"],
        )
        .env("XDG_CONFIG_HOME", tmp.path().join("xdg"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        if asks {
            assert_eq!(out.status.code(), Some(3), "{label}: {said}");
            assert!(counter_lines(&counter).is_empty(), "{label}: ran unasked");
            let st = LocalStore::open(&dir)
                .unwrap()
                .load(&SessionId::literal("s"))
                .unwrap();
            assert_eq!(st.status(), Status::AwaitingApproval, "{label}");
        } else {
            assert_eq!(out.status.code(), Some(0), "{label}: {said}");
            assert_eq!(counter_lines(&counter).len(), 1, "{label}");
            let ledger = std::fs::read_to_string(dir.join("s.jsonl")).unwrap();
            assert!(!ledger.contains("approval_request"), "{label}");
        }
    }
}
