//! MCP tasks (the Tasks extension, SEP-2663): a `tools/call` a server answered with a task
//! handle, followed to its end. The runner records the handle before the first poll (the
//! tool's hooks), so after any crash a resume asks the same server for the same task
//! ([`crate::tool::McpTool`]'s `reattach`) instead of calling the tool again.
//!
//! * Polled at the server's `pollIntervalMs` (kept within [`POLL_MS_MIN`]..[`POLL_MS_MAX`]),
//!   each status change recorded (`tool_task_status`); the result comes inline with
//!   `completed`.
//! * `tool_timeout_sec` is a wait: when it passes, the task is left running (the outcome says
//!   so) unless the server is configured `cancel_task_on_timeout = true`.
//! * A stop (Ctrl-C, SIGTERM, the gateway's drain, an editor's cancel: the call's
//!   cancellation token) sends `tasks/cancel`, then records what `tasks/get` says. When the
//!   server cannot be told, the call is left for resume, which polls the task again.
//! * A task the server no longer knows (an error to `tasks/get`, whatever its code: FastMCP
//!   answers `-32602 Task … not found`) is closed in doubt, naming why.

use std::time::{Duration, Instant};

use lazarus_agent::tools::{Reattached, TaskStatus, ToolHooks, ToolOutput, ToolStatus};
use rmcp::model::{CallToolResult, DetailedTask, GetTaskResult, TaskPayload};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::content::{self, snippet};
use crate::server::McpServer;

/// Shortest poll interval honoured, in milliseconds (a server asking for less gets this).
pub const POLL_MS_MIN: u64 = 50;
/// Longest poll interval honoured, in milliseconds.
pub const POLL_MS_MAX: u64 = 30_000;
/// The poll interval when the server names none, in milliseconds.
pub const POLL_MS_DEFAULT: u64 = 1_000;
/// How long one `tasks/get` may take before it counts as unanswered.
const ASK_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `tasks/cancel`, and each `tasks/get` after it, may take on a stop.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(10);
/// Polls after `tasks/cancel` while the server still says `working` (cancellation is
/// cooperative), `CANCEL_SETTLE_POLL` apart.
const CANCEL_SETTLE_POLLS: u32 = 10;
const CANCEL_SETTLE_POLL: Duration = Duration::from_millis(100);
/// Unanswered polls in a row after which the task is given up (the call in doubt).
const UNANSWERED_POLLS_MAX: u32 = 3;

/// Why a task request got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskAsk {
    /// The server answered with an error (an unknown task: `-32602 Task … not found`, or a
    /// method it does not have): it cannot tell about the task.
    Refused(String),
    /// No answer: the connection broke, the server died, or it did not answer in time.
    Unreachable(String),
}

impl McpServer {
    /// `tasks/get` for `task_id`, answered within `within`.
    pub async fn get_task(
        &self,
        task_id: &str,
        within: Duration,
    ) -> Result<GetTaskResult, TaskAsk> {
        let ask = self
            .client
            .peer()
            .get_task(rmcp::model::GetTaskParams::new(task_id));
        self.task_answer(tokio::time::timeout(within, ask).await)
    }

    /// `tasks/cancel` for `task_id`, acknowledged within `within` (cancellation is
    /// cooperative: a `tasks/get` says what became of the task).
    pub async fn cancel_task(&self, task_id: &str, within: Duration) -> Result<(), TaskAsk> {
        let ask = self
            .client
            .peer()
            .cancel_task(rmcp::model::CancelTaskParams::new(task_id));
        self.task_answer(tokio::time::timeout(within, ask).await)
    }

    fn task_answer<T>(
        &self,
        r: Result<Result<T, rmcp::ServiceError>, tokio::time::error::Elapsed>,
    ) -> Result<T, TaskAsk> {
        match r {
            Ok(Ok(v)) => Ok(v),
            // the server answered: it does not know the task, or will not say
            Ok(Err(rmcp::ServiceError::McpError(e))) => Err(TaskAsk::Refused(format!(
                "error {}: {}",
                e.code.0, e.message
            ))),
            Ok(Err(e)) => Err(TaskAsk::Unreachable(self.with_stderr(&e.to_string()))),
            Err(_) => Err(TaskAsk::Unreachable("no answer in time".into())),
        }
    }
}

/// The poll interval a server asked for, within bounds.
pub fn poll_interval(ms: Option<u64>) -> Duration {
    Duration::from_millis(
        ms.unwrap_or(POLL_MS_DEFAULT)
            .clamp(POLL_MS_MIN, POLL_MS_MAX),
    )
}

