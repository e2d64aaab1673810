//! Tool dispatch: one call of the model's last response run (or closed in doubt) in the
//! durable order intent -> start (at the tool's gate) -> effect -> outcome.

use std::time::{Duration, Instant};

use lazarus_session::SessionState;
use lazarus_session::record::{
    OutcomeStatus, ProcessRef, Record, ToolIntent, ToolOutcome, ToolStart, ToolTask, ToolTaskStatus,
};

use super::approval::{ApprovalMode, Gate};
use super::transcript::repeats_note;
use super::{IN_DOUBT_NOTICE, Observer, RunError, RunEvent, Runner, SharedSession, append, lock};
use crate::process::ProcessGroupRef;
use crate::tools::{
    CallRef, Reattached, TaskHandle, TaskStatus, ToolContext, ToolHooks, ToolOutput, ToolStatus,
};

/// How far one call got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// Its outcome is recorded (or, stopped by a signal, it is left for resume).
    Done,
    /// Its recorded task was polled again; what the first poll found (`None`: no poll
    /// answered, e.g. the run was stopped first).
    Reattached(Option<Reattached>),
    /// It waits for a person's decision (its request is recorded).
    AwaitingApproval,
}

/// What resume must do with one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plan {
    RunFresh {
        has_intent: bool,
    },
    Rerun,
    /// Cut off after its task was recorded: ask the server for that task again.
    Reattach,
    InDoubt,
}

impl Runner {
    /// Runs (or closes) one call of the model's last response and records its outcome.
    pub(super) async fn execute_call(
        &self,
        session: &SharedSession,
        st: &SessionState,
        call_id: &str,
        plan: Plan,
        ctx: &ToolContext,
        observer: &mut Observer<'_>,
    ) -> Result<Step, RunError> {
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
            Plan::Reattach => {
                let Some(task) = call.task.as_deref().cloned() else {
                    return Err(RunError::Internal(format!(
                        "call {call_id} has no recorded task to reattach"
                    )));
                };
                observer(RunEvent::ToolRunning {
                    call_id: &call.call_id,
                    name: &call.name,
                    arguments: &call.arguments,
                });
                let mut hooks = StartRecorder {
                    session,
                    call_id: &call.call_id,
                    record: false,
                    reattached: None,
                    observer: &mut *observer,
                };
                let began = Instant::now();
                let ctx = self.call_context(ctx, st, &call, None);
                let tool = self.toolbox.get(&call.name);
                let out = match tool
                    .as_ref()
                    .and_then(|t| t.reattach(&ctx, &task, &mut hooks))
                {
                    Some(polling) => polling.await,
                    None => ToolOutput {
                        status: ToolStatus::InDoubt,
                        ..ToolOutput::error(format!(
                            "{IN_DOUBT_NOTICE} (Its task {} on MCP server {} could not be asked for again: {} does not poll tasks here.)",
                            task.task_id, task.server, call.name
                        ))
                    },
                };
                let seen = hooks.reattached.take();
                if out.status == ToolStatus::Cancelled && ctx.cancel.is_cancelled() && !out.settled
                {
                    // stopped before the task's end was known: the next resume polls it again
                    return Ok(Step::Reattached(seen));
                }
                let outcome = to_outcome(&call.call_id, out, began.elapsed());
                append(session, Record::ToolOutcome(outcome), observer)?;
                return Ok(Step::Reattached(seen));
            }
            Plan::RunFresh { .. } | Plan::Rerun => {
                // a call whose intent is recorded keeps the key recorded there
                let idempotency_key = call
                    .intent
                    .as_ref()
                    .map(|i| i.idempotency_key.clone())
                    .unwrap_or_else(|| idempotency_key(st.id(), &call.call_id));
                // a call asked for under `on-request` keeps its meaning under another mode
                let asked_on_request = lock(session)
                    .state()
                    .call(&call.call_id)
                    .and_then(|c| c.approval.as_ref())
                    .is_some_and(|a| a.mode == ApprovalMode::OnRequest.as_str());
                let arguments = self.tool_arguments(&call.arguments, asked_on_request);
                let mut intent_seq = None;
                if plan == (Plan::RunFresh { has_intent: false }) {
                    // arguments outside the tool's schema (a decoy key beside the one that
                    // runs) are refused before anyone is asked, and never reach the tool
                    if let Some(why) = self.outside_schema(&call.name, &arguments) {
                        self.record_intent(session, &call, &idempotency_key, observer)?;
                        let outcome = ToolOutcome {
                            call_id: call.call_id.clone(),
                            status: OutcomeStatus::Error,
                            result: format!("error: not started: {why}"),
                            exit_code: None,
                            duration_ms: None,
                        };
                        append(session, Record::ToolOutcome(outcome), observer)?;
                        return Ok(Step::Done);
                    }
                    // a person may have to allow it first: asked, and answered, before the
                    // intent (the state refuses an intent before an allowing decision)
                    match self.approval_gate(session, &call.call_id, observer)? {
                        Gate::Proceed => {}
                        Gate::Wait => return Ok(Step::AwaitingApproval),
                        Gate::Denied => return Ok(Step::Done),
                    }
                    intent_seq =
                        Some(self.record_intent(session, &call, &idempotency_key, observer)?);
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
                    reattached: None,
                    observer: &mut *observer,
                };
                let began = Instant::now();
                // the call's own context: which call of which session (for idempotency keys)
                let ctx = self.call_context(ctx, st, &call, intent_seq);
                let out = self
                    .toolbox
                    .run(&ctx, &call.name, &arguments, &mut hooks)
                    .await;
                if out.status == ToolStatus::Cancelled && ctx.cancel.is_cancelled() && !out.settled
                {
                    // Stopped by a signal: leave the call for resume (started → in doubt,
                    // or not started → runs again). A tool that settled the call with its
                    // server (an MCP call told to stop) has its outcome recorded.
                    return Ok(Step::Done);
                }
                let mut outcome = to_outcome(&call.call_id, out, began.elapsed());
                let key = format!("{}/{}", st.id(), call.call_id);
                let repeats = self
                    .repeats
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&key);
                if let Some(n) = repeats {
                    outcome.result.push_str(&repeats_note(n));
                }
                outcome
            }
        };
        append(session, Record::ToolOutcome(outcome), observer)?;
        Ok(Step::Done)
    }
}

