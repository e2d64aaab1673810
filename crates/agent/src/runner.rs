//! The turn loop: run a session until it is idle, and resume one exactly where it stopped.
//!
//! Order of durable steps (what makes resume exact):
//! 1. an input is recorded before it is used;
//! 2. `turn_start` is recorded before the model request;
//! 3. the `response` is recorded before any tool runs;
//! 4. `tool_intent` is recorded before the tool starts, `tool_start` (with the process group)
//!    right before its side effect begins — a shell command waits at a gate until then;
//! 5. `tool_outcome` with the result text is recorded after.
//!
//! On resume: recorded inputs are never recorded again; a turn with a recorded response is
//! never requested again, an open turn is; finished calls keep their recorded result; a call
//! that started without an outcome is re-run only when its tool is idempotent, otherwise it
//! is closed "in doubt" (its leftover process group terminated) and the model is told so; a
//! call that never started simply runs. A `resume` receipt records all of it.

mod compaction;

pub use compaction::{CompactionPolicy, SUMMARY_PROMPT};

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use lazarus_session::record::{
    Attempt as RecAttempt, Failure, Interrupted, Item, OutcomeStatus, ProcessRef, Record, Response,
    ResumeReceipt, SandboxRecord, ToolIntent, ToolOutcome, ToolStart, TurnStart, Usage as RecUsage,
};
use lazarus_session::{CallState, ContextEntry, Session, SessionError, SessionState, Status};
use serde_json::Value;

use crate::model::{Message, ModelResponse, OutputItem, ProviderItem, ToolCall};
use crate::process::{self, ProcessGroupRef};
use crate::provider::{
    CancellationToken, CompletionFailure, OpenAiClient, ProviderConfig, ProviderError, StreamEvent,
    dedup_consecutive_tool_calls, drop_truncated_tool_calls,
};
use crate::sandbox::Sandbox;
use crate::tools::{ToolContext, ToolHooks, ToolLimits, ToolOutput, ToolStatus, Toolbox};

/// A session shared between its runner and whoever feeds it inputs (the gateway).
pub type SharedSession = Arc<Mutex<Session>>;

/// What the summary of a compaction is introduced with, in the user message that carries it.
pub const COMPACTED_PREFIX: &str =
    "[The earlier conversation was compacted to save context. Its summary:]\n";

/// The text a call closed "in doubt" returns to the model.
pub const IN_DOUBT_NOTICE: &str = "This tool call was interrupted before its result was recorded (the process was stopped or the machine went down). Its effect is unknown: it may have run completely, partly, or not at all. Check the current state before retrying it.";

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
}

/// Runs sessions.
#[derive(Debug, Clone)]
pub struct Runner {
    client: OpenAiClient,
    toolbox: Toolbox,
    cfg: RunnerConfig,
}

fn lock(s: &SharedSession) -> MutexGuard<'_, Session> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

fn append(
    session: &SharedSession,
    rec: Record,
    observer: &mut Observer<'_>,
) -> Result<u64, RunError> {
    let kind = rec.kind();
    let data = rec.data_value();
    let stored = lock(session).append(rec)?;
    observer(RunEvent::Record {
        seq: stored.seq,
        ts: &stored.ts,
        kind,
        data,
    });
    Ok(stored.seq)
}

/// Records what waits in the session's inbox (messages delivered by `sessions send`, another
/// gateway, boot-resume while this process holds the session), each once.
fn drain_inbox(session: &SharedSession, observer: &mut Observer<'_>) -> Result<(), RunError> {
    let drained = lock(session).drain_inbox()?;
    for d in drained.into_iter().filter(|d| !d.duplicate) {
        observer(RunEvent::Record {
            seq: d.seq,
            ts: d.ts.as_deref().unwrap_or_default(),
            kind: d.kind,
            data: d.data,
        });
    }
    Ok(())
}

/// What resume must do with one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    RunFresh { has_intent: bool },
    Rerun,
    InDoubt,
}

impl Runner {
    pub fn new(cfg: RunnerConfig) -> Result<Self, RunError> {
        Ok(Runner {
            client: OpenAiClient::new(cfg.provider.clone())?,
            toolbox: Toolbox::standard(),
            cfg,
        })
    }

