//! The turn loop: inputs in, a turn started, the model asked, its calls run, until the
//! session owes nothing (or the turn budget, a failure or a stop ends the drive).

use lazarus_session::record::{Failure, Interrupted, Record, Response, TurnStart};
use lazarus_session::{CallState, SessionState};

use super::dispatch::{Plan, Step};
use super::transcript::{clean_calls, record_attempts, to_record};
use super::{
    Observer, RunError, RunEvent, RunOutcome, Runner, SharedSession, append, compaction,
    drain_inbox, lock,
};
use crate::provider::{CancellationToken, CompletionFailure, ProviderError, StreamEvent};
use crate::tools::ToolContext;

impl Runner {
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
            call: None,
        };
        // the session runs in the world it recorded, or not at all
        self.enter_world(session, observer)?;
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
                    let step = self
                        .execute_call(session, &st, &call.call_id, plan, &ctx, observer)
                        .await?;
                    if step == Step::AwaitingApproval {
                        return Ok(RunOutcome::AwaitingApproval {
                            call_id: call.call_id.clone(),
                        });
                    }
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
        let merged = clean_calls(&mut response, completion.text_tool_calls > 0);
        let failed_attempts: Vec<_> = completion
            .attempts
            .iter()
            .filter(|a| a.error.is_some())
            .cloned()
            .collect();
        let mut rec = to_record(st, turn, response, &failed_attempts);
        if !merged.is_empty() {
            // recorded in the response, and said in the kept call's result
            let ids: Vec<String> = rec.tool_calls().map(|(id, _, _)| id.to_string()).collect();
            let mut note = serde_json::Map::new();
            let mut repeats = self.repeats.lock().unwrap_or_else(|p| p.into_inner());
            for (at, n) in merged {
                if let Some(id) = ids.get(at) {
                    note.insert(id.clone(), serde_json::json!(n));
                    repeats.insert(format!("{}/{id}", st.id()), n);
                }
            }
            rec.provider_extra
                .get_or_insert_with(Default::default)
                .insert(
                    "lazarus_repeated_calls".into(),
                    serde_json::Value::Object(note),
                );
        }
        Ok(rec)
    }
}