impl Runner {
    /// The context one call runs in: which call of which session (its idempotency key, the
    /// one its intent recorded), and its span's `traceparent` when OpenTelemetry is on.
    fn call_context(
        &self,
        ctx: &ToolContext,
        st: &SessionState,
        call: &lazarus_session::Call,
        intent_seq: Option<u64>,
    ) -> ToolContext {
        let idempotency_key = call
            .intent
            .as_ref()
            .map(|i| i.idempotency_key.clone())
            .unwrap_or_else(|| idempotency_key(st.id(), &call.call_id));
        let intent_seq = intent_seq.or(call.intent.as_ref().map(|i| i.seq));
        let traceparent = self
            .cfg
            .trace_context
            .zip(intent_seq)
            .map(|(f, seq)| f(st.id(), seq));
        ToolContext {
            call: Some(CallRef {
                session: st.id().to_string(),
                call_id: call.call_id.clone(),
                idempotency_key,
                traceparent,
            }),
            ..ctx.clone()
        }
    }

    /// Records `call`'s intent, with whether it may be re-run and why, decided now; its seq.
    fn record_intent(
        &self,
        session: &SharedSession,
        call: &lazarus_session::Call,
        idempotency_key: &str,
        observer: &mut Observer<'_>,
    ) -> Result<u64, RunError> {
        let rerun = self
            .toolbox
            .get(&call.name)
            .map(|t| t.rerun())
            .unwrap_or_default();
        append(
            session,
            Record::ToolIntent(ToolIntent {
                call_id: call.call_id.clone(),
                turn: call.turn,
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
                idempotent: rerun.idempotent,
                idempotency_key: idempotency_key.to_string(),
                rerun_basis: rerun.basis,
            }),
            observer,
        )
    }
}

/// The idempotency key of a new intent: `<session>/<call id>` (ledgers written before MCP
/// support recorded `<session>:<call id>`; a re-run sends whatever was recorded).
pub fn idempotency_key(session: &str, call_id: &str) -> String {
    format!("{session}/{call_id}")
}

fn to_outcome(call_id: &str, out: ToolOutput, took: Duration) -> ToolOutcome {
    let status = match out.status {
        ToolStatus::Ok => OutcomeStatus::Ok,
        ToolStatus::Error => OutcomeStatus::Error,
        ToolStatus::Timeout => OutcomeStatus::Timeout,
        ToolStatus::Cancelled => OutcomeStatus::Cancelled,
        ToolStatus::InDoubt => OutcomeStatus::InDoubt,
    };
    ToolOutcome {
        call_id: call_id.to_string(),
        status,
        result: out.text,
        exit_code: out.exit_code,
        duration_ms: Some(took.as_millis() as u64),
    }
}

/// Records `tool_start` durably before the tool's side effect begins, and a task's handle
/// and status changes before the tool goes on.
struct StartRecorder<'a, 'o> {
    session: &'a SharedSession,
    call_id: &'a str,
    record: bool,
    /// What the first poll of a reattached task found.
    reattached: Option<Reattached>,
    observer: &'a mut Observer<'o>,
}

impl StartRecorder<'_, '_> {
    fn append(&mut self, rec: Record) -> Result<(), String> {
        let kind = rec.kind();
        let data = rec.data_value();
        let stored = lock(self.session).append(rec).map_err(|e| e.to_string())?;
        (self.observer)(RunEvent::Record {
            seq: stored.seq,
            ts: &stored.ts,
            kind,
            data,
        });
        Ok(())
    }
}

impl ToolHooks for StartRecorder<'_, '_> {
    fn started(&mut self, process: Option<ProcessGroupRef>) -> Result<(), String> {
        if !self.record {
            return Ok(());
        }
        self.append(Record::ToolStart(ToolStart {
            call_id: self.call_id.to_string(),
            process: process.map(|p| ProcessRef {
                pgid: p.pgid,
                start_time_ticks: p.start_time_ticks,
            }),
        }))
    }

    fn progress(&mut self, text: &str) {
        (self.observer)(RunEvent::ToolProgress {
            call_id: self.call_id,
            text,
        });
    }

    fn task_created(&mut self, task: &TaskHandle) -> Result<(), String> {
        self.append(Record::ToolTask(ToolTask {
            call_id: self.call_id.to_string(),
            server: task.server.clone(),
            fingerprint: task.fingerprint.clone(),
            task_id: task.task_id.clone(),
            status: task.status,
            ttl_ms: task.ttl_ms,
            poll_interval_ms: task.poll_interval_ms,
            created_at: lazarus_ledger::clock::now_ts(),
        }))
    }

    fn task_status(
        &mut self,
        task_id: &str,
        status: TaskStatus,
        message: Option<&str>,
    ) -> Result<(), String> {
        self.append(Record::ToolTaskStatus(ToolTaskStatus {
            call_id: self.call_id.to_string(),
            task_id: task_id.to_string(),
            status,
            message: message.map(str::to_string),
        }))
    }

    fn task_reattached(&mut self, seen: Reattached) {
        self.reattached.get_or_insert(seen);
    }
}