/// The status the extension names, as a record says it.
pub fn status_of(t: &DetailedTask) -> TaskStatus {
    match t.payload {
        TaskPayload::Working => TaskStatus::Working,
        TaskPayload::InputRequired { .. } => TaskStatus::InputRequired,
        TaskPayload::Completed { .. } => TaskStatus::Completed,
        TaskPayload::Failed { .. } => TaskStatus::Failed,
        TaskPayload::Cancelled => TaskStatus::Cancelled,
        // a status a newer extension adds: treated as still working
        _ => TaskStatus::Working,
    }
}

/// One task being followed to its end.
pub struct Follow<'a> {
    pub server: &'a McpServer,
    pub task_id: String,
    /// The status last recorded (the handle's, or the newest `tool_task_status`).
    pub status: TaskStatus,
    pub interval: Duration,
    /// Asked again after a crash: the first poll goes at once, and what it finds is
    /// reported (`task_reattached`).
    pub reattach: bool,
    /// How long to wait for the end (`tool_timeout_sec`).
    pub wait: Duration,
    /// Said when the server no longer knows the task: e.g. that its TTL passed.
    pub ttl_note: String,
}

impl Follow<'_> {
    fn name(&self) -> &str {
        &self.server.config.name
    }

    /// Polls until the task ends, the wait passes, the run is stopped, or the server no
    /// longer knows it; records each status change through `hooks`; the call's outcome.
    pub async fn run(
        mut self,
        hooks: &mut dyn ToolHooks,
        cancel: &CancellationToken,
    ) -> ToolOutput {
        let deadline = tokio::time::Instant::from_std(Instant::now() + self.wait);
        let mut first = true;
        let mut unanswered = 0u32;
        let mut delay = if self.reattach {
            Duration::ZERO
        } else {
            self.interval
        };
        loop {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = cancel.cancelled() => return self.stop(hooks, ToolStatus::Cancelled).await,
                _ = tokio::time::sleep_until(deadline) => return self.timed_out(hooks).await,
            }
            delay = self.interval;
            let answer = tokio::select! {
                a = self.server.get_task(&self.task_id, ASK_TIMEOUT) => a,
                _ = cancel.cancelled() => return self.stop(hooks, ToolStatus::Cancelled).await,
            };
            let task = match answer {
                Ok(r) => r.task,
                Err(TaskAsk::Refused(why)) => {
                    let why = format!(
                        "MCP server {} no longer knows task {} ({why}{})",
                        self.name(),
                        self.task_id,
                        self.ttl_note
                    );
                    if first && self.reattach {
                        hooks.task_reattached(Reattached::Lost(why.clone()));
                    }
                    return lost(&why);
                }
                Err(TaskAsk::Unreachable(why)) => {
                    unanswered += 1;
                    if unanswered < UNANSWERED_POLLS_MAX {
                        tracing::warn!(server = %self.name(), task = %self.task_id, %why, "tasks/get unanswered; asking again");
                        continue;
                    }
                    let why = format!(
                        "MCP server {} did not answer for task {} {UNANSWERED_POLLS_MAX} times ({why}); the task may still run there",
                        self.name(),
                        self.task_id
                    );
                    if first && self.reattach {
                        hooks.task_reattached(Reattached::Lost(why.clone()));
                    }
                    return lost(&why);
                }
            };
            unanswered = 0;
            let now = status_of(&task);
            if first {
                lazarus_agent::failpoint::hit("mcp/poll-answered");
                if self.reattach {
                    hooks.task_reattached(if now.is_terminal() {
                        Reattached::FinishedWhileAway
                    } else {
                        Reattached::StillWorking
                    });
                }
                first = false;
            }
            if let Some(ms) = task.task.poll_interval_ms {
                self.interval = poll_interval(Some(ms));
            }
            if let Some(out) = self.record(hooks, &task) {
                return out;
            }
            match task.payload {
                TaskPayload::InputRequired { .. } => {
                    // Lazarus declares no way to answer a server's questions: stop it
                    let asked = format!(
                        "error: the MCP server {:?} asked for input for task {} ({}), which Lazarus cannot give; the task was cancelled.",
                        self.name(),
                        self.task_id,
                        task.task.status_message.as_deref().unwrap_or("no message")
                    );
                    let mut out = self.stop(hooks, ToolStatus::Error).await;
                    out.text = format!("{asked} {}", out.text);
                    return out;
                }
                TaskPayload::Working => {}
                _ => return self.ended(task),
            }
        }
    }

    /// Records the status `task` shows when it changed. `Some`: it could not be recorded
    /// (the call's outcome then says so; the session will refuse it too).
    fn record(&mut self, hooks: &mut dyn ToolHooks, task: &DetailedTask) -> Option<ToolOutput> {
        let now = status_of(task);
        if now == self.status {
            return None;
        }
        let message = task.task.status_message.as_deref();
        if let Err(e) = hooks.task_status(&self.task_id, now, message) {
            return Some(lost(&format!(
                "the status of task {} could not be recorded ({e})",
                self.task_id
            )));
        }
        self.status = now;
        lazarus_agent::failpoint::hit("mcp/status-recorded");
        None
    }

    /// The outcome of a task that ended (`completed`, `failed`, `cancelled`).
    fn ended(&self, task: DetailedTask) -> ToolOutput {
        let name = self.name().to_string();
        let settled = |out: ToolOutput| ToolOutput {
            settled: true,
            ..out
        };
        match task.payload {
            TaskPayload::Completed { result } => {
                match serde_json::from_value::<CallToolResult>(Value::Object(result.clone())) {
                    Ok(r) if r.is_error == Some(true) => {
                        settled(ToolOutput::error(content::render(&r)))
                    }
                    Ok(r) => settled(ToolOutput::ok(content::render(&r))),
                    Err(e) => settled(ToolOutput::error(format!(
                        "error: task {} of the MCP server {name:?} completed with a result that is not a tool result ({e}): {}",
                        self.task_id,
                        snippet(&Value::Object(result).to_string())
                    ))),
                }
            }
            TaskPayload::Failed { error } => settled(ToolOutput::error(format!(
                "error: task {} of the MCP server {name:?} failed: {}",
                self.task_id,
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| snippet(&Value::Object(error.clone()).to_string()))
            ))),
            _ => settled(ToolOutput {
                status: ToolStatus::Cancelled,
                ..ToolOutput::error(format!(
                    "cancelled: task {} of the MCP server {name:?} was cancelled{}",
                    self.task_id,
                    task.task
                        .status_message
                        .as_deref()
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default()
                ))
            }),
        }
    }

    /// The wait passed: the task is left running, or cancelled when so configured.
    async fn timed_out(self, hooks: &mut dyn ToolHooks) -> ToolOutput {
        let secs = self.wait.as_secs();
        if self.server.config.cancel_task_on_timeout {
            let mut out = self.stop(hooks, ToolStatus::Timeout).await;
            out.text = format!(
                "error: no end within {secs} s (tool_timeout_sec); the task was cancelled (cancel_task_on_timeout). {}",
                out.text
            );
            return out;
        }
        ToolOutput {
            status: ToolStatus::Timeout,
            ..ToolOutput::error(format!(
                "error: task {} of the MCP server {:?} was still {} after {secs} s (tool_timeout_sec). It was not cancelled and may still complete: its effect is unknown, and its result will not be seen here. Check before trying again.",
                self.task_id,
                self.name(),
                self.status
            ))
        }
    }

    /// Stopped (or timed out with `cancel_task_on_timeout`): `tasks/cancel`, then what
    /// `tasks/get` says. The outcome's status is `as_status` unless the task ended otherwise
    /// first (its result is kept). Not `settled` when the server could not be told: the
    /// call is left for resume, which asks for the task again.
    async fn stop(mut self, hooks: &mut dyn ToolHooks, as_status: ToolStatus) -> ToolOutput {
        let name = self.name().to_string();
        if let Err(e) = self.server.cancel_task(&self.task_id, CANCEL_TIMEOUT).await {
            let why = match e {
                TaskAsk::Refused(w) | TaskAsk::Unreachable(w) => w,
            };
            return ToolOutput {
                status: ToolStatus::Cancelled,
                settled: false,
                ..ToolOutput::error(format!(
                    "the run was stopped, and tasks/cancel for task {} did not reach the MCP server {name:?} ({why})",
                    self.task_id
                ))
            };
        }
        for _ in 0..CANCEL_SETTLE_POLLS {
            let Ok(r) = self.server.get_task(&self.task_id, CANCEL_TIMEOUT).await else {
                break;
            };
            if let Some(out) = self.record(hooks, &r.task) {
                return out;
            }
            match r.task.payload {
                TaskPayload::Working | TaskPayload::InputRequired { .. } => {
                    tokio::time::sleep(CANCEL_SETTLE_POLL).await;
                }
                TaskPayload::Cancelled => {
                    return ToolOutput {
                        status: as_status,
                        settled: true,
                        ..ToolOutput::error(format!(
                            "cancelled: the run was stopped, and task {} of the MCP server {name:?} was cancelled (tasks/cancel); what it did before is not undone",
                            self.task_id
                        ))
                    };
                }
                _ => return self.ended(r.task),
            }
        }
        ToolOutput {
            status: as_status,
            settled: true,
            ..ToolOutput::error(format!(
                "cancelled: the run was stopped and task {} of the MCP server {name:?} was sent tasks/cancel; it had not said it stopped ({}): cancellation is cooperative, so its effect is unknown. Check before trying again.",
                self.task_id, self.status
            ))
        }
    }
}

/// A call whose task cannot be followed any further: in doubt, saying why.
pub fn lost(why: &str) -> ToolOutput {
    ToolOutput {
        status: ToolStatus::InDoubt,
        ..ToolOutput::error(format!("{} ({why}.)", lazarus_session::IN_DOUBT_NOTICE))
    }
}
