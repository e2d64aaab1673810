//! The tool call types: everything known about one call, where it stands, and which calls
//! ended in doubt. Plain data the other parts of the state read.

use crate::record::OutcomeStatus;

use super::SessionState;

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
    /// The facts `idempotent` rests on, as recorded (boxed: rare, and a call is kept per
    /// call of the session).
    pub rerun_basis: Option<Box<serde_json::Map<String, serde_json::Value>>>,
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

impl SessionState {
    /// Calls still in the live context whose outcome says "the effect is unknown".
    pub fn in_doubt_calls(&self) -> impl Iterator<Item = &Call> {
        self.calls.iter().filter(|c| is_in_doubt(c))
    }

    /// How many calls of the whole session ended in doubt (those a compaction dropped too).
    pub fn in_doubt_count(&self) -> usize {
        self.summarised_in_doubt + self.in_doubt_calls().count()
    }
}

pub(super) fn is_in_doubt(c: &Call) -> bool {
    c.outcome
        .as_ref()
        .is_some_and(|o| o.status == OutcomeStatus::InDoubt)
}
