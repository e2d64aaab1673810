//! One session, one world: whoever resumes a session resumes it with its own workspace,
//! tools and policy, or leaves it alone and says why. Real processes throughout: `lazarus run`
//! and `lazarus serve` resuming each other's sessions, an HTTP approval of a session `run`
//! made, gateways that lack its MCP server, configure another program under its name, or run
//! another policy — each must leave the session alone, write nothing but its `needs_owner`
//! record, and name the command that resumes it; and a gateway that can honour it runs it
//! exactly once, in its own workspace, with exactly its tools.

mod serve_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When, mcp_servers};
use serde_json::{Value, json};
use serve_common::*;

/// Every session's first request asks for shell call `c1` appending a line to `effect` in
/// its workspace; after the call's result the model says done.
fn script() -> Script {
    Script::new([
        Step::after_tool_result("c1", ScriptedResponse::text("all done")).repeat(),
        Step::reply(ScriptedResponse::text("hi"))
            .when(When::LastUserContains {
                text: "say hi".into(),
            })
            .repeat(),
        Step::reply(ScriptedResponse::tool_call(
            "c1",
            "shell",
            json!({"command": "echo ran >> effect"}),
        ))
        .when(When::LastUserContains {
            text: "append".into(),
        })
        .repeat(),
    ])
}

