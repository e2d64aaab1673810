//! Replay: records in, resume state out — validating meaning, not only framing.
//!
//! [`SessionState::check`] decides whether a record may follow the current state and
//! [`SessionState::apply`] applies it. Replay applies every record of the ledger; a live
//! session checks a record *before* writing it, so a record that would make the log invalid
//! is refused and never reaches the disk.

use lazarus_ledger::Header;

use crate::ids::IdMap;
use crate::record::{Control, Input, Interrupted, Item, OutcomeStatus, Record, ResumeReceipt};
use crate::window::Window;

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
    #[error("a fork record may only follow the copied prefix")]
    MisplacedFork,
    #[error("header record outside line 1")]
    MisplacedHeader,
    #[error("compaction of seqs {from_seq}..={through_seq} does not fit: {why}")]
    BadCompaction {
        from_seq: u64,
        through_seq: u64,
        why: &'static str,
    },
}

/// A message of the model context rebuilt from the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextEntry {
    User {
        seq: u64,
        text: String,
    },
    Assistant {
        seq: u64,
        turn: u64,
        items: Vec<Item>,
    },
    /// A tool result: the outcome of `calls[call]` (its text is stored once, there).
    ToolResult {
        seq: u64,
        call: usize,
    },
}

/// The last model response, summarised (its items live in the context).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastResponse {
    pub seq: u64,
    pub turn: u64,
    /// Number of tool calls it made.
    pub tool_calls: usize,
    pub stop_reason: Option<String>,
    pub failure: Option<crate::record::Failure>,
}

/// An input recorded but not yet delivered to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingInput {
    pub seq: u64,
    pub input_id: String,
    pub text: String,
}

/// Where a tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallState {
    /// Asked for by the model; no intent recorded: nothing ran.
    NotStarted,
    /// Intent recorded, the effect never began: nothing ran.
    IntentOnly,
    /// The effect began and no outcome was recorded: the effect is unknown.
    StartedNoOutcome,
    Finished,
}

/// Everything known about one tool call. Holds each piece of text once: the records'
/// repeated call ids and arguments are not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub call_id: String,
    pub turn: u64,
    pub name: String,
    pub arguments: String,
    pub intent: Option<IntentInfo>,
    pub start: Option<StartInfo>,
    pub outcome: Option<OutcomeInfo>,
}

/// What a `tool_intent` recorded beyond the call itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentInfo {
    pub idempotent: bool,
    pub idempotency_key: String,
}

/// What a `tool_start` recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartInfo {
    pub process: Option<crate::record::ProcessRef>,
}

/// What a `tool_outcome` recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeInfo {
    pub status: OutcomeStatus,
    pub result: String,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
}

impl Call {
    pub fn state(&self) -> CallState {
        match (&self.intent, &self.start, &self.outcome) {
            (_, _, Some(_)) => CallState::Finished,
            (Some(_), Some(_), None) => CallState::StartedNoOutcome,
            (Some(_), None, None) => CallState::IntentOnly,
            (None, _, None) => CallState::NotStarted,
        }
    }
}

/// The session rebuilt from its ledger: what resume needs to continue exactly.
#[derive(Debug, Clone)]
pub struct SessionState {
    pub header: Header,
    /// Seq of the last record (0: header only).
    pub last_seq: u64,
    /// The transcript as model context, in order, from the kept tail of the compaction in
    /// force on (what a compaction summarised is dropped; indices stay absolute).
    pub context: Window<ContextEntry>,
    /// The last context entry ever pushed is a tool result: the model has not seen it (kept
    /// apart from `context`, which a compaction may empty).
    last_entry_is_tool_result: bool,
    pub pending_inputs: Vec<PendingInput>,
    /// Every input and control id seen, with the seq that recorded it.
    pub input_ids: IdMap<u64>,
    /// Last turn number started (0: none).
    pub turn: u64,
    /// Seq of each turn's `turn_start`, index = turn - 1.
    pub turn_seqs: Vec<u64>,
    /// Length of `context` (absolute) when each turn started, index = turn - 1.
    pub turn_context_starts: Vec<usize>,
    /// A turn started whose response is not recorded.
    pub open_turn: Option<u64>,
    /// Tool calls in the order the model made them, from the first one still in the live
    /// context on (summarised calls are dropped; indices stay absolute).
    pub calls: Window<Call>,
    /// Every call id the model ever used, with its (absolute) index in `calls`.
    call_index: IdMap<usize>,
    /// Calls that ended in doubt and were since dropped by a compaction.
    summarised_in_doubt: usize,
    /// The last response, if any.
    pub last_response: Option<LastResponse>,
    pub last_receipt: Option<ResumeReceipt>,
    /// The most recent stop, if nothing happened since.
    pub interrupted: Option<Interrupted>,
    /// The most recent control input, if nothing happened since (a `resume` event waits for
    /// its receipt, a `compact` request for a compaction or the next turn).
    pub pending_control: Option<Control>,
    /// Fork lineage recorded in this session (its `fork` record), if any.
    pub forked_at_turn: Option<u64>,
    /// The latest compaction in force, if any: requests send its summary, then the context
    /// entries after its `through_seq`.
    pub compaction: Option<CompactionState>,
}

