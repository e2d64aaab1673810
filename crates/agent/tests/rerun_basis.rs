//! The runner's extension point for tools: may a call that started without an outcome run
//! again after a crash? Decided when the call starts, with the facts it rests on recorded in
//! its intent (`rerun_basis`), and never re-run on a weaker basis at resume.
//!
//! `golden/before-rerun-basis.jsonl` was written before `rerun_basis` existed: it must keep
//! resuming exactly as it did (shell in doubt, the idempotent built-ins re-run, an intent
//! without a start run once).

use std::path::Path;
use std::sync::Arc;

use lazarus_agent::model::ToolSpec;
use lazarus_agent::provider::{CancellationToken, ProviderConfig};
use lazarus_agent::runner::{RunOutcome, Runner, RunnerConfig, SharedSession};
use lazarus_agent::tools::{
    Rerun, Tool, ToolContext, ToolFuture, ToolHooks, ToolOutput, ToolStatus, Toolbox,
};
use lazarus_session::record::{OutcomeStatus, ToolIntent};
use lazarus_session::{CreateOptions, LocalStore, SessionId, SessionState, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};
use serde_json::{Map, Value, json};

const GOLDEN: &str = include_str!("golden/before-rerun-basis.jsonl");

fn runner(url: &str, ws: &Path, toolbox: Toolbox) -> Runner {
    let cfg = RunnerConfig::new(ProviderConfig::new(url), "m", ws.to_path_buf());
    Runner::new(cfg).unwrap().with_toolbox(toolbox)
}

fn drive(
    runner: &Runner,
    store: &LocalStore,
    id: &'static str,
    expected: RunOutcome,
) -> SessionState {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let session = store.open(&SessionId::literal(id)).unwrap();
    let shared: SharedSession = Arc::new(std::sync::Mutex::new(session));
    let outcome = rt
        .block_on(runner.drive(&shared, "test", &CancellationToken::new(), &mut |_| {}))
        .unwrap();
    assert_eq!(outcome, expected);
    drop(shared);
    store.load(&SessionId::literal(id)).unwrap()
}

fn text_server(rt: &tokio::runtime::Runtime, steps: Vec<Step>) -> ScriptedServer {
    rt.block_on(ScriptedServer::start(Script::new(steps)))
        .unwrap()
}

#[test]
fn a_ledger_from_before_rerun_basis_resumes_exactly_as_it_did() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = text_server(
        &rt,
        vec![Step::reply(ScriptedResponse::text("all done")).repeat()],
    );
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "remember the milk").unwrap();
    let path = dir.path().join("before-rerun-basis.jsonl");
    std::fs::write(&path, GOLDEN).unwrap();
    let store = LocalStore::open(dir.path()).unwrap();

    let st = drive(
        &runner(&server.base_url(), ws.path(), Toolbox::standard()),
        &store,
        "before-rerun-basis",
        RunOutcome::Idle,
    );

    let receipt = st.last_receipt.clone().expect("a resume receipt");
    assert_eq!(
        (
            receipt.calls_in_doubt,
            receipt.calls_rerun,
            receipt.calls_not_started
        ),
        (1, 2, 1),
        "shell in doubt; write_file and read_file re-run; list_dir (intent only) run"
    );
    let status = |id: &str| st.call(id).unwrap().outcome.as_ref().unwrap().status;
    assert_eq!(status("c1"), OutcomeStatus::InDoubt);
    assert_eq!(status("c2"), OutcomeStatus::Ok);
    assert_eq!(status("c4"), OutcomeStatus::Ok);
    assert!(st.tool_result_text("c3").contains("remember the milk"));
    assert!(
        !ws.path().join("shell.txt").exists(),
        "the shell call was not run again"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("w.txt")).unwrap(),
        "hello"
    );
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(
        after.starts_with(GOLDEN),
        "the old records stay byte for byte"
    );
}

/// A tool source whose re-run answer rests on a run-time fact (here: whether it is trusted
/// now), the way an MCP server's does. Each run appends a line to `count.txt`.
struct Sourced {
    trusted_now: bool,
    /// What `may_rerun` answers, whatever was recorded (to check the runner's own AND).
    permissive: bool,
    /// Stops the run right after the effect began, before an outcome can be recorded (a
    /// crash mid-call, as far as the ledger can tell).
    interrupt: bool,
}

impl Sourced {
    fn new(trusted_now: bool) -> Self {
        Sourced {
            trusted_now,
            permissive: false,
            interrupt: false,
        }
    }
}

fn basis(trusted: bool) -> Map<String, Value> {
    json!({"source": "test", "trusted": trusted, "annotations": {"idempotentHint": true}})
        .as_object()
        .unwrap()
        .clone()
}

impl Tool for Sourced {
    fn spec(&self) -> &ToolSpec {
        static SPEC: std::sync::LazyLock<ToolSpec> = std::sync::LazyLock::new(|| ToolSpec {
            name: "count".into(),
            description: "adds a line to count.txt".into(),
            parameters: json!({"type": "object"}),
        });
        &SPEC
    }