    /// Replaces the tools (tests register their own).
    pub fn with_toolbox(mut self, toolbox: Toolbox) -> Self {
        self.toolbox = toolbox;
        self
    }

    pub fn config(&self) -> &RunnerConfig {
        &self.cfg
    }

    /// Continues `session` until it is idle, `max_turns` requests were made, the model fails,
    /// or `cancel` fires. If the session was cut off, first performs the resume actions and
    /// writes the receipt (`trigger` names what resumed it).
    pub async fn drive(
        &self,
        session: &SharedSession,
        trigger: &str,
        cancel: &CancellationToken,
        observer: &mut Observer<'_>,
    ) -> Result<RunOutcome, RunError> {
        let ctx = ToolContext {
            workspace: self.cfg.workspace.clone(),
            cancel: cancel.clone(),
            limits: self.cfg.tool_limits.clone(),
            sandbox: self.cfg.sandbox.clone(),
        };
        self.resume_if_needed(session, trigger, &ctx, observer)
            .await?;
        let mut turns_made = 0u32;
        // a compact request is tried once per drive (nothing to summarise leaves it waiting)
        let mut compact_tried = false;
        loop {
            if cancel.is_cancelled() {
                return self.stop(session, self.cfg.stop_reason.get(), observer);
            }
            // Steering: a message delivered while we run joins the next turn.
            drain_inbox(session, observer)?;
            let st = lock(session).state().clone();
            // Calls of the last response that have not run yet.
            if st.unresolved_calls().next().is_some() {
                for call in st.unresolved_calls() {
                    let plan = match call.state() {
                        CallState::NotStarted => Plan::RunFresh { has_intent: false },
                        CallState::IntentOnly => Plan::RunFresh { has_intent: true },
                        // only after a crash; resume handles those
                        CallState::StartedNoOutcome => Plan::InDoubt,
                        CallState::Finished => continue,
                    };
                    if cancel.is_cancelled() {
                        return self.stop(session, self.cfg.stop_reason.get(), observer);
                    }
                    self.execute_call(session, &st, &call.call_id, plan, &ctx, observer)
                        .await?;
                }
                continue;
            }
            let turn = match st.open_turn {
                Some(t) => t,
                None => {
                    if st.pending_control.is_some() && !st.compact_requested() {
                        // A resume event that arrived while running: its answer is a receipt.
                        self.resume_if_needed(session, "event", &ctx, observer)
                            .await?;
                        continue;
                    }
                    // A compact request (control input): compact before anything else.
                    let requested = st.compact_requested() && !compact_tried;
                    compact_tried |= requested;
                    if !requested && !st.owes_work() {
                        return Ok(RunOutcome::Idle);
                    }
                    if !requested && turns_made >= self.cfg.max_turns {
                        return Ok(RunOutcome::MaxTurns);
                    }
                    // Compaction comes before the turn starts (see `compaction`).
                    let over = self
                        .cfg
                        .compaction
                        .threshold()
                        .is_some_and(|threshold| self.next_request_tokens(&st) > threshold);
                    if requested || over {
                        // automatic ones while work is owed, manual ones when none is
                        let trigger = if st.owes_work() { "auto" } else { "manual" };
                        match self.compact(session, trigger, cancel, observer).await? {
                            compaction::Compacted::Done => continue,
                            // nothing to summarise: look again at what is owed
                            compaction::Compacted::Nothing if requested => continue,
                            compaction::Compacted::Nothing => {}
                            compaction::Compacted::Failed(failure) => {
                                if matches!(failure.error, ProviderError::Cancelled)
                                    || cancel.is_cancelled()
                                {
                                    return self.stop(
                                        session,
                                        self.cfg.stop_reason.get(),
                                        observer,
                                    );
                                }
                                let message = format!("compacting the context: {}", failure.error);
                                return Ok(RunOutcome::Failed {
                                    message,
                                    transient: failure.error.is_retryable(),
                                });
                            }
                        }
                    }
                    let too_big = self.cfg.compaction.context_window.and_then(|w| {
                        let n = self.next_request_tokens(&st);
                        (n > w).then_some((n, w))
                    });
                    let t = st.turn + 1;
                    append(
                        session,
                        Record::TurnStart(TurnStart {
                            turn: t,
                            prev_seq: st.turn_seqs.last().copied(),
                            inputs: st.pending_inputs.iter().map(|p| p.seq).collect(),
                        }),
                        observer,
                    )?;
                    if let Some((n, w)) = too_big {
                        // Never send a request over the window: the turn fails, recorded.
                        let message = format!(
                            "the request would be about {n} tokens, over --context-window {w}, even after compaction; start a new session or fork an earlier turn"
                        );
                        append(
                            session,
                            Record::Response(Response {
                                turn: t,
                                items: vec![],
                                usage: None,
                                stop_reason: None,
                                failure: Some(Failure {
                                    message: message.clone(),
                                    transient: false,
                                    status: None,
                                }),
                                model: None,
                                provider_extra: None,
                                attempts: vec![],
                            }),
                            observer,
                        )?;
                        return Ok(RunOutcome::Failed {
                            message,
                            transient: false,
                        });
                    }
                    t
                }
            };
            turns_made += 1;
            let st = lock(session).state().clone();
            match self.request(&st, turn, cancel, observer).await {
                Ok(resp) => {
                    append(session, Record::Response(resp), observer)?;
                }
                Err(failure) => {
                    if matches!(failure.error, ProviderError::Cancelled) || cancel.is_cancelled() {
                        // The turn stays open: resume requests it again.
                        return self.stop(session, self.cfg.stop_reason.get(), observer);
                    }
                    let transient = failure.error.is_retryable();
                    let message = failure.error.to_string();
                    append(
                        session,
                        Record::Response(Response {
                            turn,
                            items: vec![],
                            usage: None,
                            stop_reason: None,
                            failure: Some(Failure {
                                message: message.clone(),
                                transient,
                                status: failure.attempts.last().and_then(|a| a.status),
                            }),
                            model: None,
                            provider_extra: None,
                            attempts: record_attempts(&failure.attempts),
                        }),
                        observer,
                    )?;
                    return Ok(RunOutcome::Failed { message, transient });
                }
            }
        }
    }

