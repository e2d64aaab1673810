//! Whether a record may follow the state: every rule of meaning a record is checked against
//! before it is written (and again on replay), and the error naming what was expected.

use crate::record::{Approval, Control, Decision, Input, Record};

use super::SessionState;

/// A record that does not fit the session so far. Each names what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error(
        "turn {found} starts, but turn {expected} was expected (turns are numbered without gaps)"
    )]
    TurnOutOfOrder { expected: u64, found: u64 },
    #[error(
        "turn {turn} chains to seq {found:?}, but the previous turn started at seq {expected:?}"
    )]
    BrokenTurnChain {
        turn: u64,
        expected: Option<u64>,
        found: Option<u64>,
    },
    #[error("turn {turn} starts while turn {open} has no response yet")]
    TurnStillOpen { turn: u64, open: u64 },
    #[error(
        "response for turn {turn}, but the open turn is {open:?} (at most one response per turn)"
    )]
    ResponseWithoutOpenTurn { turn: u64, open: Option<u64> },
    #[error("turn {turn} consumes input seq {seq}, which is not a pending input")]
    InputNotPending { turn: u64, seq: u64 },
    #[error("input id {input_id:?} recorded twice (first at seq {first})")]
    DuplicateInputId { input_id: String, first: u64 },
    #[error("call id {call_id:?} appears in two responses")]
    DuplicateCallId { call_id: String },
    #[error("tool intent for call {call_id:?}, which no response asked for")]
    UnknownCall { call_id: String },
    #[error(
        "tool intent for call {call_id:?} names tool {found:?}, but the model called {expected:?}"
    )]
    IntentMismatch {
        call_id: String,
        expected: String,
        found: String,
    },
    #[error("second intent for call {call_id:?}")]
    DuplicateIntent { call_id: String },
    #[error("tool start for call {call_id:?} without an intent")]
    StartWithoutIntent { call_id: String },
    #[error("second start for call {call_id:?}")]
    DuplicateStart { call_id: String },
    #[error("outcome for call {call_id:?} without an intent")]
    OutcomeWithoutIntent { call_id: String },
    #[error("call {call_id:?} finished twice")]
    CallFinishedTwice { call_id: String },
    #[error(
        "tool_task for call {call_id:?}, which has no tool_start, or an outcome already, or a task already"
    )]
    MisplacedTask { call_id: String },
    #[error(
        "tool_task_status for call {call_id:?} names task {found:?}, but the call's recorded task is {expected:?} (or it has none, or an outcome already)"
    )]
    TaskStatusMismatch {
        call_id: String,
        expected: Option<String>,
        found: String,
    },
    #[error("a fork record may only follow the copied prefix")]
    MisplacedFork,
    #[error(
        "an import record may only be the first record after the header (found after seq {last_seq})"
    )]
    MisplacedImport { last_seq: u64 },
    #[error("approval request for call {call_id:?}, which no response asked for")]
    ApprovalForUnknownCall { call_id: String },
    #[error(
        "approval request for call {call_id:?} after the call began (its intent or outcome is recorded)"
    )]
    ApprovalRequestTooLate { call_id: String },
    #[error("second approval request for call {call_id:?}")]
    DuplicateApprovalRequest { call_id: String },
    #[error("decision on call {call_id:?}, which has no approval request")]
    DecisionWithoutRequest { call_id: String },
    #[error(
        "call {call_id:?} was decided already ({first} at seq {first_seq}); a call takes one decision"
    )]
    DecidedTwice {
        call_id: String,
        first: &'static str,
        first_seq: u64,
    },
    #[error("tool intent for call {call_id:?}, which waits for approval (no decision recorded)")]
    IntentBeforeDecision { call_id: String },
    #[error("tool intent for call {call_id:?}, which was denied at seq {seq}")]
    IntentAfterDenial { call_id: String, seq: u64 },
    #[error("a host item must be a JSON object (and host_items holds at least one)")]
    HostItemNotObject,
    #[error("host_pop of seq {seq}, but the newest item of the history is at {newest:?}")]
    HostPopNotNewest { seq: u64, newest: Option<u64> },
    #[error("host_clear through seq {through_seq}, past the last record ({last_seq})")]
    HostClearBeyondLog { through_seq: u64, last_seq: u64 },
    #[error("host call {call_id:?} announced twice")]
    HostCallTwice { call_id: String },
    #[error("host call outcome for {call_id:?}, which no host_call_intent announced")]
    HostOutcomeWithoutIntent { call_id: String },
    #[error(
        "host writes against checkpoint {checkpoint_id:?} in namespace {ns:?}, which no host_checkpoint recorded"
    )]
    HostWritesWithoutCheckpoint { ns: String, checkpoint_id: String },
    #[error(
        "host_forget of checkpoint {checkpoint_id:?} in namespace {ns:?}, which the thread does not hold"
    )]
    HostForgetUnknown { ns: String, checkpoint_id: String },
    #[error("header record outside line 1")]
    MisplacedHeader,
    #[error("compaction of seqs {from_seq}..={through_seq} does not fit: {why}")]
    BadCompaction {
        from_seq: u64,
        through_seq: u64,
        why: &'static str,
    },
}