struct Env {
    state: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(state.join("projects")).unwrap();
        Env { state, _tmp: tmp }
    }

    fn sessions(&self) -> PathBuf {
        self.state.join("sessions")
    }

    /// A project directory of the user's, outside the gateway's workspace root.
    fn project(&self, name: &str) -> PathBuf {
        let p = self.state.join("projects").join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// `lazarus run` with the test's environment (no flags of its own).
    fn lazarus(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env("OPENAI_API_KEY", "test")
            .env("XDG_CONFIG_HOME", self.state.join("config"))
            .env("XDG_STATE_HOME", self.state.join("xdg"))
            .env_remove("LAZARUS_SESSION_DIR")
            .env_remove("LAZARUS_STORE")
            .stdin(Stdio::null());
        c
    }

    /// `lazarus run --session ID` in `ws` with `flags`, as a user would start it.
    fn run(&self, id: &str, ws: &Path, model: &str, flags: &[&str]) -> Output {
        self.lazarus()
            .args(["run", "--session", id, "--model", "m", "--base-url", model])
            .arg("--session-dir")
            .arg(self.sessions())
            .arg("--workspace")
            .arg(ws)
            .args(flags)
            .output()
            .unwrap()
    }

    fn gateway(&self, model: &str, extra: &[&str]) -> Gateway {
        let mut c = serve_cmd(&self.state, model, &["--model", "m"]);
        c.args(extra)
            .env("XDG_CONFIG_HOME", self.state.join("config"));
        Gateway::start(&mut c)
    }

    fn ledger(&self, id: &str) -> Vec<(String, Value)> {
        std::fs::read_to_string(self.sessions().join(format!("{id}.jsonl")))
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (v["kind"].as_str().unwrap().to_string(), v["data"].clone())
            })
            .collect()
    }

    fn count(&self, id: &str, kind: &str) -> usize {
        self.ledger(id).iter().filter(|(k, _)| k == kind).count()
    }

    /// Waits until session `id` records a `needs_owner` (a gateway leaves it off its workers).
    fn wait_needs_owner(&self, id: &str) -> Value {
        let t0 = Instant::now();
        loop {
            if let Some((_, d)) = self
                .ledger(id)
                .into_iter()
                .find(|(k, _)| k == "needs_owner")
            {
                return d;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{id}: no needs_owner: {:?}",
                self.ledger(id)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn listed_status(&self, id: &str) -> String {
        let o = self
            .lazarus()
            .args(["sessions", "list", "--json", "--session-dir"])
            .arg(self.sessions())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|v| v["id"] == id)
            .map(|v| v["status"].as_str().unwrap_or_default().to_string())
            .unwrap_or_default()
    }
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn verify_clean(env: &Env, id: &str) {
    let o = env
        .lazarus()
        .args(["sessions", "verify", id, "--session-dir"])
        .arg(env.sessions())
        .output()
        .unwrap();
    assert!(o.status.success(), "{id} does not verify: {}", text(&o));
}

/// The issue's own case: `run --workspace W --ask-for-approval untrusted` stops before a
/// shell call; a person allows it through a gateway whose roots do not hold W. The gateway
/// records the decision, says it will not run it and which command will, and lets go; that
/// command (no flags: the session's world supplies them) runs the call exactly once, in W.
/// A gateway allowed W runs it there itself, exactly once.
#[test]
fn an_http_approval_of_a_run_session_runs_the_call_once_in_its_own_workspace() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt.block_on(ScriptedServer::start(script())).unwrap();
    let url = model.base_url();
    let env = Env::new();
    let w = env.project("app");
    let o = env.run(
        "s",
        &w,
        &url,
        &["--ask-for-approval", "untrusted", "-p", "append a line"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));

    let mut g = env.gateway(&url, &["--ask-for-approval", "untrusted"]);
    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/s/approvals/c1",
        Some(json!({"decision": "allow"})),
    );
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["result"], "recorded", "{v}");
    assert_eq!(v["runs_here"], false, "{v}");
    let reason = v["needs_owner"]["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "workspace {} is outside this gateway's roots",
            w.display()
        )),
        "{reason}"
    );
    let resume_with = v["needs_owner"]["resume_with"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        resume_with.starts_with("lazarus run --session s --session-dir "),
        "{resume_with}"
    );
    // recorded: the decision and why it is left; nothing ran, here or anywhere
    let d = env.wait_needs_owner("s");
    assert_eq!(d["reason"], reason);
    assert_eq!(env.count("s", "approval"), 1);
    assert_eq!(env.count("s", "tool_intent"), 0);
    assert_eq!(lines(&w.join("effect")), 0);
    assert!(
        !env.state.join("workspaces/s").exists(),
        "nothing made in the gateway's root"
    );
    // every view says so: the listing, the gateway's API
    assert_eq!(env.listed_status("s"), "needs_owner");
    let v = wait_session(&g.url, "s", Duration::from_secs(10), |v| {
        v["status"] == "needs_owner"
    });
    assert_eq!(v["needs_owner"]["resume_with"], resume_with.as_str());
    // asked again, the gateway leaves it again and records nothing more
    let before = env.ledger("s").len();
    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/s/events",
        Some(json!({"type": "resume", "idempotency_key": "k1"})),
    );
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["runs_here"], false, "{v}");
    std::thread::sleep(Duration::from_millis(500));
    let kinds: Vec<String> = env.ledger("s")[before..]
        .iter()
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(kinds, vec!["control"], "only the event itself is recorded");

    // the command it names, run as it says (the gateway still up: it let go)
    let mut words = resume_with.split_whitespace().skip(1);
    let args: Vec<&str> = words.by_ref().collect();
    let o = env.lazarus().args(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(lines(&w.join("effect")), 1, "the call ran once, in W");
    assert_eq!(env.count("s", "tool_intent"), 1);
    assert_eq!(env.listed_status("s"), "idle");
    let receipt = env
        .ledger("s")
        .into_iter()
        .rev()
        .find(|(k, _)| k == "resume")
        .map(|(_, d)| d)
        .unwrap();
    assert_eq!(
        receipt["world_seq"], 0,
        "ran in the world it was made with: {receipt}"
    );
    verify_clean(&env, "s");
    g.kill9();

    // a gateway allowed the user's projects runs the approved call itself, once, in W2
    let w2 = env.project("lib");
    let o = env.run(
        "s2",
        &w2,
        &url,
        &["--ask-for-approval", "untrusted", "-p", "append a line"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let projects = env.state.join("projects");
    let g = env.gateway(
        &url,
        &[
            "--ask-for-approval",
            "untrusted",
            "--allow-workspace",
            projects.to_str().unwrap(),
        ],
    );
    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/s2/approvals/c1",
        Some(json!({"decision": "allow"})),
    );
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["runs_here"], true, "{v}");
    wait_session(&g.url, "s2", Duration::from_secs(30), |v| {
        v["status"] == "idle"
    });
    assert_eq!(lines(&w2.join("effect")), 1, "ran once, in W2");
    assert_eq!(env.count("s2", "needs_owner"), 0);
    assert_eq!(env.count("s2", "tool_intent"), 1);
    verify_clean(&env, "s2");
    rt.block_on(model.shutdown());
}