    fn stop(
        &self,
        session: &SharedSession,
        reason: &str,
        observer: &mut Observer<'_>,
    ) -> Result<RunOutcome, RunError> {
        // A stop is recorded only where work is left, so an `interrupted` record always means
        // "resumable work here" (what the tail-only rule, `owes_work_from_tail`, relies on).
        let (owes, turn) = {
            let s = lock(session);
            (s.state().owes_work(), s.state().open_turn)
        };
        if owes {
            append(
                session,
                Record::Interrupted(Interrupted {
                    reason: reason.to_string(),
                    turn,
                }),
                observer,
            )?;
        }
        Ok(RunOutcome::Cancelled)
    }

    /// Resume actions and receipt, when the session was cut off (or stopped) mid-work.
    async fn resume_if_needed(
        &self,
        session: &SharedSession,
        trigger: &str,
        ctx: &ToolContext,
        observer: &mut Observer<'_>,
    ) -> Result<(), RunError> {
        let (st, report) = {
            let s = lock(session);
            (s.state().clone(), s.open_report().clone())
        };
        let status = st.status();
        // A resume event counts as a resume even when only inputs are owed.
        let cut_off = matches!(
            status,
            Status::Interrupted | Status::InDoubt | Status::Stopped
        ) || (st.pending_control.is_some() && !st.compact_requested());
        if !cut_off && report.truncated_bytes == 0 {
            return Ok(());
        }
        let mut receipt = ResumeReceipt {
            trigger: trigger.to_string(),
            truncated_bytes: report.truncated_bytes,
            truncated_saved_to: report.truncated_saved_to.clone(),
            records_replayed: report.records_replayed,
            inputs_pending: st.pending_inputs.len() as u64,
            open_turn: st.open_turn,
            sandbox: Some(sandbox_record(&self.cfg.sandbox)),
            ..ResumeReceipt::default()
        };
        // Results of finished calls of the last turn with calls are reused as recorded.
        let last_call_turn = st.calls.last().map(|c| c.turn);
        receipt.calls_reused = st
            .calls
            .iter()
            .filter(|c| Some(c.turn) == last_call_turn && c.state() == CallState::Finished)
            .count() as u64;
        for call in st.unresolved_calls() {
            let plan = match call.state() {
                CallState::Finished => continue,
                CallState::NotStarted => Plan::RunFresh { has_intent: false },
                CallState::IntentOnly => Plan::RunFresh { has_intent: true },
                CallState::StartedNoOutcome => {
                    let idempotent = call.intent.as_ref().is_some_and(|i| i.idempotent)
                        && self.toolbox.get(&call.name).is_some_and(|t| t.idempotent());
                    if idempotent {
                        Plan::Rerun
                    } else {
                        Plan::InDoubt
                    }
                }
            };
            match plan {
                Plan::RunFresh { .. } => receipt.calls_not_started += 1,
                Plan::Rerun => receipt.calls_rerun += 1,
                Plan::InDoubt => {
                    receipt.calls_in_doubt += 1;
                    if let Some(p) = call.start.as_ref().and_then(|s| s.process)
                        && self.terminate_leftover(p).await
                    {
                        receipt.processes_terminated += 1;
                    }
                }
            }
            self.execute_call(session, &st, &call.call_id, plan, ctx, observer)
                .await?;
        }
        receipt.every_call_has_one_result = lock(session).state().every_call_has_one_result();
        append(session, Record::Resume(receipt), observer)?;
        Ok(())
    }

