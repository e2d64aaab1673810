//! What a tool is to the runner: the [`Tool`] trait (the extension point: an owned spec, the
//! re-run answer with its facts, the run), what a call gets ([`ToolContext`]) and hands back
//! ([`ToolOutput`]), and the hooks through which it tells the runner that its effect starts.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::ToolLimits;
use crate::model::ToolSpec;
use crate::process::ProcessGroupRef;
use crate::sandbox::Sandbox;

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error,
    Timeout,
    Cancelled,
    /// The effect started and what became of it is unknown (an MCP server that died or a
    /// connection that broke mid-call): recorded as in doubt, never as an error, never
    /// retried by itself.
    InDoubt,
}

/// The result of a tool call. `text` is what goes back to the model (and into the ledger).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutput {
    pub status: ToolStatus,
    pub text: String,
    /// Exit code of a shell command, when it exited normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// False when the tool returned before performing its effect (bad arguments, path
    /// refused, the `started` hook refused). The runner may then record the outcome without
    /// a start.
    #[serde(default = "yes")]
    pub effect_started: bool,
    /// The run was stopped, and the tool still knows how the call ended — it told its
    /// server to stop and heard back (an MCP call given `notifications/cancelled`, a task
    /// cancelled with `tasks/cancel`): the runner records this outcome instead of leaving the
    /// call for resume.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub settled: bool,
}

fn yes() -> bool {
    true
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        ToolOutput {
            status: ToolStatus::Ok,
            text: text.into(),
            exit_code: None,
            effect_started: true,
            settled: false,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            status: ToolStatus::Error,
            text: text.into(),
            exit_code: None,
            effect_started: true,
            settled: false,
        }
    }

    /// An error before any effect began.
    pub fn rejected(text: impl Into<String>) -> Self {
        ToolOutput {
            effect_started: false,
            ..ToolOutput::error(text)
        }
    }
}

/// Callbacks from a running tool to the runner.
pub trait ToolHooks: Send {
    /// Called right before the side effect begins, with the process group when the tool runs
    /// a process. `Err(reason)`: the tool must not perform the effect.
    fn started(&mut self, process: Option<ProcessGroupRef>) -> Result<(), String>;

    /// What a long call reports of its progress (for the terminal; not recorded).
    fn progress(&mut self, _text: &str) {}

    /// The call became a task on its server (an MCP task handle): recorded durably
    /// (`tool_task`) before this returns, so the tool must not poll the task before it
    /// returns `Ok`. `Err(reason)`: it could not be recorded; the tool should cancel the task.
    fn task_created(&mut self, _task: &TaskHandle) -> Result<(), String> {
        Ok(())
    }

    /// The task's status changed (`tool_task_status`, recorded before this returns).
    fn task_status(
        &mut self,
        _task_id: &str,
        _status: TaskStatus,
        _message: Option<&str>,
    ) -> Result<(), String> {
        Ok(())
    }

    /// What the first poll of a task reattached after a crash found (for the receipt).
    fn task_reattached(&mut self, _seen: Reattached) {}
}

pub use lazarus_session::record::TaskStatus;

/// A task a call became on its server, as a tool reports it to the runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskHandle {
    /// The configured server name, and its fingerprint (the program).
    pub server: String,
    pub fingerprint: String,
    pub task_id: String,
    pub status: TaskStatus,
    pub ttl_ms: Option<u64>,
    pub poll_interval_ms: Option<u64>,
}

/// What the first poll of a task found when a resume asked its server for it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reattached {
    /// Still working (or waiting for input): polled on.
    StillWorking,
    /// It ended while nobody polled (completed, failed or cancelled).
    FinishedWhileAway,
    /// The server no longer knows it (why, in words): the call is in doubt.
    Lost(String),
}

/// Hooks that accept everything (for tests and tools run outside a session).
#[derive(Debug, Default, Clone)]
pub struct NoHooks {
    /// Every `started` call, in order.
    pub started: Vec<Option<ProcessGroupRef>>,
}

impl ToolHooks for NoHooks {
    fn started(&mut self, process: Option<ProcessGroupRef>) -> Result<(), String> {
        self.started.push(process);
        Ok(())
    }
}

/// What every tool call gets.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The directory all paths are confined to.
    pub workspace: PathBuf,
    /// Cancelled when the runner stops (SIGINT/SIGTERM).
    pub cancel: CancellationToken,
    pub limits: ToolLimits,
    /// How `shell` commands are confined.
    pub sandbox: Arc<Sandbox>,
    /// The call being run, when it belongs to a session (tools that pass an idempotency key
    /// on, like MCP's `_meta`, build it from this).
    pub call: Option<CallRef>,
}

/// Which call of which session a tool runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRef {
    pub session: String,
    pub call_id: String,
    /// The key its intent recorded, `<session>/<call id>`: a re-run on resume sends the same.
    pub idempotency_key: String,
    /// The W3C `traceparent` of the call's `execute_tool` span, when OpenTelemetry is on
    /// (an MCP call passes it on in `_meta`, so the server's spans join the session's trace).
    pub traceparent: Option<String>,
}

impl CallRef {
    /// The key that stays the same when this call is run again on resume.
    pub fn idempotency_key(&self) -> String {
        self.idempotency_key.clone()
    }
}

impl ToolContext {
    /// A context with the default sandbox (`workspace-write`, no network), probed once per
    /// process.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        ToolContext {
            workspace: workspace.into(),
            cancel: CancellationToken::new(),
            limits: ToolLimits::default(),
            sandbox: crate::sandbox::default_probed(),
            call: None,
        }
    }
}