/// A gateway's session, continued by `lazarus run` with no flags: in the gateway's workspace
/// for it, with the gateway's model and policy; a flag that contradicts the record is refused
/// and writes nothing, and `--change-world` records the change.
#[test]
fn run_continues_a_gateway_session_in_its_world_and_refuses_a_contradicting_flag() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt.block_on(ScriptedServer::start(script())).unwrap();
    let url = model.base_url();
    let env = Env::new();
    let mut g = env.gateway(&url, &[]);
    let (st, v) = call(&g.url, "POST", "/v1/sessions", Some(json!({"id": "g1"})));
    assert_eq!(st, 201, "{v}");
    let ws = PathBuf::from(v["workspace"].as_str().unwrap());
    g.term();
    // from another directory, with no flags but the store: the session's own workspace
    let elsewhere = env.project("elsewhere");
    let o = env
        .lazarus()
        .current_dir(&elsewhere)
        .args([
            "run",
            "--session",
            "g1",
            "-p",
            "append a line",
            "--session-dir",
        ])
        .arg(env.sessions())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        lines(&ws.join("effect")),
        1,
        "ran in the gateway's workspace for it"
    );
    assert_eq!(lines(&elsewhere.join("effect")), 0);
    // a flag against the record: refused, naming both values and the way to change it
    let ledger = env.sessions().join("g1.jsonl");
    let before = std::fs::read(&ledger).unwrap();
    let o = env
        .lazarus()
        .args([
            "run",
            "--session",
            "g1",
            "-p",
            "again",
            "--sandbox",
            "read-only",
            "--session-dir",
        ])
        .arg(env.sessions())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("sandbox mode: recorded workspace-write, here read-only"),
        "{err}"
    );
    assert!(err.contains("--change-world"), "{err}");
    assert_eq!(
        std::fs::read(&ledger).unwrap(),
        before,
        "refused: nothing written"
    );
    // asked for, the change is a record, and the resume runs in it
    let o = env
        .lazarus()
        .args([
            "run",
            "--session",
            "g1",
            "-p",
            "say hi",
            "--sandbox",
            "read-only",
            "--change-world",
            "--session-dir",
        ])
        .arg(env.sessions())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let worlds: Vec<Value> = env
        .ledger("g1")
        .into_iter()
        .filter(|(k, _)| k == "world")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(worlds.len(), 1, "{worlds:?}");
    assert_eq!(worlds[0]["reason"], "changed");
    assert_eq!(worlds[0]["changed"], json!(["sandbox"]));
    assert_eq!(worlds[0]["sandbox"]["mode"], "read-only");
    verify_clean(&env, "g1");
    rt.block_on(model.shutdown());
}

/// The config file of an MCP server `counter` (the Python SDK's counter server) with `args`.
fn mcp_config(env: &Env, name: &str, extra_arg: Option<&str>) -> PathBuf {
    let mut args = vec![
        mcp_servers::script("counter_server.py")
            .display()
            .to_string(),
        "stdio".to_string(),
    ];
    if let Some(a) = extra_arg {
        args.push(a.to_string());
    }
    let file = env.state.join(format!("{name}.mcp.json"));
    std::fs::write(
        &file,
        json!({"mcpServers": {"counter": {
            "command": mcp_servers::python(),
            "args": args,
            "env": {"COUNTER_FILE": env.state.join("counter.txt")},
        }}})
        .to_string(),
    )
    .unwrap();
    file
}