    /// Compacts the context of a session that owes no work now (`sessions compact`): true
    /// when a `compaction` record was written, false when there was nothing to summarise.
    pub async fn compact_now(
        &self,
        session: &SharedSession,
        cancel: &CancellationToken,
        observer: &mut Observer<'_>,
    ) -> Result<bool, RunError> {
        if lock(session).state().owes_work() {
            return Err(RunError::Internal(
                "the session owes work; run it first (it compacts by itself with --context-window or --compact-at)".into(),
            ));
        }
        match self.compact(session, "manual", cancel, observer).await? {
            compaction::Compacted::Done => Ok(true),
            compaction::Compacted::Nothing => Ok(false),
            compaction::Compacted::Failed(f) => Err(RunError::Provider(f.error)),
        }
    }

    /// Terminates a leftover process group if it is still ours and alive. True if it was.
    async fn terminate_leftover(&self, p: ProcessRef) -> bool {
        let group = ProcessGroupRef {
            pgid: p.pgid,
            start_time_ticks: p.start_time_ticks,
        };
        let grace = Duration::from_millis(self.cfg.leftover_kill_grace_ms);
        let outcome = tokio::task::spawn_blocking(move || process::terminate_group(&group, grace))
            .await
            .ok();
        tracing::info!(
            pgid = p.pgid,
            ?outcome,
            "leftover process group of an interrupted call"
        );
        matches!(
            outcome,
            Some(process::TerminateOutcome::Terminated) | Some(process::TerminateOutcome::Killed)
        )
    }

    /// Runs (or closes) one call of the model's last response and records its outcome.
    async fn execute_call(
        &self,
        session: &SharedSession,
        st: &SessionState,
        call_id: &str,
        plan: Plan,
        ctx: &ToolContext,
        observer: &mut Observer<'_>,
    ) -> Result<(), RunError> {
        let call = st
            .call(call_id)
            .ok_or_else(|| RunError::Internal(format!("call {call_id} vanished")))?
            .clone();
        let outcome = match plan {
            Plan::InDoubt => ToolOutcome {
                call_id: call.call_id.clone(),
                status: OutcomeStatus::InDoubt,
                result: IN_DOUBT_NOTICE.to_string(),
                exit_code: None,
                duration_ms: None,
            },
            Plan::RunFresh { .. } | Plan::Rerun => {
                if plan == (Plan::RunFresh { has_intent: false }) {
                    let idempotent = self.toolbox.get(&call.name).is_some_and(|t| t.idempotent());
                    append(
                        session,
                        Record::ToolIntent(ToolIntent {
                            call_id: call.call_id.clone(),
                            turn: call.turn,
                            tool: call.name.clone(),
                            arguments: call.arguments.clone(),
                            idempotent,
                            idempotency_key: format!("{}:{}", st.id(), call.call_id),
                        }),
                        observer,
                    )?;
                }
                observer(RunEvent::ToolRunning {
                    call_id: &call.call_id,
                    name: &call.name,
                    arguments: &call.arguments,
                });
                let mut hooks = StartRecorder {
                    session,
                    call_id: &call.call_id,
                    // a re-run's start is already recorded
                    record: plan != Plan::Rerun,
                    observer: &mut *observer,
                };
                let began = Instant::now();
                let out = self
                    .toolbox
                    .run(ctx, &call.name, &call.arguments, &mut hooks)
                    .await;
                if out.status == ToolStatus::Cancelled && ctx.cancel.is_cancelled() {
                    // Stopped by a signal: leave the call for resume (started → in doubt,
                    // or not started → runs again).
                    return Ok(());
                }
                to_outcome(&call.call_id, out, began.elapsed())
            }
        };
        append(session, Record::ToolOutcome(outcome), observer)?;
        Ok(())
    }

