//! Replay: records in, resume state out — validating meaning, not only framing.
//!
//! [`SessionState::check`] decides whether a record may follow the current state and
//! [`SessionState::apply`] applies it. Replay applies every record of the ledger; a live
//! session checks a record *before* writing it, so a record that would make the log invalid
//! is refused and never reaches the disk.
//!
//! This module holds [`SessionState`] itself, the context it rebuilds and its plain queries;
//! the rules are split by responsibility:
//! * `call`: the tool call types and where a call stands;
//! * `check`: whether a record may follow the state ([`ReplayError`] when it may not);
//! * `apply`: applying a checked record;
//! * `compaction`: the compaction in force, where it cuts, what it drops, and the context
//!   the model is sent after it;
//! * `status`: the one "does this session owe work" rule, the status in one word, and their
//!   tail-only twins.

use lazarus_ledger::Header;
use serde::Deserialize;

use crate::ids::IdMap;
use crate::record::{Control, Interrupted, Item, NeedsOwner, ResumeReceipt, World};
use crate::window::Window;

mod apply;
mod call;
mod check;
mod compaction;
mod host;
mod status;

pub use call::{
    ApprovalInfo, Call, CallState, DecisionInfo, IntentInfo, OutcomeInfo, StartInfo, TaskInfo,
};
pub use check::ReplayError;
pub use compaction::{COMPACT_ACTION, CompactionState};
pub use host::{CheckpointKey, HostCall, HostGraph, HostState, HostWriteAt};
pub use status::{Status, owes_work_from_records, owes_work_from_tail, status_from_tail};

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
    /// Seq of the last resume receipt (0: none).
    pub last_receipt_seq: u64,
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
    /// Where the session came from, when it was imported from another agent's log.
    pub imported: Option<crate::record::Import>,
    /// Tools a decision allowed for the rest of the session (scope `session` or `always`),
    /// with the seq of that decision: their later calls need no approval.
    pub session_grants: std::collections::BTreeMap<String, u64>,
    /// A host framework's history and announced calls (sessions the Python package writes).
    pub host: HostState,
    /// What the session runs with now: the newest `world` record, else the header's
    /// `meta.world`; `None` for a session that never recorded one (imported, or older).
    pub world: Option<WorldAt>,
    /// The header's `meta.world` did not read as a world (written by a newer version?):
    /// nobody may resume the session until this build understands it.
    pub world_unreadable: Option<String>,
    /// A resumer left the session alone because it could not honour its world, and nobody
    /// ran it since: the record's seq and what it said.
    pub needs_owner: Option<(u64, NeedsOwner)>,
}

/// A world and the seq that recorded it (0: the header's `meta.world`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldAt {
    pub seq: u64,
    pub world: World,
}

impl SessionState {
    /// The state of a session holding only `header`.
    pub fn new(header: Header) -> Self {
        let (world, world_unreadable) = match header.meta.as_ref().and_then(|m| m.get("world")) {
            None => (None, None),
            Some(w) => match World::deserialize(w) {
                Ok(world) => (Some(WorldAt { seq: 0, world }), None),
                Err(e) => (
                    None,
                    Some(format!(
                        "the header's meta.world does not read as a world ({e}); written by a newer version? upgrade lazarus"
                    )),
                ),
            },
        };
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
            last_receipt_seq: 0,
            interrupted: None,
            pending_control: None,
            forked_at_turn: None,
            compaction: None,
            imported: None,
            session_grants: Default::default(),
            host: HostState::default(),
            world,
            world_unreadable,
            needs_owner: None,
        }
    }

    /// The program that writes this session when it is not Lazarus's runner (`meta.host`:
    /// `openai-agents`, `langgraph`, the Python package's hosts): its own program resumes it.
    pub fn host_program(&self) -> Option<&str> {
        self.header
            .meta
            .as_ref()
            .and_then(|m| m.get("host"))
            .and_then(|h| h.as_str())
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
}