/// The compaction in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionState {
    /// Seq of the `compaction` record.
    pub seq: u64,
    pub through_seq: u64,
    /// The last turn it summarises: the kept tail is the context of later turns.
    pub through_turn: u64,
    /// Index in `context` where the kept tail starts.
    pub kept_from: usize,
    pub summary: String,
}

impl SessionState {
    /// The state of a session holding only `header`.
    pub fn new(header: Header) -> Self {
        SessionState {
            header,
            last_seq: 0,
            context: Window::new(),
            last_entry_is_tool_result: false,
            pending_inputs: Vec::new(),
            input_ids: IdMap::new(),
            turn: 0,
            turn_seqs: Vec::new(),
            turn_context_starts: Vec::new(),
            open_turn: None,
            calls: Window::new(),
            call_index: IdMap::new(),
            summarised_in_doubt: 0,
            last_response: None,
            last_receipt: None,
            interrupted: None,
            pending_control: None,
            forked_at_turn: None,
            compaction: None,
        }
    }

    pub fn id(&self) -> &str {
        &self.header.id
    }

    /// The result text of a finished call ("" if it has none).
    pub fn tool_result_text(&self, call_id: &str) -> &str {
        self.call(call_id)
            .and_then(|c| c.outcome.as_ref())
            .map_or("", |o| o.result.as_str())
    }

    /// The call with this id, unless a compaction summarised it.
    pub fn call(&self, call_id: &str) -> Option<&Call> {
        self.call_index
            .get(call_id)
            .and_then(|&i| self.calls.get(i))
    }

    /// Whether a response of this session already used `call_id` (also one a compaction
    /// dropped): a new call must not take it.
    pub fn call_id_used(&self, call_id: &str) -> bool {
        self.call_index.contains_key(call_id)
    }

    /// Calls of the model's responses that have no outcome yet. (Every call a compaction
    /// summarised had its outcome: the compaction's rule.)
    pub fn unresolved_calls(&self) -> impl Iterator<Item = &Call> {
        self.calls.iter().filter(|c| c.outcome.is_none())
    }

    /// True when every tool call of every response has exactly one outcome (G9's check;
    /// "at most one" is enforced on every append, so this checks "at least one"). Calls a
    /// compaction dropped all had theirs (the compaction's rule).
    pub fn every_call_has_one_result(&self) -> bool {
        self.calls.iter().all(|c| c.outcome.is_some())
    }

