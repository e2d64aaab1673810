//! The workspace tools and their registry.
//!
//! Every tool calls [`ToolHooks::started`] right before its side effect begins (for the shell,
//! with the process group of the command, which is spawned but held at a gate until the hook
//! returns). If the hook refuses, the tool performs no effect. This is how the runner durably
//! records "started" before anything happens.

mod fs;
mod path;
mod shell;
mod tool;
mod toolbox;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use fs::{EditFileTool, ListDirTool, ReadFileTool, WriteFileTool};
pub use path::{PathError, Workspace};
pub use shell::{GATE_REFUSED_EXIT, ShellTool};
pub use tool::{
    CallRef, NoHooks, Reattached, Rerun, TaskHandle, TaskStatus, Tool, ToolContext, ToolFuture,
    ToolHooks, ToolOutput, ToolStatus, outside_schema,
};
pub use toolbox::{ToolSource, Toolbox};

pub use crate::process::ProcessGroupRef;

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