impl SessionState {
    /// A decision needs a request on its call, and the call no decision yet.
    fn check_decision(&self, a: &Approval) -> Result<(), ReplayError> {
        let request = self
            .call(&a.call_id)
            .and_then(|c| c.approval.as_ref())
            .ok_or_else(|| ReplayError::DecisionWithoutRequest {
                call_id: a.call_id.clone(),
            })?;
        if let Some(d) = &request.decision {
            return Err(ReplayError::DecidedTwice {
                call_id: a.call_id.clone(),
                first: d.decision.as_str(),
                first_seq: d.seq,
            });
        }
        Ok(())
    }

    /// Checks that `rec` may follow the current state.
    pub fn check(&self, rec: &Record) -> Result<(), ReplayError> {
        match rec {
            Record::Input(Input { input_id, .. })
            | Record::Control(Control { input_id, .. })
            | Record::Approval(Approval { input_id, .. }) => {
                if let Some(&first) = self.input_ids.get(input_id) {
                    return Err(ReplayError::DuplicateInputId {
                        input_id: input_id.clone(),
                        first,
                    });
                }
                if let Record::Approval(a) = rec {
                    self.check_decision(a)?;
                }
            }
            Record::ApprovalRequest(r) => {
                let call =
                    self.call(&r.call_id)
                        .ok_or_else(|| ReplayError::ApprovalForUnknownCall {
                            call_id: r.call_id.clone(),
                        })?;
                if call.intent.is_some() || call.outcome.is_some() {
                    return Err(ReplayError::ApprovalRequestTooLate {
                        call_id: r.call_id.clone(),
                    });
                }
                if call.approval.is_some() {
                    return Err(ReplayError::DuplicateApprovalRequest {
                        call_id: r.call_id.clone(),
                    });
                }
                if call.name != r.tool {
                    return Err(ReplayError::IntentMismatch {
                        call_id: r.call_id.clone(),
                        expected: call.name.clone(),
                        found: r.tool.clone(),
                    });
                }
            }
            Record::TurnStart(t) => {
                if let Some(open) = self.open_turn {
                    return Err(ReplayError::TurnStillOpen { turn: t.turn, open });
                }
                if t.turn != self.turn + 1 {
                    return Err(ReplayError::TurnOutOfOrder {
                        expected: self.turn + 1,
                        found: t.turn,
                    });
                }
                let expected = self.turn_seqs.last().copied();
                if t.prev_seq != expected {
                    return Err(ReplayError::BrokenTurnChain {
                        turn: t.turn,
                        expected,
                        found: t.prev_seq,
                    });
                }
                for &seq in &t.inputs {
                    if !self.pending_inputs.iter().any(|p| p.seq == seq) {
                        return Err(ReplayError::InputNotPending { turn: t.turn, seq });
                    }
                }
            }
            Record::Response(r) => {
                if self.open_turn != Some(r.turn) {
                    return Err(ReplayError::ResponseWithoutOpenTurn {
                        turn: r.turn,
                        open: self.open_turn,
                    });
                }
                let mut seen = std::collections::HashSet::new();
                for (call_id, _, _) in r.tool_calls() {
                    if self.call_index.contains_key(call_id) || !seen.insert(call_id) {
                        return Err(ReplayError::DuplicateCallId {
                            call_id: call_id.to_string(),
                        });
                    }
                }
            }
            Record::ToolIntent(i) => {
                let call = self
                    .call(&i.call_id)
                    .ok_or_else(|| ReplayError::UnknownCall {
                        call_id: i.call_id.clone(),
                    })?;
                if call.intent.is_some() {
                    return Err(ReplayError::DuplicateIntent {
                        call_id: i.call_id.clone(),
                    });
                }
                // the decision comes before the call can start: never a call run unasked
                if let Some(a) = &call.approval {
                    match &a.decision {
                        None => {
                            return Err(ReplayError::IntentBeforeDecision {
                                call_id: i.call_id.clone(),
                            });
                        }
                        Some(d) if d.decision == Decision::Deny => {
                            return Err(ReplayError::IntentAfterDenial {
                                call_id: i.call_id.clone(),
                                seq: d.seq,
                            });
                        }
                        Some(_) => {}
                    }
                }
                if call.name != i.tool {
                    return Err(ReplayError::IntentMismatch {
                        call_id: i.call_id.clone(),
                        expected: call.name.clone(),
                        found: i.tool.clone(),
                    });
                }
            }
            Record::ToolStart(s) => {
                let call = self.call(&s.call_id);
                match call {
                    Some(c) if c.intent.is_some() => {
                        if c.start.is_some() {
                            return Err(ReplayError::DuplicateStart {
                                call_id: s.call_id.clone(),
                            });
                        }
                    }
                    _ => {
                        return Err(ReplayError::StartWithoutIntent {
                            call_id: s.call_id.clone(),
                        });
                    }
                }
            }
            Record::ToolOutcome(o) => match self.call(&o.call_id) {
                // a denied call is closed without ever starting
                Some(c)
                    if c.intent.is_some()
                        || (c.decision().is_some_and(|d| d.decision == Decision::Deny)
                            && o.status == crate::record::OutcomeStatus::NotRun) =>
                {
                    if c.outcome.is_some() {
                        return Err(ReplayError::CallFinishedTwice {
                            call_id: o.call_id.clone(),
                        });
                    }
                }
                _ => {
                    return Err(ReplayError::OutcomeWithoutIntent {
                        call_id: o.call_id.clone(),
                    });
                }
            },
            Record::Fork(_) => {
                if self.forked_at_turn.is_some() || self.header.parent.is_none() {
                    return Err(ReplayError::MisplacedFork);
                }
            }
            Record::Resume(_) | Record::Interrupted(_) => {}
            Record::Compaction(c) => {
                let bad = |why| {
                    Err(ReplayError::BadCompaction {
                        from_seq: c.from_seq,
                        through_seq: c.through_seq,
                        why,
                    })
                };
                let expected_from = self.compaction.as_ref().map_or(1, |k| k.through_seq + 1);
                if c.from_seq != expected_from {
                    return bad("from_seq must follow the previous compaction (or be 1)");
                }
                if c.through_seq < c.from_seq || c.through_seq > self.last_seq {
                    return bad("through_seq must be a recorded seq at or after from_seq");
                }
                if self.open_turn.is_some() || self.unresolved_calls().next().is_some() {
                    return bad("a turn is open or a tool call has no outcome");
                }
                if self.compaction_cut(c.through_seq).is_none() {
                    return bad(
                        "through_seq must end a turn (the record before a turn_start, or the last record)",
                    );
                }
                match c.trigger.as_str() {
                    "auto" if !self.owes_work() => {
                        return bad("an automatic compaction is written only while work is owed");
                    }
                    "manual" if self.owes_work() => {
                        return bad("a manual compaction is written only when no work is owed");
                    }
                    "import" if self.imported.is_none() => {
                        return bad("an import compaction is written only in an imported session");
                    }
                    "auto" | "manual" | "import" => {}
                    _ => return bad("trigger must be auto, manual or import"),
                }
            }
            Record::Import(_) => {
                if self.last_seq != 0 {
                    return Err(ReplayError::MisplacedImport {
                        last_seq: self.last_seq,
                    });
                }
            }
            Record::Host(h) => self.check_host(h)?,
            Record::World(_) | Record::NeedsOwner(_) => {}
            Record::ToolTask(t) => match self.call(&t.call_id) {
                Some(c) if c.start.is_some() && c.outcome.is_none() && c.task.is_none() => {}
                _ => {
                    return Err(ReplayError::MisplacedTask {
                        call_id: t.call_id.clone(),
                    });
                }
            },
            Record::ToolTaskStatus(t) => {
                let call = self.call(&t.call_id);
                let expected = call
                    .and_then(|c| c.task.as_ref())
                    .map(|k| k.task_id.clone());
                let open = call.is_some_and(|c| c.outcome.is_none());
                if !open || expected.as_deref() != Some(t.task_id.as_str()) {
                    return Err(ReplayError::TaskStatusMismatch {
                        call_id: t.call_id.clone(),
                        expected,
                        found: t.task_id.clone(),
                    });
                }
            }
            Record::Header => return Err(ReplayError::MisplacedHeader),
        }
        Ok(())
    }
}
