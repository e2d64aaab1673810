//! Durable approvals from the command line, with real processes: a call that needs a person
//! waits (recorded), the run exits 3 off a terminal (or asks on one), the decision is recorded
//! through the inbox from another process, and the call then runs exactly once — or, denied,
//! never. kill -9 anywhere in between loses nothing.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lazarus_session::record::{Decision, OutcomeStatus, Scope};
use lazarus_session::{LocalStore, SessionId, Status, Store};
use lazarus_testkit::tmux::{Tmux, sh_quote};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

/// A session directory, a workspace and a private configuration directory (the policy file).
struct Env {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    ws: PathBuf,
    config: PathBuf,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("sessions");
        let ws = tmp.path().join("ws");
        let config = tmp.path().join("config");
        std::fs::create_dir_all(&ws).unwrap();
        Env {
            dir,
            ws,
            config,
            _tmp: tmp,
        }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env("XDG_CONFIG_HOME", &self.config)
            .env("OPENAI_API_KEY", "test")
            .env_remove("LAZARUS_SESSION_DIR")
            .env_remove("LAZARUS_STORE")
            .stdin(Stdio::null());
        c
    }

    /// `lazarus run` with approvals in `mode`, no terminal.
    fn run(&self, server: &ScriptedServer, mode: &str, extra: &[&str]) -> Output {
        self.cmd()
            .args(["run", "--session", "s", "--session-dir"])
            .arg(&self.dir)
            .arg("--workspace")
            .arg(&self.ws)
            .args(["--model", "m", "--base-url", &server.base_url()])
            .args(["--ask-for-approval", mode])
            .args(extra)
            .output()
            .unwrap()
    }

    /// The shell command line of a `lazarus run` of session `id` (approvals `untrusted`) for
    /// a terminal, ending with `; echo EXIT=$?; sleep 60` (so its end stays on the screen).
    fn run_line(&self, server: &ScriptedServer, id: &str) -> String {
        format!(
            "env XDG_CONFIG_HOME={} OPENAI_API_KEY=test {} run --session {id} --session-dir {} --workspace {} --model m --base-url {} --ask-for-approval untrusted -p 'append a line'; echo EXIT=$?; sleep 60",
            sh_quote(self.config.to_str().unwrap()),
            sh_quote(BIN),
            sh_quote(self.dir.to_str().unwrap()),
            sh_quote(self.ws.to_str().unwrap()),
            sh_quote(&server.base_url()),
        )
    }

    fn sessions(&self, args: &[&str]) -> Output {
        self.cmd()
            .args(["sessions", "--session-dir"])
            .arg(&self.dir)
            .args(args)
            .output()
            .unwrap()
    }

    fn ledger(&self) -> PathBuf {
        self.dir.join("s.jsonl")
    }

    fn kinds(&self) -> Vec<(String, Value)> {
        std::fs::read_to_string(self.ledger())
            .unwrap()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (v["kind"].as_str().unwrap().to_string(), v["data"].clone())
            })
            .collect()
    }

    fn effect_lines(&self, name: &str) -> usize {
        std::fs::read_to_string(self.ws.join(name))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A model that asks for one shell call `c1` appending to `effect`, then says done.
fn one_call_server(rt: &tokio::runtime::Runtime) -> ScriptedServer {
    rt.block_on(ScriptedServer::start(Script::new([
        Step::after_tool_result("c1", ScriptedResponse::text("done")),
        Step::reply(ScriptedResponse::tool_call(
            "c1",
            "shell",
            json!({"command": "echo ran >> effect"}),
        ))
        .when(When::RequestNumber { n: 1 }),
    ])))
    .unwrap()
}

/// The index of the first record of `kind` (for call `call`, when given).
fn position(kinds: &[(String, Value)], kind: &str, call: Option<&str>) -> Option<usize> {
    kinds
        .iter()
        .position(|(k, d)| k == kind && call.is_none_or(|c| d["call_id"] == c))
}

#[test]
fn off_a_terminal_the_run_waits_exits_3_and_an_approval_from_another_process_runs_the_call_once() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = one_call_server(&rt);
    let env = Env::new();
    let o = env.run(&server, "untrusted", &["-p", "append a line"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("lazarus sessions approve"), "{err}");
    // the command that continues needs no flags: the session runs in its recorded world
    assert!(
        err.contains(&format!(
            "then continue it in its world: lazarus run --session-dir {} --session s",
            env.dir.display()
        )),
        "{err}"
    );
    assert!(err.contains("shell is not read-only"), "{err}");
    assert_eq!(env.effect_lines("effect"), 0, "nothing ran before approval");
    let store = LocalStore::open(&env.dir).unwrap();
    let id = SessionId::literal("s");
    assert_eq!(store.summary(&id).unwrap().status, Status::AwaitingApproval);
    assert!(!store.load(&id).unwrap().owes_work());

    // listed, one JSON object per line
    let o = env.sessions(&["approvals", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{}", text(&o));
    assert_eq!(lines[0]["session"], "s");
    assert_eq!(lines[0]["call_id"], "c1");
    assert_eq!(lines[0]["tool"], "shell");
    assert_eq!(lines[0]["arguments"], r#"{"command":"echo ran >> effect"}"#);
    assert!(lines[0]["requested_at"].as_str().unwrap().ends_with('Z'));

    // allowed from another process (nobody holds the session: recorded at once)
    let o = env.sessions(&["approve", "s", "c1"]);
    assert!(o.status.success(), "{}", text(&o));
    // twice: recorded once
    let o = env.sessions(&["--json", "approve", "s", "c1"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("recorded at seq"),
        "{}",
        text(&o)
    );
    // a different decision on the same call: refused, naming the first, nothing written
    let before = std::fs::read(env.ledger()).unwrap();
    let o = env.sessions(&["deny", "s", "c1", "--reason", "changed my mind"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("decided already: allow (once) by cli at seq"),
        "{err}"
    );
    assert_eq!(std::fs::read(env.ledger()).unwrap(), before);
    assert_eq!(env.effect_lines("effect"), 0, "approval alone runs nothing");

    // the run goes on: the call runs once
    let o = env.run(&server, "untrusted", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(env.effect_lines("effect"), 1);
    let kinds = env.kinds();
    let decisions = kinds.iter().filter(|(k, _)| k == "approval").count();
    assert_eq!(decisions, 1, "one decision recorded: {kinds:?}");
    let request = position(&kinds, "approval_request", Some("c1")).unwrap();
    let decision = position(&kinds, "approval", Some("c1")).unwrap();
    let intent = position(&kinds, "tool_intent", Some("c1")).unwrap();
    assert!(request < decision && decision < intent, "{kinds:?}");
    assert_eq!(kinds[decision].1["by"], "cli");
    // the receipt says which call waited, who decided and for how long
    let receipt = &kinds[position(&kinds, "resume", None).unwrap()].1;
    assert_eq!(receipt["approvals"][0]["call_id"], "c1", "{receipt}");
    assert_eq!(receipt["approvals"][0]["decision"], "allow");
    assert_eq!(receipt["approvals"][0]["by"], "cli");
    assert!(receipt["approvals"][0]["waited_ms"].is_u64(), "{receipt}");
    // and `sessions show` says so too
    let o = env.sessions(&["show", "s"]);
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(shown.contains("allowed by cli"), "{shown}");
    let o = env.sessions(&["verify", "s"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_denied_call_never_starts_and_the_model_is_told_why() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = one_call_server(&rt);
    let env = Env::new();
    let o = env.run(&server, "untrusted", &["-p", "append a line"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let o = env.sessions(&["deny", "s", "c1", "--reason", "not on a Friday"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = env.run(&server, "untrusted", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(env.effect_lines("effect"), 0, "a denied call never runs");
    let kinds = env.kinds();
    assert!(position(&kinds, "tool_intent", Some("c1")).is_none());
    assert!(position(&kinds, "tool_start", Some("c1")).is_none());
    let outcome = &kinds[position(&kinds, "tool_outcome", Some("c1")).unwrap()].1;
    assert_eq!(outcome["status"], "not_run");
    // the model's next request carries the denial and its reason
    let reqs = server.requests();
    let last = reqs.last().unwrap().to_string();
    assert!(last.contains("denied by cli"), "{last}");
    assert!(last.contains("not on a Friday"), "{last}");
}

#[test]
fn an_unknown_call_id_is_a_clear_error_and_the_ledger_is_unchanged_byte_for_byte() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = one_call_server(&rt);
    let env = Env::new();
    let o = env.run(&server, "untrusted", &["-p", "append a line"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let before = std::fs::read(env.ledger()).unwrap();
    for args in [
        &["approve", "s", "c9"][..],
        &["deny", "s", "c9", "--reason", "x"][..],
    ] {
        let o = env.sessions(args);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("session s has no tool call \"c9\"; waiting for approval: c1"),
            "{err}"
        );
        assert_eq!(std::fs::read(env.ledger()).unwrap(), before);
        assert!(!env.dir.join("s.inbox").exists(), "nothing queued either");
    }
    // a decision wrong in itself (a reason over the limit, a call id no message id can
    // carry): a usage error, nothing written or queued
    let long = "x".repeat(lazarus_session::approval::REASON_BYTES_MAX + 1);
    let bad_id = "c".repeat(300);
    for args in [
        &["deny", "s", "c1", "--reason", long.as_str()][..],
        &["approve", "s", bad_id.as_str()][..],
    ] {
        let o = env.sessions(args);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert_eq!(std::fs::read(env.ledger()).unwrap(), before);
        assert!(!env.dir.join("s.inbox").exists());
    }
    // a session without such a call at all
    let o = env.sessions(&["approve", "nope", "c1"]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_session_grant_survives_kill_9_and_allows_the_next_call_without_asking() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // c1 blocks until `go` exists (so the run can be killed inside it); c2 runs after.
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::after_tool_result("c2", ScriptedResponse::text("both done")),
            Step::reply(ScriptedResponse::tool_call(
                "c2",
                "shell",
                json!({"command": "echo two >> effect2"}),
            ))
            .when(When::AnyToolResult {
                call_id: "c1".into(),
            }),
            Step::reply(ScriptedResponse::tool_call(
                "c1",
                "shell",
                json!({"command": "echo one >> effect1; touch started; while [ ! -e go ]; do sleep 0.05; done"}),
            ))
            .when(When::RequestNumber { n: 1 }),
        ])))
        .unwrap();
    let env = Env::new();
    let o = env.run(&server, "untrusted", &["-p", "two calls"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let o = env.sessions(&["approve", "s", "c1", "--scope", "session"]);
    assert!(o.status.success(), "{}", text(&o));
    // run c1 and kill -9 the run inside it
    let mut child = env
        .cmd()
        .args(["run", "--session", "s", "--session-dir"])
        .arg(&env.dir)
        .arg("--workspace")
        .arg(&env.ws)
        .args(["--model", "m", "--base-url", &server.base_url()])
        .args(["--ask-for-approval", "untrusted"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !env.ws.join("started").exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "c1 never started");
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    std::fs::write(env.ws.join("go"), "").unwrap();
    // resumed: c1 is closed in doubt (not re-run), c2 is allowed by the session's grant
    let o = env.run(&server, "untrusted", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(env.effect_lines("effect1"), 1, "c1 ran once, not again");
    assert_eq!(env.effect_lines("effect2"), 1, "c2 ran, without asking");
    let kinds = env.kinds();
    let c1 = &kinds[position(&kinds, "tool_outcome", Some("c1")).unwrap()].1;
    assert_eq!(c1["status"], "in_doubt");
    let c2 = &kinds[position(&kinds, "approval", Some("c2")).unwrap()].1;
    assert_eq!(c2["by"], "grant:session", "{c2}");
    assert_eq!(c2["decision"], "allow");
    let store = LocalStore::open(&env.dir).unwrap();
    let st = store.load(&SessionId::literal("s")).unwrap();
    assert!(st.session_grants.contains_key("shell"));
    let d = st.call("c2").unwrap().decision().unwrap().clone();
    assert_eq!((d.decision, d.scope), (Decision::Allow, Scope::Session));
    assert_eq!(
        st.call("c1").unwrap().outcome.as_ref().unwrap().status,
        OutcomeStatus::InDoubt
    );
}

#[test]
fn an_always_grant_is_kept_in_the_policy_file_listed_and_revoked() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = one_call_server(&rt);
    let env = Env::new();
    let o = env.run(&server, "untrusted", &["-p", "append a line"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let o = env.sessions(&["approve", "s", "c1", "--scope", "always"]);
    assert!(o.status.success(), "{}", text(&o));
    let policy = env.config.join("lazarus/approvals.toml");
    let kept = std::fs::read_to_string(&policy).unwrap();
    assert!(kept.contains("tool = \"shell\""), "{kept}");
    let o = env
        .cmd()
        .args(["approvals", "list", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listed["tool"], "shell");
    assert_eq!(listed["session"], "s");
    // a new session's shell call runs without asking
    let server2 = one_call_server(&rt);
    let o = env
        .cmd()
        .args(["run", "--session", "t", "--session-dir"])
        .arg(&env.dir)
        .arg("--workspace")
        .arg(&env.ws)
        .args(["--model", "m", "--base-url", &server2.base_url()])
        .args(["--ask-for-approval", "untrusted", "-p", "again"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = std::fs::read_to_string(env.dir.join("t.jsonl")).unwrap();
    assert!(t.contains(r#""by":"grant:always""#), "{t}");
    // revoked: asked again
    let o = env
        .cmd()
        .args(["approvals", "revoke", "shell"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = env
        .cmd()
        .args(["approvals", "revoke", "shell"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let server3 = one_call_server(&rt);
    let o = env
        .cmd()
        .args(["run", "--session", "u", "--session-dir"])
        .arg(&env.dir)
        .arg("--workspace")
        .arg(&env.ws)
        .args(["--model", "m", "--base-url", &server3.base_url()])
        .args(["--ask-for-approval", "untrusted", "-p", "again"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}

#[test]
fn never_asks_nothing_and_on_request_asks_only_when_the_model_escalates() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let env = Env::new();
    // never (the default): no approval records at all
    let server = one_call_server(&rt);
    let o = env.run(&server, "never", &["-p", "append a line"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(position(&env.kinds(), "approval_request", None).is_none());
    // on-request: a plain call runs; an escalated one waits, with its justification
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::after_tool_result("e2", ScriptedResponse::text("done")),
            Step::reply(ScriptedResponse::tool_call(
                "e2",
                "shell",
                json!({"command": "echo escalated >> effect3", "escalate": true, "justification": "it writes outside the usual files"}),
            ))
            .when(When::AnyToolResult {
                call_id: "e1".into(),
            }),
            Step::reply(ScriptedResponse::tool_call(
                "e1",
                "shell",
                json!({"command": "echo plain >> effect3"}),
            ))
            .when(When::LastUserContains {
                text: "escalate".into(),
            }),
        ])))
        .unwrap();
    // another mode (and another model server) is a change of the session's world: refused,
    // naming both, unless asked for
    let o = env.run(&server, "on-request", &["-p", "now escalate"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("approval mode: recorded never, here on-request"),
        "{err}"
    );
    assert!(err.contains("--change-world"), "{err}");
    let o = env.run(
        &server,
        "on-request",
        &["-p", "now escalate", "--change-world"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert_eq!(env.effect_lines("effect3"), 1, "the plain call ran");
    // the model was offered the two arguments that ask
    let first = server.requests()[0].to_string();
    assert!(first.contains("justification"), "{first}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("it writes outside the usual files"), "{err}");
    let o = env.sessions(&["approve", "s", "e2"]);
    assert!(o.status.success(), "{}", text(&o));
    // resumed under another mode: the call asked for under on-request keeps its meaning
    let o = env.run(&server, "never", &["--change-world"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // the allowed call ran (that its tool never sees the two approval arguments is checked
    // with a tool that echoes them: agent/tests/approvals.rs)
    assert_eq!(env.effect_lines("effect3"), 2, "{}", text(&o));
}

#[test]
fn on_a_terminal_the_run_asks_records_the_answer_and_a_kill_9_while_asking_loses_nothing() {
    let Some(tmux) = Tmux::new("the approval prompt") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = one_call_server(&rt);
    let env = Env::new();
    let pidfile = env.ws.join("..").join("run.pid");
    // the shell writes its pid, then becomes the run (exec): that pid is the run's
    let line = env.run_line(&server, "s");
    let run_only = line.split("; echo EXIT").next().unwrap();
    let command = format!(
        "echo $$ > {}; exec {run_only}",
        sh_quote(pidfile.to_str().unwrap())
    );
    tmux.start(&format!("sh -c {}; sleep 60", sh_quote(&command)));
    let screen = tmux.wait_for("allow it?");
    assert!(screen.contains("shell"), "{screen}");
    // the question is durable before it is asked: kill -9 the asking run
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let kinds = env.kinds();
    assert!(position(&kinds, "approval_request", Some("c1")).is_some());
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    assert_eq!(env.effect_lines("effect"), 0);
    // approved from the CLI while nobody runs it; the next run goes on without asking
    let o = env.sessions(&["approve", "s", "c1"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = env.run(&server, "untrusted", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(env.effect_lines("effect"), 1);

    // answering on the terminal: `s` (this session) records the decision, then the call runs
    let server = one_call_server(&rt);
    let command = env.run_line(&server, "t");
    tmux.tmux(&["kill-server"]);
    let tmux = Tmux::new("the approval prompt").unwrap();
    tmux.start(&command);
    tmux.wait_for("allow it?");
    tmux.type_text("s");
    tmux.press("Enter");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert_eq!(env.effect_lines("effect"), 2);
    let t = std::fs::read_to_string(env.dir.join("t.jsonl")).unwrap();
    assert!(
        t.contains(r#""decision":"allow","scope":"session","by":"cli""#),
        "{t}"
    );
}

#[test]
fn a_decision_reaches_a_run_that_holds_the_session_through_its_inbox() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = one_call_server(&rt);
    let env = Env::new();
    // the run waits at the prompt on a terminal; the CLI's decision goes to its inbox
    let Some(tmux) = Tmux::new("the approval prompt") else {
        return;
    };
    let command = env.run_line(&server, "s");
    tmux.start(&command);
    tmux.wait_for("allow it?");
    let o = env.sessions(&["deny", "s", "c1", "--reason", "from elsewhere"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("queued in its inbox"),
        "{}",
        text(&o)
    );
    // the person at the terminal answers yes; the decision that came first stands
    tmux.type_text("y");
    tmux.press("Enter");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(screen.contains("recorded meanwhile"), "{screen}");
    assert_eq!(env.effect_lines("effect"), 0, "denied: never ran");
    let kinds = env.kinds();
    assert_eq!(kinds.iter().filter(|(k, _)| k == "approval").count(), 1);
    let d = &kinds[position(&kinds, "approval", Some("c1")).unwrap()].1;
    assert_eq!(d["decision"], "deny");
}