    fn rerun(&self) -> Rerun {
        Rerun {
            idempotent: self.trusted_now,
            basis: Some(basis(self.trusted_now)),
        }
    }

    fn may_rerun(&self, recorded: &Rerun) -> bool {
        let was_trusted = recorded
            .basis
            .as_ref()
            .and_then(|b| b.get("trusted"))
            .and_then(Value::as_bool)
            == Some(true);
        self.permissive || was_trusted && self.trusted_now
    }

    fn run<'a>(
        &'a self,
        ctx: &'a ToolContext,
        _arguments: &'a Value,
        hooks: &'a mut dyn ToolHooks,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            if let Err(e) = hooks.started(None) {
                return ToolOutput::rejected(e);
            }
            let path = ctx.workspace.join("count.txt");
            let mut text = std::fs::read_to_string(&path).unwrap_or_default();
            text.push_str("ran\n");
            std::fs::write(&path, text).unwrap();
            if self.interrupt {
                ctx.cancel.cancel();
                return ToolOutput {
                    status: ToolStatus::Cancelled,
                    ..ToolOutput::ok("stopped")
                };
            }
            ToolOutput::ok("counted")
        })
    }
}

fn runs(ws: &Path) -> usize {
    std::fs::read_to_string(ws.join("count.txt"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// Runs `first` until its call of `count` started and the run stopped (no outcome), then
/// resumes with `then`. Returns the intent `first` recorded, whether resume re-ran the call,
/// and how many times its effect happened.
fn interrupted_then_resumed(first: Sourced, then: Sourced) -> (ToolIntent, bool, usize) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = text_server(
        &rt,
        vec![
            Step::reply(ScriptedResponse::tool_call("k1", "count", json!({}))),
            Step::after_tool_result("k1", ScriptedResponse::text("counted")).repeat(),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let mut s = store
        .create(CreateOptions {
            id: Some(SessionId::literal("s")),
            meta: None,
        })
        .unwrap();
    s.append_input("m1", "user", "count").unwrap();
    drop(s);
    let tools = |tool: Sourced| {
        let mut tb = Toolbox::empty();
        tb.register(Arc::new(tool));
        tb
    };
    let interrupted = Sourced {
        interrupt: true,
        ..first
    };
    let st = drive(
        &runner(&server.base_url(), ws.path(), tools(interrupted)),
        &store,
        "s",
        RunOutcome::Cancelled,
    );
    assert!(
        st.call("k1").unwrap().outcome.is_none(),
        "started, no outcome"
    );
    let intent = store
        .records(&SessionId::literal("s"), 0, usize::MAX)
        .unwrap()
        .into_iter()
        .find(|r| r.kind == "tool_intent")
        .map(|r| serde_json::from_value::<ToolIntent>(r.data).unwrap())
        .expect("an intent");

    let st = drive(
        &runner(&server.base_url(), ws.path(), tools(then)),
        &store,
        "s",
        RunOutcome::Idle,
    );
    let receipt = st.last_receipt.clone().unwrap();
    assert_eq!(receipt.calls_rerun + receipt.calls_in_doubt, 1);
    let rerun = receipt.calls_rerun == 1;
    let status = st.call("k1").unwrap().outcome.as_ref().unwrap().status;
    assert_eq!(status == OutcomeStatus::InDoubt, !rerun);
    (intent, rerun, runs(ws.path()))
}

#[test]
fn the_intent_records_the_facts_the_answer_rests_on() {
    let (intent, _, _) = interrupted_then_resumed(Sourced::new(true), Sourced::new(true));
    assert!(intent.idempotent);
    assert_eq!(intent.rerun_basis, Some(basis(true)));
    let (intent, _, _) = interrupted_then_resumed(Sourced::new(false), Sourced::new(false));
    assert!(!intent.idempotent);
    assert_eq!(intent.rerun_basis, Some(basis(false)));
}

#[test]
fn resume_re_runs_only_when_the_recorded_facts_and_today_both_allow_it() {
    let rerun_and_runs = |first, then| {
        let (_, rerun, runs) = interrupted_then_resumed(first, then);
        (rerun, runs)
    };
    // trusted then and now: re-run (its effect twice, as an idempotent call may)
    assert_eq!(
        rerun_and_runs(Sourced::new(true), Sourced::new(true)),
        (true, 2)
    );
    // trusted then, not now: in doubt, never re-run on a weaker basis today
    assert_eq!(
        rerun_and_runs(Sourced::new(true), Sourced::new(false)),
        (false, 1)
    );
    // not trusted then, trusted now: in doubt, decided from what was true when it started
    assert_eq!(
        rerun_and_runs(Sourced::new(false), Sourced::new(true)),
        (false, 1)
    );
}

#[test]
fn a_tool_cannot_re_run_a_call_its_intent_said_was_not_idempotent() {
    // the tool would allow anything; the recorded `idempotent: false` still wins
    let permissive = Sourced {
        permissive: true,
        ..Sourced::new(true)
    };
    let (_, rerun, runs) = interrupted_then_resumed(Sourced::new(false), permissive);
    assert_eq!((rerun, runs), (false, 1));
}
