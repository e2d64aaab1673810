//! Applying a record already checked: how each kind changes the state.

use crate::record::{Decision, Record, Scope};

use super::call::{ApprovalInfo, Call, DecisionInfo, IntentInfo, OutcomeInfo, StartInfo, TaskInfo};
use super::compaction::CompactionState;
use super::{ContextEntry, LastResponse, PendingInput, SessionState};

impl SessionState {
    /// Applies a record already checked with [`SessionState::check`], written at `seq`.
    pub fn apply(&mut self, seq: u64, rec: Record) {
        self.last_seq = seq;
        // A world recorded, or a resumer leaving the session alone, changes nothing of the
        // work: a stop stays a stop. Anything else after a stop (a resume receipt included)
        // means the stop was dealt with.
        if !matches!(rec, Record::World(_) | Record::NeedsOwner(_)) {
            self.interrupted = None;
        }
        // Someone ran the session (or recorded its world anew): its owner is back. Inputs and
        // decisions recorded for it meanwhile wait for that owner.
        if !matches!(
            rec,
            Record::Input(_)
                | Record::Control(_)
                | Record::Approval(_)
                | Record::NeedsOwner(_)
                | Record::Host(_)
        ) {
            self.needs_owner = None;
        }
        match rec {
            Record::Input(i) => {
                self.input_ids.insert(&i.input_id, seq);
                self.pending_inputs.push(PendingInput {
                    seq,
                    input_id: i.input_id,
                    text: i.text,
                });
            }
            Record::Control(c) => {
                self.input_ids.insert(&c.input_id, seq);
                self.pending_control = Some(c);
            }
            Record::TurnStart(t) => {
                self.turn = t.turn;
                self.turn_seqs.push(seq);
                self.turn_context_starts.push(self.context.len());
                self.open_turn = Some(t.turn);
                self.pending_control = None;
                for s in &t.inputs {
                    if let Some(pos) = self.pending_inputs.iter().position(|p| p.seq == *s) {
                        let p = self.pending_inputs.remove(pos);
                        self.context.push(ContextEntry::User {
                            seq: p.seq,
                            text: p.text,
                        });
                        self.last_entry_is_tool_result = false;
                    }
                }
            }
            Record::Response(r) => {
                self.open_turn = None;
                for (call_id, name, arguments) in r.tool_calls() {
                    self.call_index.insert(call_id, self.calls.len());
                    self.calls.push(Call {
                        call_id: call_id.to_string(),
                        turn: r.turn,
                        name: name.to_string(),
                        arguments: arguments.to_string(),
                        intent: None,
                        start: None,
                        outcome: None,
                        approval: None,
                        task: None,
                    });
                }
                self.last_response = Some(LastResponse {
                    seq,
                    turn: r.turn,
                    tool_calls: r.tool_calls().count(),
                    stop_reason: r.stop_reason,
                    failure: r.failure,
                });
                if !r.items.is_empty() {
                    self.context.push(ContextEntry::Assistant {
                        seq,
                        turn: r.turn,
                        items: r.items,
                    });
                    self.last_entry_is_tool_result = false;
                }
            }
            Record::ToolIntent(i) => {
                if let Some(call) = self.call_mut(&i.call_id) {
                    call.intent = Some(IntentInfo {
                        seq,
                        idempotent: i.idempotent,
                        idempotency_key: i.idempotency_key,
                        rerun_basis: i.rerun_basis.map(Box::new),
                    });
                }
            }
            Record::ToolStart(s) => {
                if let Some(call) = self.call_mut(&s.call_id) {
                    call.start = Some(StartInfo { process: s.process });
                }
            }
            Record::ToolOutcome(o) => {
                if let Some(&k) = self.call_index.get(&o.call_id)
                    && self.calls.get(k).is_some()
                {
                    self.context.push(ContextEntry::ToolResult { seq, call: k });
                    self.last_entry_is_tool_result = true;
                    self.calls[k].outcome = Some(OutcomeInfo {
                        status: o.status,
                        result: o.result,
                        exit_code: o.exit_code,
                        duration_ms: o.duration_ms,
                    });
                }
            }
            Record::Fork(f) => self.forked_at_turn = Some(f.at_turn),
            Record::Resume(r) => {
                // The receipt is the answer to a resume event (not to a compact request).
                if !self.compact_requested() {
                    self.pending_control = None;
                }
                self.last_receipt = Some(r);
                self.last_receipt_seq = seq;
            }
            Record::Interrupted(i) => self.interrupted = Some(i),
            Record::Compaction(c) => {
                let (through_turn, kept_from) = self
                    .compaction_cut(c.through_seq)
                    .unwrap_or((self.turn, self.context.len()));
                self.forget_summarised(kept_from, through_turn);
                if self.compact_requested() {
                    // the answer to a compact request
                    self.pending_control = None;
                }
                self.compaction = Some(CompactionState {
                    seq,
                    through_seq: c.through_seq,
                    through_turn,
                    kept_from,
                    summary: c.summary,
                })
            }
            Record::Import(i) => self.imported = Some(i),
            Record::ApprovalRequest(r) => {
                if let Some(call) = self.call_mut(&r.call_id) {
                    call.approval = Some(Box::new(ApprovalInfo {
                        request_seq: seq,
                        mode: r.mode,
                        reason: r.reason,
                        requested_at: r.requested_at,
                        decision: None,
                    }));
                }
            }
            Record::Approval(a) => {
                self.input_ids.insert(&a.input_id, seq);
                let mut granted = None;
                if let Some(call) = self.call_mut(&a.call_id)
                    && let Some(request) = call.approval.as_mut()
                {
                    request.decision = Some(DecisionInfo {
                        seq,
                        decision: a.decision,
                        scope: a.scope,
                        reason: a.reason,
                        by: a.by,
                        decided_at: a.decided_at,
                    });
                    if a.decision == Decision::Allow && a.scope != Scope::Once {
                        granted = Some(call.name.clone());
                    }
                }
                if let Some(tool) = granted {
                    self.session_grants.entry(tool).or_insert(seq);
                }
            }
            Record::Host(h) => self.apply_host(seq, h),
            Record::World(w) => self.world = Some(super::WorldAt { seq, world: *w }),
            Record::NeedsOwner(n) => self.needs_owner = Some((seq, n)),
            Record::ToolTask(t) => {
                if let Some(call) = self.call_mut(&t.call_id) {
                    call.task = Some(Box::new(TaskInfo {
                        seq,
                        server: t.server,
                        fingerprint: t.fingerprint,
                        task_id: t.task_id,
                        ttl_ms: t.ttl_ms,
                        poll_interval_ms: t.poll_interval_ms,
                        created_at: t.created_at,
                        status: t.status,
                        status_seq: seq,
                        message: None,
                    }));
                }
            }
            Record::ToolTaskStatus(t) => {
                if let Some(task) = self.call_mut(&t.call_id).and_then(|c| c.task.as_mut()) {
                    task.status = t.status;
                    task.status_seq = seq;
                    task.message = t.message;
                }
            }
            Record::Header => {}
        }
    }

    fn call_mut(&mut self, call_id: &str) -> Option<&mut Call> {
        let &i = self.call_index.get(call_id)?;
        self.calls.get_mut(i)
    }
}
