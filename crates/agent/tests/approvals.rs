//! The runner's approval gate on its own (the command line's tests drive it through real
//! processes): what a tool is given after a call asked for under `on-request` was allowed —
//! without the two approval arguments, also when the session is resumed under another mode —
//! and that a call of a tool that does not exist is not asked for (it can do nothing).

use std::sync::{Arc, Mutex};

use lazarus_agent::model::ToolSpec;
use lazarus_agent::provider::{CancellationToken, ProviderConfig};
use lazarus_agent::runner::{ApprovalMode, RunOutcome, Runner, RunnerConfig, SharedSession};
use lazarus_agent::tools::{Rerun, Tool, ToolContext, ToolFuture, ToolHooks, ToolOutput, Toolbox};
use lazarus_session::record::{Approval, Decision, Record, Scope, approval_input_id};
use lazarus_session::{CreateOptions, LocalStore, SessionId, SessionState, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

/// A tool that answers the arguments it was given, as JSON text.
struct Echo {
    spec: ToolSpec,
}

impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn rerun(&self) -> Rerun {
        Rerun::fixed(false)
    }

    fn run<'a>(
        &'a self,
        _ctx: &'a ToolContext,
        arguments: &'a Value,
        hooks: &'a mut dyn ToolHooks,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            if let Err(e) = hooks.started(None) {
                return ToolOutput::rejected(e);
            }
            ToolOutput::ok(arguments.to_string())
        })
    }
}

fn toolbox() -> Toolbox {
    let mut t = Toolbox::empty();
    t.register(Arc::new(Echo {
        spec: ToolSpec {
            name: "echo".into(),
            description: "answers its arguments".into(),
            parameters: json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
        },
    }));
    t
}

fn drive(url: &str, store: &LocalStore, mode: ApprovalMode) -> (RunOutcome, SessionState) {
    let ws = tempfile::tempdir().unwrap();
    let mut cfg = RunnerConfig::new(ProviderConfig::new(url), "m", ws.path().to_path_buf());
    cfg.approval.mode = mode;
    let session = store.open(&SessionId::literal("s")).unwrap();
    let shared: SharedSession = Arc::new(Mutex::new(session));
    let runner = Runner::new(cfg).unwrap().with_toolbox(toolbox());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let outcome = rt
        .block_on(runner.drive(&shared, "test", &CancellationToken::new(), &mut |_| {}))
        .unwrap();
    drop(shared);
    (outcome, store.load(&SessionId::literal("s")).unwrap())
}

fn session_with_input(store: &LocalStore) {
    let mut s = store
        .create(CreateOptions {
            id: Some(SessionId::literal("s")),
            meta: None,
        })
        .unwrap();
    s.append_input("i1", "user", "go").unwrap();
}

#[test]
fn an_escalated_call_waits_and_its_tool_never_sees_the_approval_arguments() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::after_tool_result("e1", ScriptedResponse::text("done")),
            Step::reply(ScriptedResponse::tool_call(
                "e1",
                "echo",
                json!({"x": 1, "escalate": true, "justification": "it matters"}),
            ))
            .when(When::RequestNumber { n: 1 }),
        ])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    session_with_input(&store);
    let (outcome, st) = drive(&server.base_url(), &store, ApprovalMode::OnRequest);
    assert_eq!(
        outcome,
        RunOutcome::AwaitingApproval {
            call_id: "e1".into()
        }
    );
    let asked = st.call("e1").unwrap().approval.clone().unwrap();
    assert_eq!(asked.mode, "on-request");
    assert!(asked.reason.contains("it matters"), "{}", asked.reason);
    assert!(st.call("e1").unwrap().intent.is_none());
    // the model was offered the two arguments on the tool that is not read-only
    let offered = server.requests()[0]["tools"].to_string();
    assert!(offered.contains("justification"), "{offered}");
    // allowed, and resumed under another mode: the tool gets the model's other arguments
    let mut s = store.open(&SessionId::literal("s")).unwrap();
    s.append(Record::Approval(Approval {
        input_id: approval_input_id("e1"),
        call_id: "e1".into(),
        decision: Decision::Allow,
        scope: Scope::Once,
        reason: None,
        by: "cli".into(),
        decided_at: "2026-12-06T10:00:00.000Z".into(),
    }))
    .unwrap();
    drop(s);
    let (outcome, st) = drive(&server.base_url(), &store, ApprovalMode::Never);
    assert_eq!(outcome, RunOutcome::Idle);
    assert_eq!(st.tool_result_text("e1"), r#"{"x":1}"#);
}

#[test]
fn a_call_of_a_tool_that_does_not_exist_is_not_asked_for() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::after_tool_result("n1", ScriptedResponse::text("done")),
            Step::reply(ScriptedResponse::tool_call("n1", "nope", json!({})))
                .when(When::RequestNumber { n: 1 }),
        ])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    session_with_input(&store);
    let (outcome, st) = drive(&server.base_url(), &store, ApprovalMode::Untrusted);
    assert_eq!(outcome, RunOutcome::Idle);
    let call = st.call("n1").unwrap();
    assert!(call.approval.is_none());
    assert!(st.tool_result_text("n1").contains("unknown tool"));
    // a tool that exists and is not read-only is asked for
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    session_with_input(&store);
    let server = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::tool_call("k1", "echo", json!({"x": 2})),
        )])))
        .unwrap();
    let (outcome, _) = drive(&server.base_url(), &store, ApprovalMode::Untrusted);
    assert_eq!(
        outcome,
        RunOutcome::AwaitingApproval {
            call_id: "k1".into()
        }
    );
}
