//! Each MCP server tool as a runner [`Tool`], and the servers of a run as one [`ToolSource`].
//!
//! The re-run rule (G7 for tools Lazarus did not write): when a call starts, its intent
//! records the facts the answer rests on — the server's configured name, its `serverInfo`
//! name and version, the tool, its annotations as listed then, and whether the server was
//! trusted. A call cut off without an outcome runs again only when that record says the
//! server was trusted **and** the tool `readOnlyHint: true` or `idempotentHint: true`, and
//! today's configuration still says so; otherwise it is closed in doubt and the model is
//! told. Hints of an untrusted server are never acted on, as the spec requires.

use std::sync::{Arc, Weak};
use std::time::Duration;

use lazarus_agent::model::ToolSpec;
use lazarus_agent::tools::{
    Reattached, Rerun, TaskHandle, TaskStatus, Tool, ToolContext, ToolFuture, ToolHooks,
    ToolOutput, ToolSource, ToolStatus,
};
use lazarus_session::state::TaskInfo;
use serde_json::{Map, Value, json};

use crate::McpError;
use crate::names::{assign, model_name};
use crate::server::{CallEnd, ListedTool, McpServer};
use crate::task::{self, Follow};

/// One tool of one server.
pub struct McpTool {
    server: Arc<McpServer>,
    tool: ListedTool,
    spec: ToolSpec,
}

impl McpTool {
    fn new(server: Arc<McpServer>, tool: ListedTool, name: String) -> Self {
        let description = format!(
            "{} (MCP server {:?})",
            if tool.description.is_empty() {
                tool.name.as_str()
            } else {
                tool.description.as_str()
            },
            server.config.name
        );
        let spec = ToolSpec {
            name,
            description,
            parameters: Value::Object(tool.input_schema.clone()),
        };
        McpTool { server, tool, spec }
    }

    /// The facts the re-run answer rests on, as recorded in the intent.
    fn basis(&self) -> Map<String, Value> {
        let v = json!({
            "source": "mcp",
            "server": self.server.config.name,
            "server_info": {"name": self.server.info.name, "version": self.server.info.version},
            "tool": self.tool.name,
            "annotations": Value::Object(self.tool.annotations.clone()),
            "trusted": self.server.config.trusted,
        });
        match v {
            Value::Object(mut m) => {
                // the server may answer with a task: a call cut off before its task id was
                // recorded is never sent again (it may be running there still)
                if self.server.info.tasks {
                    m.insert("tasks".into(), Value::Bool(true));
                }
                m
            }
            _ => Map::new(),
        }
    }
}

/// Whether a basis says the server may answer a call with a task (it declared the Tasks
/// extension when the call started).
fn basis_tasks(basis: &Map<String, Value>) -> bool {
    basis.get("tasks") == Some(&Value::Bool(true))
}

/// Whether a basis (recorded or current) allows a re-run: a trusted server, and a tool that
/// says it is read-only or idempotent.
pub fn basis_allows_rerun(basis: &Map<String, Value>) -> bool {
    let hint = |k: &str| basis["annotations"].get(k) == Some(&Value::Bool(true));
    basis.get("source") == Some(&Value::String("mcp".into()))
        && !basis_tasks(basis)
        && basis.get("trusted") == Some(&Value::Bool(true))
        && (hint("readOnlyHint") || hint("idempotentHint"))
}