/// Boxed future returned by [`Tool::run`] (object safe).
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolOutput> + Send + 'a>>;

/// Whether a call may run again after a crash left it started without an outcome, and the
/// facts that answer was decided from. Recorded in the call's `tool_intent` when it starts
/// (`idempotent`, `rerun_basis`), so resume decides from what was true then.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rerun {
    /// Running the same call twice leaves the same state as running it once.
    pub idempotent: bool,
    /// The run-time facts behind `idempotent` for tools whose answer is not fixed by their
    /// code (an MCP server's name and version, the tool's annotations, whether the server
    /// is trusted). `None` for built-in tools.
    pub basis: Option<Map<String, Value>>,
}

impl Rerun {
    /// An answer fixed by the tool's code (the built-in tools).
    pub fn fixed(idempotent: bool) -> Self {
        Rerun {
            idempotent,
            basis: None,
        }
    }
}

/// A tool the model can call: the extension point of the runner. Built-in tools implement it
/// with fixed specs; a tool source discovered at run time (an MCP server) builds its specs
/// when it starts, which is why they are owned values.
pub trait Tool: Send + Sync {
    /// Name, description and JSON Schema of the arguments, as offered to the model.
    fn spec(&self) -> &ToolSpec;

    /// Whether a call of this tool may be re-run after a crash, with the facts behind that
    /// answer; asked when a call starts and recorded in its intent.
    fn rerun(&self) -> Rerun;

    /// Whether the tool only reads: its calls need no approval under
    /// `--ask-for-approval untrusted`. Asked of the tool's code (the built-ins) or of facts a
    /// tool source vouches for (an MCP tool's `readOnlyHint` from a trusted server). Default:
    /// no.
    fn read_only(&self) -> bool {
        false
    }

    /// On resume, for a call that started without an outcome and whose intent said it may
    /// be re-run (`recorded`): whether it may run again. The runner only asks when the
    /// recorded answer was yes, so the result is never more permissive than what was true
    /// when the call started. The default also asks today's answer (the conservative AND);
    /// a tool source whose answer rests on run-time facts re-decides from `recorded.basis`
    /// and never re-runs on a weaker basis than it records.
    fn may_rerun(&self, recorded: &Rerun) -> bool {
        recorded.idempotent && self.rerun().idempotent
    }

    /// Why a call cut off after it started may not run again (`recorded`: what its intent
    /// recorded), for the receipt and every view of the call. A tool whose answer rests on
    /// run-time facts names the one that decided (an MCP server that is not trusted).
    fn rerun_refused_why(&self, recorded: Option<&Rerun>) -> String {
        let _ = recorded;
        format!(
            "{} is not idempotent: running it again could repeat its effect",
            self.name()
        )
    }

    /// On resume, for a call cut off after its task was recorded (`task`): asks the server
    /// for that task again — never calls the tool a second time — and waits for its end,
    /// reporting status changes and what the first poll found through `hooks`. `None`: the
    /// tool has no tasks (the call is closed in doubt).
    fn reattach<'a>(
        &'a self,
        ctx: &'a ToolContext,
        task: &'a lazarus_session::state::TaskInfo,
        hooks: &'a mut dyn ToolHooks,
    ) -> Option<ToolFuture<'a>> {
        let _ = (ctx, task, hooks);
        None
    }

    /// Runs the call. Must call `hooks.started` right before the side effect and perform no
    /// effect if it returns `Err`.
    fn run<'a>(
        &'a self,
        ctx: &'a ToolContext,
        arguments: &'a Value,
        hooks: &'a mut dyn ToolHooks,
    ) -> ToolFuture<'a>;

    /// The tool's name (its spec's).
    fn name(&self) -> &str {
        &self.spec().name
    }

    /// What an `always` grant for this tool must also hold, beyond its name, to cover it:
    /// for a tool of a source configured at run time (an MCP server), that source's
    /// fingerprint, so the same name on another program asks again. `None` (the built-ins):
    /// the name is the tool.
    fn grant_key(&self) -> Option<String> {
        None
    }
}

/// Why `arguments` lie outside `spec`'s schema, checked before a person is asked about the
/// call and before the tool is given it: not a JSON object, a key the schema does not
/// declare where it says `"additionalProperties": false` (a decoy a person would read instead
/// of the argument that runs), or a required key missing. `None`: within it. (Types and
/// formats are each tool's to check.)
pub fn outside_schema(spec: &ToolSpec, arguments: &str) -> Option<String> {
    let schema = &spec.parameters;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return None;
    }
    let Ok(Value::Object(args)) = serde_json::from_str::<Value>(arguments) else {
        return Some(format!(
            "the arguments of {} must be a JSON object",
            spec.name
        ));
    };
    let declared = schema.get("properties").and_then(Value::as_object);
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        let mut unknown: Vec<&str> = args
            .keys()
            .filter(|k| declared.is_none_or(|d| !d.contains_key(*k)))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            unknown.truncate(8);
            let known: Vec<&str> = declared
                .map(|d| d.keys().map(String::as_str).collect())
                .unwrap_or_default();
            return Some(format!(
                "{} takes only {} (its schema says additionalProperties: false); refused: {}",
                spec.name,
                if known.is_empty() {
                    "no arguments".to_string()
                } else {
                    known.join(", ")
                },
                unknown.join(", ")
            ));
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        let missing: Vec<&str> = required
            .iter()
            .filter_map(Value::as_str)
            .filter(|k| !args.contains_key(*k))
            .collect();
        if !missing.is_empty() {
            return Some(format!(
                "{} needs the argument{} {}",
                spec.name,
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", ")
            ));
        }
    }
    None
}
