//! The workspace tools and their registry.
//!
//! Every tool calls [`ToolHooks::started`] right before its side effect begins (for the shell,
//! with the process group of the command, which is spawned but held at a gate until the hook
//! returns). If the hook refuses, the tool performs no effect. This is how the runner durably
//! records "started" before anything happens.

mod fs;
mod path;
mod shell;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

pub use fs::{EditFileTool, ListDirTool, ReadFileTool, WriteFileTool};
pub use path::{PathError, Workspace};
pub use shell::{GATE_REFUSED_EXIT, ShellTool};

use crate::model::ToolSpec;
pub use crate::process::ProcessGroupRef;
use crate::sandbox::Sandbox;

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error,
    Timeout,
    Cancelled,
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
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            status: ToolStatus::Error,
            text: text.into(),
            exit_code: None,
            effect_started: true,
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

/// Limits of the tools. Every limit names its unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolLimits {
    /// Shell timeout when the call gives none, in seconds.
    pub shell_default_timeout_secs: u64,
    /// Largest shell timeout a call may ask for, in seconds.
    pub shell_max_timeout_secs: u64,
    /// Time between SIGTERM and SIGKILL when a shell's group is terminated, in milliseconds.
    pub shell_kill_grace_ms: u64,
    /// Bytes of shell output kept from the start.
    pub output_head_bytes: usize,
    /// Bytes of shell output kept from the end.
    pub output_tail_bytes: usize,
    /// Largest number of bytes `read_file` returns.
    pub read_max_bytes: usize,
    /// Bytes `read_file` reads at most to skip to the requested `offset`.
    #[serde(default = "default_read_scan_max_bytes")]
    pub read_scan_max_bytes: u64,
    /// Largest content `write_file` / `edit_file` writes, in bytes.
    pub write_max_bytes: usize,
    /// Largest number of entries `list_dir` returns.
    pub list_max_entries: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits {
            shell_default_timeout_secs: 120,
            shell_max_timeout_secs: 600,
            shell_kill_grace_ms: 2_000,
            output_head_bytes: 16 * 1024,
            output_tail_bytes: 16 * 1024,
            read_max_bytes: 256 * 1024,
            read_scan_max_bytes: default_read_scan_max_bytes(),
            write_max_bytes: 8 * 1024 * 1024,
            list_max_entries: 1_000,
        }
    }
}

fn default_read_scan_max_bytes() -> u64 {
    256 * 1024 * 1024
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

    /// On resume, for a call that started without an outcome and whose intent said it may
    /// be re-run (`recorded`): whether it may run again. The runner only asks when the
    /// recorded answer was yes, so the result is never more permissive than what was true
    /// when the call started. The default also asks today's answer (the conservative AND);
    /// a tool source whose answer rests on run-time facts re-decides from `recorded.basis`
    /// and never re-runs on a weaker basis than it records.
    fn may_rerun(&self, recorded: &Rerun) -> bool {
        recorded.idempotent && self.rerun().idempotent
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
}

/// The tools offered to the model, by name.
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl Toolbox {
    pub fn empty() -> Self {
        Toolbox::default()
    }

    /// `shell`, `read_file`, `write_file`, `edit_file`, `list_dir`.
    pub fn standard() -> Self {
        let mut t = Toolbox::empty();
        t.register(Arc::new(ShellTool));
        t.register(Arc::new(ReadFileTool));
        t.register(Arc::new(WriteFileTool));
        t.register(Arc::new(EditFileTool));
        t.register(Arc::new(ListDirTool));
        t
    }

    /// Adds (or replaces) a tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.name().to_string(), tool);
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.tools.keys().map(String::as_str)
    }

    /// Specs for the model, sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec().clone()).collect()
    }

    /// Parses the raw argument text and runs the named tool. Unknown tools and invalid JSON
    /// give an error output (no effect) whose text tells the model what went wrong.
    pub async fn run(
        &self,
        ctx: &ToolContext,
        name: &str,
        arguments: &str,
        hooks: &mut dyn ToolHooks,
    ) -> ToolOutput {
        let Some(tool) = self.get(name) else {
            let known: Vec<_> = self.names().collect();
            return ToolOutput::rejected(format!(
                "error: unknown tool {name:?}; available tools: {}",
                known.join(", ")
            ));
        };
        let args: Value = if arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str(arguments) {
                Ok(v) => v,
                Err(e) => {
                    return ToolOutput::rejected(format!(
                        "error: the arguments of {name} are not valid JSON ({e}); send a JSON object matching its parameters"
                    ));
                }
            }
        };
        tool.run(ctx, &args, hooks).await
    }
}

/// Argument access with errors worded for the model.
pub(crate) struct Args<'a> {
    tool: &'static str,
    value: &'a Value,
}

impl<'a> Args<'a> {
    pub(crate) fn new(tool: &'static str, value: &'a Value) -> Result<Self, String> {
        if !value.is_object() {
            return Err(format!(
                "error: the arguments of {tool} must be a JSON object, got {}",
                kind(value)
            ));
        }
        Ok(Args { tool, value })
    }

    pub(crate) fn string(&self, key: &str) -> Result<&'a str, String> {
        match self.value.get(key) {
            Some(Value::String(s)) => Ok(s),
            None | Some(Value::Null) => Err(format!(
                "error: {} needs the string argument {key:?}",
                self.tool
            )),
            Some(other) => Err(format!(
                "error: argument {key:?} of {} must be a string, got {}",
                self.tool,
                kind(other)
            )),
        }
    }

    pub(crate) fn opt_string(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.value.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.string(key).map(Some),
        }
    }

    pub(crate) fn opt_u64(&self, key: &str) -> Result<Option<u64>, String> {
        match self.value.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .or_else(|| {
                    v.as_f64()
                        .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                        .map(|f| f as u64)
                })
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .map(Some)
                .ok_or_else(|| {
                    format!(
                        "error: argument {key:?} of {} must be a non-negative integer, got {v}",
                        self.tool
                    )
                }),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn duration_secs(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

#[cfg(test)]
mod tests;