/// Why a basis does not allow a re-run, in words a person acts on (`None`: it allows one).
/// The deciding fact first: an untrusted server's hints are never acted on, however they read.
pub fn rerun_refused_why(basis: &Map<String, Value>) -> Option<String> {
    if basis_allows_rerun(basis) {
        return None;
    }
    let server = basis["server"].as_str().unwrap_or("?");
    if basis_tasks(basis) {
        return Some(format!(
            "MCP server {server} may answer a call with a task: when no task id was recorded (a crash between the request and the record of its task), the call may still be running there, so it is never sent again"
        ));
    }
    let hint = |k: &str| basis["annotations"].get(k) == Some(&Value::Bool(true));
    let says = if hint("readOnlyHint") {
        "read-only"
    } else if hint("idempotentHint") {
        "idempotent"
    } else {
        ""
    };
    Some(
        match (basis.get("trusted") == Some(&Value::Bool(true)), says) {
            (false, "") => format!(
                "MCP server {server} is not trusted, and the tool does not say it is read-only or idempotent"
            ),
            (false, says) => format!(
                "MCP server {server} is not trusted: the tool says it is {says}, and an untrusted server's annotations are never acted on (`trusted = true` in its configuration)"
            ),
            (true, _) => format!(
                "the tool of MCP server {server} is neither read-only nor idempotent (its annotations)"
            ),
        },
    )
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn rerun_refused_why(&self, recorded: Option<&Rerun>) -> String {
        match recorded.and_then(|r| r.basis.as_ref()) {
            None => "no intent recorded what the call rested on".into(),
            Some(then) => match rerun_refused_why(then) {
                Some(why) => why,
                // allowed then, not now: today's facts refuse it
                None => rerun_refused_why(&self.basis()).map_or_else(
                    || "it may run again".into(),
                    |now| format!("{now} (now; it was allowed when the call started)"),
                ),
            },
        }
    }

    fn rerun(&self) -> Rerun {
        let basis = self.basis();
        Rerun {
            idempotent: basis_allows_rerun(&basis),
            basis: Some(basis),
        }
    }

    /// Only a trusted server's word is taken: `readOnlyHint: true` from a server the
    /// configuration trusts (as for re-runs; an untrusted server's hints are claims).
    fn read_only(&self) -> bool {
        self.server.config.trusted
            && self.tool.annotations.get("readOnlyHint") == Some(&Value::Bool(true))
    }

    /// The server's fingerprint (transport, command and arguments, or URL): an `always`
    /// grant for this tool covers it only on this very server.
    fn grant_key(&self) -> Option<String> {
        Some(self.server.config.fingerprint())
    }

    /// From what was recorded when the call started, and only if today agrees.
    fn may_rerun(&self, recorded: &Rerun) -> bool {
        let then = recorded.basis.as_ref().is_some_and(basis_allows_rerun);
        then && recorded.idempotent && self.rerun().idempotent
    }

    /// The call's task, asked for again on the same server (never a second `tools/call`).
    fn reattach<'a>(
        &'a self,
        ctx: &'a ToolContext,
        task: &'a TaskInfo,
        hooks: &'a mut dyn ToolHooks,
    ) -> Option<ToolFuture<'a>> {
        Some(Box::pin(async move {
            let fingerprint = self.server.config.fingerprint();
            if task.fingerprint != fingerprint {
                let why = format!(
                    "MCP server {} is another program now (fingerprint {fingerprint}, the task was made on {}): it cannot know task {}",
                    self.server.config.name, task.fingerprint, task.task_id
                );
                hooks.task_reattached(Reattached::Lost(why.clone()));
                return task::lost(&why);
            }
            Follow {
                server: &self.server,
                task_id: task.task_id.clone(),
                status: task.status,
                interval: task::poll_interval(task.poll_interval_ms),
                reattach: true,
                wait: self.server.config.tool_timeout,
                ttl_note: ttl_note(&task.created_at, task.ttl_ms),
            }
            .run(hooks, &ctx.cancel)
            .await
        }))
    }

    fn run<'a>(
        &'a self,
        ctx: &'a ToolContext,
        arguments: &'a Value,
        hooks: &'a mut dyn ToolHooks,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let server = &self.server.config.name;
            let Value::Object(args) = arguments else {
                return ToolOutput::rejected(format!(
                    "error: the arguments of {} must be a JSON object",
                    self.spec.name
                ));
            };
            if let Err(e) = hooks.started(None) {
                return ToolOutput::rejected(e);
            }
            lazarus_agent::failpoint::hit("mcp/before-request");
            let key = ctx.call.as_ref().map(|c| c.idempotency_key());
            let traceparent = ctx.call.as_ref().and_then(|c| c.traceparent.clone());
            let began = std::time::Instant::now();
            let end = self
                .server
                .call(
                    &self.tool.name,
                    args.clone(),
                    key.as_deref(),
                    traceparent.as_deref(),
                    &mut |text: &str| hooks.progress(text),
                    &ctx.cancel,
                )
                .await;
            if matches!(end, CallEnd::Answered { .. }) {
                lazarus_agent::failpoint::hit("mcp/after-answer");
            }
            match end {
                CallEnd::Task(task) => {
                    let wait = self
                        .server
                        .config
                        .tool_timeout
                        .saturating_sub(began.elapsed());
                    self.follow_new(task, wait, hooks, &ctx.cancel).await
                }
                CallEnd::Answered {
                    text,
                    is_error: false,
                } => ToolOutput::ok(text),
                CallEnd::Answered {
                    text,
                    is_error: true,
                } => ToolOutput::error(text),
                CallEnd::Refused(why) => ToolOutput::error(format!(
                    "error: the MCP server {server:?} refused the call: {why}"
                )),
                CallEnd::TimedOut => ToolOutput {
                    status: ToolStatus::Timeout,
                    ..ToolOutput::error(format!(
                        "error: no answer from the MCP server {server:?} within {} s (tool_timeout_sec); the call was cancelled. Its effect is unknown: check before trying again.",
                        self.server.config.tool_timeout.as_secs()
                    ))
                },
                // told to stop (notifications/cancelled): recorded as cancelled
                CallEnd::Abandoned => ToolOutput {
                    status: ToolStatus::Cancelled,
                    settled: true,
                    ..ToolOutput::error(format!(
                        "cancelled: the run was stopped while the MCP server {server:?} worked on this call, and the server was told to stop (MCP cancellation). Its effect is unknown: it may have run completely, partly, or not at all. Check before trying again."
                    ))
                },
                CallEnd::Lost(why) => ToolOutput {
                    status: ToolStatus::InDoubt,
                    ..ToolOutput::error(format!(
                        "The connection to the MCP server {server:?} broke while this call ran ({why}). Its effect is unknown: it may have run completely, partly, or not at all. Check the current state before retrying it."
                    ))
                },
            }
        })
    }
}

