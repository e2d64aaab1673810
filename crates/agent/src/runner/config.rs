//! What a run is told (the model, the tools' limits, the sandbox, when to compact) and what
//! it reports back: live events, how it ended, and the errors that stop it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lazarus_session::SessionError;
use serde_json::Value;

use super::approval::ApprovalPolicy;
use super::compaction::CompactionPolicy;
use crate::model::Message;
use crate::provider::{ProviderConfig, ProviderError};
use crate::sandbox::Sandbox;
use crate::tools::ToolLimits;

/// How the runner talks to the model and runs tools.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    pub provider: ProviderConfig,
    pub model: String,
    /// Used when the session's header carries none.
    pub system_prompt: Option<String>,
    /// Example messages placed after the system prompt (a one-shot tool call for base models).
    pub examples: Vec<Message>,
    /// Model requests per `drive` call at most.
    pub max_turns: u32,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub stream: bool,
    pub workspace: PathBuf,
    pub tool_limits: ToolLimits,
    /// Grace between SIGTERM and SIGKILL for a leftover process group, in milliseconds.
    pub leftover_kill_grace_ms: u64,
    /// How `shell` commands are confined; recorded in every resume receipt.
    pub sandbox: Arc<Sandbox>,
    /// Why a cancelled run stopped, recorded in its `interrupted` record: whoever cancels
    /// says why first (`sigint` — the user —, `sigterm`, `shutdown`), so a restart can tell a
    /// stop the user asked for from one the machine forced. Default `cancelled`.
    pub stop_reason: StopReason,
    /// When to compact the context (off by default).
    pub compaction: CompactionPolicy,
    /// When a person must allow a tool call first (never, by default).
    pub approval: ApprovalPolicy,
    /// The name of the environment variable the API key came from (recorded in a session's
    /// world; the key never is).
    pub api_key_env: Option<String>,
    /// When OpenTelemetry is on: the W3C `traceparent` of a call's `execute_tool` span, from
    /// the session id and the seq of the call's `tool_intent` (the telemetry crate's mapping),
    /// passed to the tool (MCP puts it in `_meta`). `None`: off, nothing passed.
    pub trace_context: Option<fn(&str, u64) -> String>,
}

/// Why runs are being stopped; shared by a runner's configuration and whoever cancels it.
#[derive(Debug, Clone, Default)]
pub struct StopReason(Arc<std::sync::Mutex<Option<&'static str>>>);

impl StopReason {
    /// Says why the next stop happens (`sigint`, `sigterm`, `shutdown`, …).
    pub fn set(&self, reason: &'static str) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
    }

    /// The reason given, or `cancelled`.
    pub fn get(&self) -> &'static str {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or("cancelled")
    }
}

impl RunnerConfig {
    pub fn new(provider: ProviderConfig, model: impl Into<String>, workspace: PathBuf) -> Self {
        RunnerConfig {
            provider,
            model: model.into(),
            system_prompt: None,
            examples: Vec::new(),
            max_turns: 50,
            max_tokens: None,
            temperature: None,
            stream: true,
            workspace,
            tool_limits: ToolLimits::default(),
            leftover_kill_grace_ms: 2_000,
            sandbox: crate::sandbox::default_probed(),
            stop_reason: StopReason::default(),
            compaction: CompactionPolicy {
                keep_turns: 2,
                ..CompactionPolicy::default()
            },
            approval: ApprovalPolicy::default(),
            api_key_env: None,
            trace_context: None,
        }
    }
}

/// How a `drive` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// Nothing owed: the last turn finished and no input is pending.
    Idle,
    /// `max_turns` requests were made and work is still owed.
    MaxTurns,
    /// Stopped by the cancel token; an `interrupted` record was written.
    Cancelled,
    /// The model request failed after retries; recorded as the turn's response.
    Failed { message: String, transient: bool },
    /// A tool call waits for a person to allow or deny it (its `approval_request` is
    /// recorded); nothing more happens until a decision is recorded.
    AwaitingApproval { call_id: String },
}

/// Something happened (for live output). Records are reported only once durable.
#[derive(Debug)]
pub enum RunEvent<'a> {
    Record {
        seq: u64,
        ts: &'a str,
        kind: &'a str,
        data: Value,
    },
    Text(&'a str),
    Reasoning(&'a str),
    /// A model attempt failed and will be retried.
    Retry {
        error: &'a str,
        wait: Duration,
    },
    ToolRunning {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    /// What a running tool reports of its progress (an MCP server's progress notifications).
    ToolProgress {
        call_id: &'a str,
        text: &'a str,
    },
}

/// Receives [`RunEvent`]s.
pub type Observer<'o> = dyn FnMut(RunEvent<'_>) + Send + 'o;

/// Errors that stop a run (the session stays resumable).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("model client: {0}")]
    Provider(#[from] ProviderError),
    #[error("internal: {0}")]
    Internal(String),
    /// The session's world is not this runner's: nothing was written.
    #[error("{0}")]
    World(super::WorldRefusal),
}
