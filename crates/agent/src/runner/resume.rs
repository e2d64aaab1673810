//! Resume: what a cut-off session owes is settled before anything new happens. Finished
//! calls keep their recorded results, a started call without an outcome is re-run only when
//! its tool allows it from the facts recorded in its intent, otherwise it is closed in doubt
//! (its leftover process group terminated), and a receipt records all of it.

use std::time::Duration;

use lazarus_session::record::{
    McpCalls, OutcomeStatus, ProcessRef, Record, ResumeReceipt, SandboxRecord,
};
use lazarus_session::{CallState, Status};

use super::dispatch::{Plan, Step};
use super::{Observer, RunError, Runner, SharedSession, append, lock};
use crate::process::{self, ProcessGroupRef};
use crate::sandbox::Sandbox;
use crate::tools::{Reattached, Rerun, ToolContext};

impl Runner {
    /// Resume actions and receipt, when the session was cut off (or stopped) mid-work.
    pub(super) async fn resume_if_needed(
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
        // where the work stands (a session some resumer left to its owner is cut off all the
        // same: this is the owner)
        let status = st.work_status();
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
            world_seq: st.world.as_ref().map(|w| w.seq),
            ..ResumeReceipt::default()
        };
        // Results of finished calls of the last turn with calls are reused as recorded.
        let last_call_turn = st.calls.last().map(|c| c.turn);
        let reused: Vec<_> = st
            .calls
            .iter()
            .filter(|c| Some(c.turn) == last_call_turn && c.state() == CallState::Finished)
            .collect();
        receipt.calls_reused = reused.len() as u64;
        let mut mcp = McpCalls {
            calls_reused: reused.iter().filter(|c| is_mcp(c)).count() as u64,
            ..McpCalls::default()
        };
        for call in st.unresolved_calls() {
            let plan = match call.state() {
                CallState::Finished => continue,
                CallState::NotStarted => Plan::RunFresh { has_intent: false },
                CallState::IntentOnly => Plan::RunFresh { has_intent: true },
                // its task was recorded: ask the server for it again, never call again
                CallState::StartedNoOutcome if call.task.is_some() => Plan::Reattach,
                CallState::StartedNoOutcome => {
                    // what was recorded when the call started, and the tool's own word on it
                    let recorded = call.intent.as_ref().map(|i| Rerun {
                        idempotent: i.idempotent,
                        basis: i.rerun_basis.as_deref().cloned(),
                    });
                    let tool = self.toolbox.get(&call.name);
                    let may_rerun = recorded.as_ref().is_some_and(|r| {
                        r.idempotent && tool.as_ref().is_some_and(|t| t.may_rerun(r))
                    });
                    if may_rerun {
                        Plan::Rerun
                    } else {
                        // why, for the receipt and every view of the call
                        let why = match &tool {
                            Some(t) => t.rerun_refused_why(recorded.as_ref()),
                            None => format!("{} is not offered to this session", call.name),
                        };
                        receipt.in_doubt.push(lazarus_session::record::InDoubtCall {
                            call_id: call.call_id.clone(),
                            tool: call.name.clone(),
                            why,
                        });
                        Plan::InDoubt
                    }
                }
            };
            match plan {
                Plan::Reattach => mcp.tasks_reattached += 1,
                Plan::RunFresh { .. } => receipt.calls_not_started += 1,
                Plan::Rerun => {
                    receipt.calls_rerun += 1;
                    mcp.calls_rerun += u64::from(is_mcp(call));
                }
                Plan::InDoubt => {
                    receipt.calls_in_doubt += 1;
                    mcp.calls_in_doubt += u64::from(is_mcp(call));
                    if let Some(p) = call.start.as_ref().and_then(|s| s.process)
                        && self.terminate_leftover(p).await
                    {
                        receipt.processes_terminated += 1;
                    }
                }
            }
            let step = self
                .execute_call(session, &st, &call.call_id, plan, ctx, observer)
                .await?;
            match step {
                // the calls after it wait too; the drive stops at it
                Step::AwaitingApproval => break,
                Step::Reattached(seen) => {
                    // closed in doubt: the server no longer knew the task (or could not be
                    // asked, or lost it while it was polled again)
                    let lost = lock(session)
                        .state()
                        .call(&call.call_id)
                        .and_then(|c| c.outcome.as_ref())
                        .is_some_and(|o| o.status == OutcomeStatus::InDoubt);
                    match seen {
                        _ if lost => {
                            mcp.tasks_lost += 1;
                            receipt.calls_in_doubt += 1;
                            mcp.calls_in_doubt += 1;
                            let why = match seen {
                                Some(Reattached::Lost(why)) => why,
                                _ => format!(
                                    "its task could not be followed to its end on the MCP server of {}",
                                    call.name
                                ),
                            };
                            receipt.in_doubt.push(lazarus_session::record::InDoubtCall {
                                call_id: call.call_id.clone(),
                                tool: call.name.clone(),
                                why,
                            });
                        }
                        Some(Reattached::StillWorking) => mcp.tasks_still_working += 1,
                        Some(Reattached::FinishedWhileAway) => mcp.tasks_finished_while_away += 1,
                        Some(Reattached::Lost(_)) | None => {}
                    }
                }
                Step::Done => {}
            }
        }
        if mcp != McpCalls::default() {
            receipt.mcp = Some(mcp);
        }
        receipt.approvals = lock(session).state().approvals_since_receipt();
        receipt.every_call_has_one_result = lock(session).state().every_call_has_one_result();
        append(session, Record::Resume(receipt), observer)?;
        Ok(())
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
}

/// Whether a call went to an MCP server: its intent's basis says so, or (no intent) its name
/// has the MCP prefix.
fn is_mcp(call: &lazarus_session::Call) -> bool {
    match call.intent.as_ref().and_then(|i| i.rerun_basis.as_deref()) {
        Some(basis) => basis.get("source").and_then(|v| v.as_str()) == Some("mcp"),
        None => call.name.starts_with("mcp__"),
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