impl McpTool {
    /// A call the server just made a task: the handle is recorded (before any poll), then
    /// the task is followed to its end within `wait`.
    async fn follow_new(
        &self,
        task: rmcp::model::Task,
        wait: Duration,
        hooks: &mut dyn ToolHooks,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> ToolOutput {
        lazarus_agent::failpoint::hit("mcp/task-answered");
        let status = match task.status {
            rmcp::model::TaskStatus::InputRequired => TaskStatus::InputRequired,
            rmcp::model::TaskStatus::Completed => TaskStatus::Completed,
            rmcp::model::TaskStatus::Failed => TaskStatus::Failed,
            rmcp::model::TaskStatus::Cancelled => TaskStatus::Cancelled,
            _ => TaskStatus::Working,
        };
        let handle = TaskHandle {
            server: self.server.config.name.clone(),
            fingerprint: self.server.config.fingerprint(),
            task_id: task.task_id.clone(),
            status,
            ttl_ms: task.ttl_ms,
            poll_interval_ms: task.poll_interval_ms,
        };
        if let Err(e) = hooks.task_created(&handle) {
            // unrecorded, it could never be found again: stop it while it can be told
            let _ = self
                .server
                .cancel_task(&task.task_id, Duration::from_secs(10))
                .await;
            return task::lost(&format!(
                "its task {} could not be recorded ({e}) and was sent tasks/cancel",
                task.task_id
            ));
        }
        lazarus_agent::failpoint::hit("mcp/task-recorded");
        Follow {
            server: &self.server,
            task_id: task.task_id,
            status,
            interval: task::poll_interval(task.poll_interval_ms),
            reattach: false,
            wait,
            ttl_note: String::new(),
        }
        .run(hooks, cancel)
        .await
    }
}

/// `, past its TTL of N s` when a task recorded at `created_at` with `ttl_ms` has outlived
/// it by now.
fn ttl_note(created_at: &str, ttl_ms: Option<u64>) -> String {
    let now = lazarus_ledger::clock::now_ts();
    match (
        ttl_ms,
        lazarus_ledger::clock::millis_between(created_at, &now),
    ) {
        (Some(ttl), Some(age)) if age > ttl => format!(
            "; it was recorded {} s ago, past its TTL of {} s",
            age / 1000,
            ttl / 1000
        ),
        _ => String::new(),
    }
}

/// The servers of a run as one source of tools, named `mcp__<server>__<tool>`.
pub struct McpSource {
    servers: Vec<Arc<McpServer>>,
}

impl McpSource {
    /// The tools of `servers`; two that would get the same name are refused.
    pub fn new(servers: Vec<Arc<McpServer>>) -> Result<Arc<McpSource>, McpError> {
        let pairs: Vec<(String, String)> = servers
            .iter()
            .flat_map(|s| {
                s.tools_now()
                    .into_iter()
                    .map(|t| (s.config.name.clone(), t.name))
            })
            .collect();
        assign(&pairs).map_err(|why| McpError::Server {
            server: pairs.first().map(|p| p.0.clone()).unwrap_or_default(),
            why,
        })?;
        let source = Arc::new(McpSource { servers });
        // a server that says its tools changed is listed again, in the background
        if tokio::runtime::Handle::try_current().is_ok() {
            tokio::spawn(watch_tool_lists(Arc::downgrade(&source)));
        }
        Ok(source)
    }
}

/// How often the servers are asked whether their tool list changed.
const LIST_CHANGED_POLL: Duration = Duration::from_millis(200);

async fn watch_tool_lists(source: Weak<McpSource>) {
    loop {
        tokio::time::sleep(LIST_CHANGED_POLL).await;
        let Some(s) = source.upgrade() else { return };
        for server in &s.servers {
            if server.tools_changed() {
                let before = server.tools_now().len();
                let now = server.tools().await.len();
                tracing::info!(server = %server.config.name, before, now, "MCP tool list changed; offered from the next request on");
            }
        }
    }
}

impl McpSource {
    /// Fills in each server's negotiated protocol version (a world's `protocol_version`).
    pub fn record_protocol_versions(&self, world: &mut [lazarus_session::record::WorldMcpServer]) {
        for w in world {
            if let Some(s) = self.servers.iter().find(|s| s.config.name == w.name) {
                w.protocol_version = Some(s.info.protocol_version.clone());
            }
        }
    }
}

impl ToolSource for McpSource {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut taken = std::collections::BTreeSet::new();
        let mut out: Vec<Arc<dyn Tool>> = Vec::new();
        for server in &self.servers {
            for t in server.tools_now() {
                let name = model_name(&server.config.name, &t.name);
                if !taken.insert(name.clone()) {
                    tracing::warn!(server = %server.config.name, tool = %t.name, "an MCP tool's name collides with another's; not offered");
                    continue;
                }
                out.push(Arc::new(McpTool::new(server.clone(), t, name)));
            }
        }
        out
    }
}