    /// Checks that `rec` may follow the current state.
    pub fn check(&self, rec: &Record) -> Result<(), ReplayError> {
        match rec {
            Record::Input(Input { input_id, .. }) | Record::Control(Control { input_id, .. }) => {
                if let Some(&first) = self.input_ids.get(input_id) {
                    return Err(ReplayError::DuplicateInputId {
                        input_id: input_id.clone(),
                        first,
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
                Some(c) if c.intent.is_some() => {
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
                    "auto" | "manual" => {}
                    _ => return bad("trigger must be auto or manual"),
                }
            }
            Record::Header => return Err(ReplayError::MisplacedHeader),
        }
        Ok(())
    }

    /// Applies a record already checked with [`SessionState::check`], written at `seq`.
    pub fn apply(&mut self, seq: u64, rec: Record) {
        self.last_seq = seq;
        // Anything after a stop (a resume receipt included) means the stop was dealt with.
        self.interrupted = None;
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
                        idempotent: i.idempotent,
                        idempotency_key: i.idempotency_key,
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
            Record::Header => {}
        }
    }

    /// Where a compaction through `through_seq` cuts the context: (the last turn it
    /// summarises, the index in `context` where the kept tail starts). `through_seq` must end
    /// a turn: the record right before a `turn_start`, or the last record.
    pub fn compaction_cut(&self, through_seq: u64) -> Option<(u64, usize)> {
        if through_seq == self.last_seq {
            return Some((self.turn, self.context.len()));
        }
        // turn_seqs ascend (each turn_start follows the previous one)
        let next = self.turn_seqs.binary_search(&(through_seq + 1)).ok()?;
        Some((next as u64, self.turn_context_starts[next]))
    }

    /// The seq a compaction that summarises turns up to `through_turn` ends at (the record
    /// before turn `through_turn + 1` starts, or the last record).
    pub fn turn_end_seq(&self, through_turn: u64) -> u64 {
        match self.turn_seqs.get(through_turn as usize) {
            Some(&next) => next - 1,
            None => self.last_seq,
        }
    }

    /// Drops what a compaction summarised: the `context` entries before `kept_from` and the
    /// calls of turns up to `through_turn` (except any a kept tool result still names).
    /// Nothing reads them again — requests start at the summary, the next compaction
    /// summarises from `kept_from` on, and a resume only looks at calls after the last
    /// complete turn — so a replay holds the live context, not the whole transcript. The
    /// records stay in the ledger, where `show`, the web view and forks read them; the ids
    /// stay in `input_ids` and `call_index`, so a repeated id is still refused.
    fn forget_summarised(&mut self, kept_from: usize, through_turn: u64) {
        self.context.forget_before(kept_from);
        let mut cut = self.calls.start()
            + self
                .calls
                .iter()
                .position(|c| c.turn > through_turn)
                .unwrap_or(self.calls.iter().len());
        for e in &self.context {
            if let ContextEntry::ToolResult { call, .. } = e {
                cut = cut.min(*call);
            }
        }
        self.summarised_in_doubt += self
            .calls
            .iter()
            .take(cut.saturating_sub(self.calls.start()))
            .filter(|c| is_in_doubt(c))
            .count();
        self.calls.forget_before(cut);
    }

    fn call_mut(&mut self, call_id: &str) -> Option<&mut Call> {
        let &i = self.call_index.get(call_id)?;
        self.calls.get_mut(i)
    }

    /// The context the model is sent: the summary of the compaction in force (if any) and
    /// the entries after it.
    pub fn live_context(&self) -> (Option<&str>, &[ContextEntry]) {
        match &self.compaction {
            Some(c) => (Some(&c.summary), self.context.since(c.kept_from)),
            None => (None, self.context.since(0)),
        }
    }

    /// True when turn `turn` has a response and every call it made has an outcome.
    pub fn turn_is_complete(&self, turn: u64) -> bool {
        if turn == 0 {
            return true;
        }
        if turn > self.turn || self.open_turn == Some(turn) {
            return false;
        }
        // calls a compaction dropped all had their outcome
        self.calls
            .iter()
            .filter(|c| c.turn == turn)
            .all(|c| c.outcome.is_some())
    }

    /// The last seq a fork at the end of turn `at_turn` keeps: the prefix ends right before
    /// the next turn starts (or at the end of the log). The turn must be complete.
    /// `Err` says why that is not a fork point. Every backend forks by this rule.
    pub fn fork_boundary(&self, at_turn: u64) -> Result<u64, String> {
        if at_turn > self.turn {
            return Err(format!("the session has {} turns", self.turn));
        }
        if !self.turn_is_complete(at_turn) {
            return Err(
                "that turn is not complete (no response, or a tool call without result)".into(),
            );
        }
        Ok(match self.turn_seqs.get(at_turn as usize) {
            Some(&next_turn_seq) => next_turn_seq - 1,
            None => self.last_seq,
        })
    }

    /// A `compact` control input is waiting: compact before the next turn (it owes no work by
    /// itself; a turn start or a compaction answers it).
    pub fn compact_requested(&self) -> bool {
        self.pending_control
            .as_ref()
            .is_some_and(|c| c.action == COMPACT_ACTION)
    }

    /// A control input that owes work is waiting (a `resume` event owes its receipt).
    fn control_owed(&self) -> bool {
        self.pending_control.is_some() && !self.compact_requested()
    }

    /// Whether the session owes work: a turn to request (again), a tool call without an
    /// outcome, an input not yet answered, or tool results the model has not seen. The one
    /// rule for it: the runner keeps going while it holds, the gateway requeues such sessions
    /// at start and takes them over, and [`Status::owes_work`] is its tail-only twin for
    /// listings and boot-resume. A pending `resume` event owes its receipt.
    pub fn owes_work(&self) -> bool {
        self.open_turn.is_some()
            || self.unresolved_calls().next().is_some()
            || !self.pending_inputs.is_empty()
            || self.control_owed()
            || self.last_entry_is_tool_result
    }

    /// What the model will see next: the status of the work, in one word.
    pub fn status(&self) -> Status {
        if self.interrupted.is_some() {
            return Status::Stopped;
        }
        if self
            .unresolved_calls()
            .any(|c| c.state() == CallState::StartedNoOutcome)
        {
            return Status::InDoubt;
        }
        if self.open_turn.is_some() || self.unresolved_calls().next().is_some() {
            return Status::Interrupted;
        }
        if !self.pending_inputs.is_empty() || self.control_owed() {
            return Status::Pending;
        }
        match &self.last_response {
            Some(r) if r.failure.is_some() => Status::Failed,
            Some(r) if r.tool_calls > 0 => Status::Interrupted,
            Some(_) => {
                // the last response's calls are all done: a following turn is owed
                if self.last_entry_is_tool_result {
                    Status::Interrupted
                } else {
                    Status::Idle
                }
            }
            None if self.turn == 0 && self.last_seq == 0 => Status::New,
            None => Status::Idle,
        }
    }

    /// Calls still in the live context whose outcome says "the effect is unknown".
    pub fn in_doubt_calls(&self) -> impl Iterator<Item = &Call> {
        self.calls.iter().filter(|c| is_in_doubt(c))
    }

    /// How many calls of the whole session ended in doubt (those a compaction dropped too).
    pub fn in_doubt_count(&self) -> usize {
        self.summarised_in_doubt + self.in_doubt_calls().count()
    }
}

fn is_in_doubt(c: &Call) -> bool {
    c.outcome
        .as_ref()
        .is_some_and(|o| o.status == OutcomeStatus::InDoubt)
}

/// The `action` of a control input that asks for a compaction.
pub const COMPACT_ACTION: &str = "compact";

/// A session's status in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Header only.
    New,
    /// Nothing owed: the last turn finished.
    Idle,
    /// Inputs recorded and not yet answered.
    Pending,
    /// A writer is working on it now.
    Running,
    /// Cut off mid-turn: resume continues it.
    Interrupted,
    /// Cut off while a tool call was running: its effect is unknown until resume re-runs it
    /// (idempotent) or closes it as in doubt and tells the model.
    InDoubt,
    /// Stopped cleanly on request (signal, shutdown); resumable.
    Stopped,
    /// The last model request failed after retries.
    Failed,
    /// The session's file (or rows) cannot be read as a session: listed, never run.
    Corrupt,
}

impl Status {
    /// Whether a session in this status may owe work, judged from its last record alone (as
    /// [`owes_work_from_tail`] does, for listings): inputs not answered, cut off mid-turn, or
    /// stopped with work left (a stop is recorded only then).
    pub fn owes_work(self) -> bool {
        matches!(
            self,
            Status::Pending | Status::Interrupted | Status::InDoubt | Status::Stopped
        )
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            Status::New => "new",
            Status::Idle => "idle",
            Status::Pending => "pending",
            Status::Running => "running",
            Status::Interrupted => "interrupted",
            Status::InDoubt => "in_doubt",
            Status::Corrupt => "corrupt",
            Status::Stopped => "stopped",
            Status::Failed => "failed",
        };
        f.write_str(s)
    }
}

