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
    /// The approval asked for before it could start, and the decision (boxed: most calls
    /// have none).
    pub approval: Option<Box<ApprovalInfo>>,
    /// The task the call became on its MCP server, when it did (boxed: rare).
    pub task: Option<Box<TaskInfo>>,
}

/// What `tool_task` (and the `tool_task_status` records after it) recorded for a call: the
/// handle a resume polls again, and the latest status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    /// Seq of the `tool_task` record.
    pub seq: u64,
    pub server: String,
    pub fingerprint: String,
    pub task_id: String,
    pub ttl_ms: Option<u64>,
    pub poll_interval_ms: Option<u64>,
    pub created_at: String,
    /// The latest status recorded, its seq, and what the server said with it.
    pub status: crate::record::TaskStatus,
    pub status_seq: u64,
    pub message: Option<String>,
}

/// What an `approval_request` (and the `approval` answering it) recorded for a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalInfo {
    pub request_seq: u64,
    pub mode: String,
    pub reason: String,
    pub requested_at: String,
    pub decision: Option<DecisionInfo>,
}

/// A recorded decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionInfo {
    pub seq: u64,
    pub decision: crate::record::Decision,
    pub scope: crate::record::Scope,
    pub reason: Option<String>,
    pub by: String,
    pub decided_at: String,
}

impl ApprovalInfo {
    /// Milliseconds from the request to its decision (`None` while it waits, or when a time
    /// does not parse).
    pub fn waited_ms(&self) -> Option<u64> {
        let d = self.decision.as_ref()?;
        lazarus_ledger::clock::millis_between(&self.requested_at, &d.decided_at)
    }
}

/// What a `tool_intent` recorded beyond the call itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentInfo {
    /// Seq of the `tool_intent` record (the call's span begins there).
    pub seq: u64,
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
    /// Asked for approval, and no decision is recorded: the call waits for a person.
    pub fn awaits_decision(&self) -> bool {
        self.outcome.is_none() && self.approval.as_ref().is_some_and(|a| a.decision.is_none())
    }

    /// The recorded decision, if any.
    pub fn decision(&self) -> Option<&DecisionInfo> {
        self.approval.as_ref().and_then(|a| a.decision.as_ref())
    }

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

    /// Calls that wait for a person's decision (asked, not answered).
    pub fn awaiting_approval(&self) -> impl Iterator<Item = &Call> {
        self.calls.iter().filter(|c| c.awaits_decision())
    }

    /// The calls asked for approval since the last resume receipt (for the next one): who
    /// decided and how long each waited; those still waiting too.
    pub fn approvals_since_receipt(&self) -> Vec<crate::record::ApprovalWait> {
        self.calls
            .iter()
            .filter_map(|c| {
                let a = c.approval.as_ref()?;
                let d = a.decision.as_ref();
                let after = d.is_none_or(|d| d.seq > self.last_receipt_seq);
                after.then(|| crate::record::ApprovalWait {
                    call_id: c.call_id.clone(),
                    tool: c.name.clone(),
                    decision: d.map(|d| d.decision),
                    by: d.map(|d| d.by.clone()),
                    waited_ms: a.waited_ms(),
                })
            })
            .collect()
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
