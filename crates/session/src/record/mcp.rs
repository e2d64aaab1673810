//! MCP tasks (record kinds revision 5): a tool call an MCP server answered with a task handle
//! (the Tasks extension, `io.modelcontextprotocol/tasks`) instead of a result. The handle is
//! recorded durably before the first `tasks/get` ([`ToolTask`]), and each status change that
//! matters after it ([`ToolTaskStatus`]), so a resume after any crash polls the same task
//! instead of calling the tool again or closing the call in doubt.

use serde::{Deserialize, Serialize};

/// A task's status, as the server says it (SEP-2663).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Working,
    /// The server waits for input from the client (Lazarus gives none: the task is
    /// cancelled).
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    /// `completed`, `failed` or `cancelled`: the task will not change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A started call became a task on its MCP server: the handle, recorded before the first
/// poll. At most one per call, after its `tool_start` and before its `tool_outcome`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolTask {
    pub call_id: String,
    /// The configured server name.
    pub server: String,
    /// The server's fingerprint (`sha256:…`, as the session's world records it): a resume
    /// polls the task only on this very program.
    pub fingerprint: String,
    /// The server's id for the task.
    pub task_id: String,
    /// The status the handle carried (normally `working`).
    pub status: TaskStatus,
    /// How long the server keeps the task after it was created, in milliseconds (`None`: it
    /// said nothing, or unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// How often the server asks to be polled, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<u64>,
    /// When the handle arrived (RFC 3339, UTC, ms; Lazarus's clock): the TTL runs from
    /// about then.
    pub created_at: String,
}

/// A task's status changed (`working` → `input_required`, `completed`, `failed`,
/// `cancelled`, or back to `working`), as a poll saw it. The result itself is the call's
/// `tool_outcome`, which follows a terminal status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolTaskStatus {
    pub call_id: String,
    pub task_id: String,
    pub status: TaskStatus,
    /// What the server said with it (`statusMessage`), when it said something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The MCP tool calls a resume reused, re-ran and closed in doubt, and the tasks it found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpCalls {
    pub calls_reused: u64,
    pub calls_rerun: u64,
    pub calls_in_doubt: u64,
    /// Calls whose recorded task was polled again instead of being called again
    /// (revision 5; absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tasks_reattached: u64,
    /// Of those, tasks the first poll found finished (completed, failed or cancelled).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tasks_finished_while_away: u64,
    /// Of those, tasks the first poll found still working (polled on to their end).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tasks_still_working: u64,
    /// Of those, tasks the server no longer knew (restarted, or past their TTL): closed in
    /// doubt.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tasks_lost: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