/// Whether a session whose last record is `kind`/`data` may owe work: the tail-only twin of
/// [`SessionState::owes_work`], for listings and boot-resume (no replay). It never says "no"
/// where a replay says "yes"; where only a replay can tell (the last record is a resume
/// receipt, a stop or a fork point) it says "yes", and whoever acts on it replays anyway.
pub fn owes_work_from_tail(kind: &str, data: &serde_json::Value) -> bool {
    match kind {
        "header" => false,
        "response" => status_from_tail(kind, data) == Status::Interrupted,
        "input" | "control" | "turn_start" | "tool_intent" | "tool_start" | "tool_outcome"
        | "resume" | "interrupted" | "fork" => true,
        // automatic ones are written only while work is owed, manual ones only when not
        "compaction" => data["trigger"] != "manual",
        // A kind this build does not know: say "maybe" rather than leave work behind.
        _ => true,
    }
}

/// Status from the last record alone (for listings: no replay).
pub fn status_from_tail(kind: &str, data: &serde_json::Value) -> Status {
    match kind {
        "header" => Status::New,
        "input" | "control" => Status::Pending,
        "tool_start" => Status::InDoubt,
        "turn_start" | "tool_intent" | "tool_outcome" | "resume" => Status::Interrupted,
        "interrupted" => Status::Stopped,
        "compaction" if data["trigger"] != "manual" => Status::Interrupted,
        "response" => {
            if data.get("failure").is_some_and(|f| !f.is_null()) {
                Status::Failed
            } else if data["items"]
                .as_array()
                .is_some_and(|items| items.iter().any(|i| i["type"] == "tool_call"))
            {
                Status::Interrupted
            } else {
                Status::Idle
            }
        }
        _ => Status::Idle,
    }
}