    /// Builds the model request from the state and makes it.
    async fn request(
        &self,
        st: &SessionState,
        turn: u64,
        cancel: &CancellationToken,
        observer: &mut Observer<'_>,
    ) -> Result<Response, CompletionFailure> {
        let req = self.model_request(self.messages(st), true);
        let mut on_event = |ev: StreamEvent<'_>| match ev {
            StreamEvent::Text(t) => observer(RunEvent::Text(t)),
            StreamEvent::Reasoning(t) => observer(RunEvent::Reasoning(t)),
            StreamEvent::Retry { failed, wait } => observer(RunEvent::Retry {
                error: failed.error.as_deref().unwrap_or("request failed"),
                wait,
            }),
            StreamEvent::ToolCallStart { .. } => {}
        };
        let completion = self.client.complete(&req, cancel, &mut on_event).await?;
        let mut response = completion.response;
        clean_calls(&mut response);
        let failed_attempts: Vec<_> = completion
            .attempts
            .iter()
            .filter(|a| a.error.is_some())
            .cloned()
            .collect();
        Ok(to_record(st, turn, response, &failed_attempts))
    }

    /// The model context: system prompt, examples, then the transcript from the ledger.
    pub fn messages(&self, st: &SessionState) -> Vec<Message> {
        let mut out = Vec::new();
        let system = st
            .header
            .meta
            .as_ref()
            .and_then(|m| m.get("system_prompt"))
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .or_else(|| self.cfg.system_prompt.clone());
        if let Some(s) = system {
            out.push(Message::system(s));
        }
        out.extend(self.cfg.examples.iter().cloned());
        let (summary, live) = st.live_context();
        if let Some(summary) = summary {
            out.push(Message::user(format!("{COMPACTED_PREFIX}{summary}")));
        }
        for entry in live {
            match entry {
                ContextEntry::User { text, .. } => out.push(Message::user(text.clone())),
                ContextEntry::Assistant { items, .. } => {
                    // Reasoning a provider issued goes back verbatim (to that API only).
                    let provider_items = items
                        .iter()
                        .filter_map(|i| match i {
                            Item::ProviderReasoning { api, item, .. } => Some(ProviderItem {
                                api: api.clone(),
                                item: item.clone(),
                            }),
                            _ => None,
                        })
                        .collect();
                    let text: String = items
                        .iter()
                        .filter_map(|i| match i {
                            Item::Text { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect();
                    let tool_calls = items
                        .iter()
                        .filter_map(|i| match i {
                            Item::ToolCall {
                                call_id,
                                name,
                                arguments,
                            } => Some(ToolCall {
                                call_id: call_id.clone(),
                                name: name.clone(),
                                arguments: arguments.clone(),
                            }),
                            _ => None,
                        })
                        .collect();
                    out.push(Message::Assistant {
                        provider_items,
                        text: (!text.is_empty()).then_some(text),
                        tool_calls,
                    });
                }
                ContextEntry::ToolResult { call, .. } => {
                    let call = &st.calls[*call];
                    out.push(Message::tool_result(
                        call.call_id.clone(),
                        st.tool_result_text(&call.call_id).to_string(),
                    ))
                }
            }
        }
        out
    }
}

/// The receipt's account of the sandbox in force.
pub fn sandbox_record(sandbox: &Sandbox) -> SandboxRecord {
    let note = sandbox.note();
    SandboxRecord {
        mode: note.mode.as_str().to_string(),
        network: note.network,
        detail: note.detail,
    }
}

/// Base models repeat a call or get cut off mid-call: keep what is usable.
fn clean_calls(response: &mut ModelResponse) {
    dedup_consecutive_tool_calls(&mut response.items);
    if response.is_truncated() {
        drop_truncated_tool_calls(response);
    }
}

fn record_attempts(attempts: &[crate::provider::Attempt]) -> Vec<RecAttempt> {
    attempts
        .iter()
        .map(|a| RecAttempt {
            status: a.status,
            error: a.error.clone(),
            waited_ms: a.waited_ms,
        })
        .collect()
}

/// Maps the model's response to the ledger record; call ids are made unique in the session.
fn to_record(
    st: &SessionState,
    turn: u64,
    r: ModelResponse,
    failed_attempts: &[crate::provider::Attempt],
) -> Response {
    let mut seen = std::collections::HashSet::new();
    let items = r
        .items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            OutputItem::Text { text } => Item::Text { text },
            OutputItem::Reasoning { text } => Item::Reasoning { text },
            OutputItem::ProviderReasoning { api, text, item } => {
                Item::ProviderReasoning { api, text, item }
            }
            OutputItem::ToolCall(c) => {
                let mut id = c.call_id;
                // an id the session already used (providers that number calls per turn
                // reuse them) gets one of ours; the ledger refuses a call id twice
                let mut n = 0;
                while id.is_empty() || st.call_id_used(&id) || !seen.insert(id.clone()) {
                    id = match n {
                        0 => format!("call_t{turn}_{i}"),
                        _ => format!("call_t{turn}_{i}_{n}"),
                    };
                    n += 1;
                }
                Item::ToolCall {
                    call_id: id,
                    name: c.name,
                    arguments: c.arguments,
                }
            }
        })
        .collect();
    let mut extra = r.provider_extra;
    let usage = r.usage.map(|u| {
        // usage fields Lazarus does not model are kept verbatim too
        if !u.extra.is_empty() {
            extra.insert("usage".into(), Value::Object(u.extra.clone()));
        }
        RecUsage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total_tokens,
            cached_tokens: u.cached_tokens,
        }
    });
    Response {
        turn,
        items,
        usage,
        stop_reason: (!r.stop_reason.is_empty()).then_some(r.stop_reason),
        failure: None,
        model: r.model,
        provider_extra: (!extra.is_empty()).then_some(extra),
        attempts: record_attempts(failed_attempts),
    }
}