/// A model that calls the MCP server's `peek` once per request, forever: every run stops at
/// `--max-turns` with work left.
fn peeking_model(rt: &tokio::runtime::Runtime) -> ScriptedServer {
    rt.block_on(ScriptedServer::start(Script::new([Step::reply(
        ScriptedResponse::tool_call("p", "mcp__counter__peek", json!({})),
    )
    .repeat()])))
        .unwrap()
}

/// What the model was offered in its last request.
fn offered(model: &ScriptedServer) -> Vec<String> {
    model
        .requests()
        .last()
        .and_then(|r| r["tools"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// A session `run` made with an MCP server and left owing work, and gateways that cannot
/// honour it: one without the server, one with another program under its name, one with
/// another sandbox policy. Each leaves it alone at start, says why, records nothing but that
/// (once: a restart adds nothing), and asks the model nothing. A gateway with the same server
/// runs it, offering exactly the session's tools: never fewer, never the gateway's others.
#[test]
fn a_gateway_runs_a_session_only_with_its_own_servers_and_policy() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = peeking_model(&rt);
    let url = model.base_url();
    let env = Env::new();
    let w = env.project("app");
    let same = mcp_config(&env, "same", None);
    let o = env.run(
        "m1",
        &w,
        &url,
        &[
            "--mcp-config",
            same.to_str().unwrap(),
            "--max-turns",
            "1",
            "-p",
            "peek",
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let projects = env.state.join("projects");
    let allow = ["--allow-workspace", projects.to_str().unwrap()];
    let other = mcp_config(&env, "other", Some("--other-program"));
    let cases: Vec<(Vec<&str>, String)> = vec![
        (allow.to_vec(), "MCP server counter: recorded".into()),
        (
            [&allow[..], &["--mcp-config", other.to_str().unwrap()]].concat(),
            "another program under the same name".into(),
        ),
        (
            [
                &allow[..],
                &[
                    "--mcp-config",
                    same.to_str().unwrap(),
                    "--sandbox",
                    "read-only",
                ],
            ]
            .concat(),
            "sandbox mode: recorded workspace-write, here read-only".into(),
        ),
    ];
    for (flags, why) in &cases {
        let records = env.ledger("m1").len();
        let requests = model.request_count();
        for round in 0..2 {
            let mut g = env.gateway(&url, flags);
            assert!(
                g.ready_line.contains("1 left to their owner"),
                "{flags:?}: {}",
                g.ready_line
            );
            if round == 0 {
                let d = env.wait_needs_owner_after("m1", records);
                assert!(
                    d["reason"].as_str().unwrap().contains(why.as_str()),
                    "{flags:?}: {d}"
                );
            }
            g.term();
        }
        // one record, whatever the restarts; the model was asked nothing
        let new: Vec<String> = env.ledger("m1")[records..]
            .iter()
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(new, vec!["needs_owner"], "{flags:?}");
        assert_eq!(
            model.request_count(),
            requests,
            "{flags:?}: the model was asked"
        );
        assert_eq!(env.listed_status("m1"), "needs_owner");
    }
    // the same server (and another besides it): runs, with the session's tools only
    let extra = env.state.join("extra.mcp.json");
    std::fs::write(
        &extra,
        json!({"mcpServers": {"memory": {"command": mcp_servers::node(), "args": [mcp_servers::npm_server("memory")]}}}).to_string(),
    )
    .unwrap();
    let requests = model.request_count();
    let mut g = env.gateway(
        &url,
        &[
            &allow[..],
            &[
                "--mcp-config",
                same.to_str().unwrap(),
                "--mcp-config",
                extra.to_str().unwrap(),
                "--max-turns",
                "1",
            ],
        ]
        .concat(),
    );
    let t0 = Instant::now();
    while model.request_count() == requests {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the gateway never ran it"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let tools = offered(&model);
    assert!(tools.iter().any(|t| t == "mcp__counter__peek"), "{tools:?}");
    assert!(
        !tools.iter().any(|t| t.starts_with("mcp__memory__")),
        "{tools:?}"
    );
    assert!(tools.iter().any(|t| t == "shell"), "{tools:?}");
    g.term();
    rt.block_on(model.shutdown());
}

impl Env {
    /// The first `needs_owner` recorded after the first `after` records.
    fn wait_needs_owner_after(&self, id: &str, after: usize) -> Value {
        let t0 = Instant::now();
        loop {
            if let Some((_, d)) = self
                .ledger(id)
                .into_iter()
                .skip(after)
                .find(|(k, _)| k == "needs_owner")
            {
                return d;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{id}: no new needs_owner"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `boot-resume --inject lazarus` for a session `run` made in a workspace the gateway may not
/// use: the gateway records the resume event and leaves it; boot-resume reports it
/// `left_to_owner` with the reason and the command, and never `resumed`; that command resumes
/// it once, in its workspace, and the cut-off shell call is in doubt, not run twice.
#[test]
fn boot_resume_through_a_gateway_that_cannot_honour_the_session_says_who_resumes_it() {
    use std::io::BufRead;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call(
                "c1",
                "shell",
                json!({"command": "echo ran >> effect; sleep 30"}),
            ))
            .when(When::LastUserContains {
                text: "append".into(),
            })
            .repeat(),
            Step::after_tool_result("c1", ScriptedResponse::text("Finished.")).repeat(),
        ])))
        .unwrap();
    let url = model.base_url();
    let env = Env::new();
    let w = env.project("app");
    let mut run = env
        .lazarus()
        .args([
            "run",
            "--json",
            "--session",
            "br",
            "-p",
            "append a line",
            "--model",
            "m",
        ])
        .args(["--base-url", &url, "--session-dir"])
        .arg(env.sessions())
        .arg("--workspace")
        .arg(&w)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for line in std::io::BufReader::new(run.stdout.take().unwrap()).lines() {
        if line.unwrap().contains("\"kind\":\"tool_start\"") {
            break;
        }
    }
    let t0 = Instant::now();
    while lines(&w.join("effect")) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "the call never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    run.kill().unwrap();
    run.wait().unwrap();
    let g = env.gateway(&url, &[]);
    let o = env
        .lazarus()
        .args(["boot-resume", "--window", "0", "--json", "--source"])
        .arg(format!("lazarus:{}", env.sessions().display()))
        .arg("--inject")
        .arg(format!("lazarus={}", g.url))
        .env("LAZARUS_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let row = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["id"] == "br")
        .unwrap_or_else(|| panic!("no row for br: {}", text(&o)));
    assert_eq!(row["action"], "left_to_owner", "{row}");
    let detail = row["action_detail"].as_str().unwrap_or_default();
    assert!(detail.contains("outside this gateway's roots"), "{detail}");
    assert!(
        detail.contains("lazarus run --session br --session-dir"),
        "{detail}"
    );
    env.wait_needs_owner("br");
    assert_eq!(env.count("br", "resume"), 0, "nothing resumed it here");
    // the command it names: one receipt, the call in doubt, nothing ran twice
    let o = env
        .lazarus()
        .args(["run", "--session", "br", "--session-dir"])
        .arg(env.sessions())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(env.count("br", "resume"), 1);
    let receipt = env
        .ledger("br")
        .into_iter()
        .find(|(k, _)| k == "resume")
        .map(|(_, d)| d)
        .unwrap();
    assert_eq!(receipt["calls_in_doubt"], 1, "{receipt}");
    assert_eq!(
        lines(&w.join("effect")),
        1,
        "the shell call never ran twice"
    );
    verify_clean(&env, "br");
    drop(g);
    rt.block_on(model.shutdown());
}