fn to_outcome(call_id: &str, out: ToolOutput, took: Duration) -> ToolOutcome {
    let status = match out.status {
        ToolStatus::Ok => OutcomeStatus::Ok,
        ToolStatus::Error => OutcomeStatus::Error,
        ToolStatus::Timeout => OutcomeStatus::Timeout,
        ToolStatus::Cancelled => OutcomeStatus::Cancelled,
    };
    ToolOutcome {
        call_id: call_id.to_string(),
        status,
        result: out.text,
        exit_code: out.exit_code,
        duration_ms: Some(took.as_millis() as u64),
    }
}

/// Records `tool_start` durably before the tool's side effect begins.
struct StartRecorder<'a, 'o> {
    session: &'a SharedSession,
    call_id: &'a str,
    record: bool,
    observer: &'a mut Observer<'o>,
}

impl ToolHooks for StartRecorder<'_, '_> {
    fn started(&mut self, process: Option<ProcessGroupRef>) -> Result<(), String> {
        if !self.record {
            return Ok(());
        }
        let rec = Record::ToolStart(ToolStart {
            call_id: self.call_id.to_string(),
            process: process.map(|p| ProcessRef {
                pgid: p.pgid,
                start_time_ticks: p.start_time_ticks,
            }),
        });
        let data = rec.data_value();
        let stored = lock(self.session).append(rec).map_err(|e| e.to_string())?;
        (self.observer)(RunEvent::Record {
            seq: stored.seq,
            ts: &stored.ts,
            kind: "tool_start",
            data,
        });
        Ok(())
    }
}
