//! The status rules: whether a session owes work and its status in one word, from the
//! replayed state, and their tail-only twins that judge from the last record alone (for
//! listings and boot-resume). Kept together so the twins stay in step.

use super::SessionState;
use super::call::CallState;

impl SessionState {
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
        // a call waiting for a person holds everything after it: nothing can be done
        if self.awaiting_approval().next().is_some() {
            return false;
        }
        self.open_turn.is_some()
            || self.unresolved_calls().next().is_some()
            || !self.pending_inputs.is_empty()
            || self.control_owed()
            || self.last_entry_is_tool_result
    }

    /// The session's status in one word: [`SessionState::work_status`], unless a resumer
    /// left it alone because it could not honour its world (then `needs_owner`: the work
    /// waits for whoever can).
    pub fn status(&self) -> Status {
        if self.needs_owner.is_some()
            && self.owes_work()
            && self.awaiting_approval().next().is_none()
        {
            return Status::NeedsOwner;
        }
        self.work_status()
    }

    /// Where the work stands, whoever will do it: what a resume settles (a turn cut off, a
    /// call in doubt, a stop), in one word.
    pub fn work_status(&self) -> Status {
        if self.awaiting_approval().next().is_some() {
            return Status::AwaitingApproval;
        }
        // a host program's call announced without an outcome: it may have run (the same
        // rule as a native call's start without an outcome)
        if self.host.in_doubt().next().is_some() {
            return Status::InDoubt;
        }
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
}

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
    /// (idempotent), polls the task it became on its MCP server (its `tool_task` recorded),
    /// or closes it as in doubt and tells the model.
    InDoubt,
    /// Stopped cleanly on request (signal, shutdown); resumable.
    Stopped,
    /// The last model request failed after retries.
    Failed,
    /// The session's file (or rows) cannot be read as a session: listed, never run.
    Corrupt,
    /// A tool call waits for a person to allow or deny it (`lazarus sessions approve`);
    /// nothing else happens until then.
    AwaitingApproval,
    /// Work is owed, and the resumer that tried could not honour the session's world (its
    /// workspace, MCP servers or policy): it waits for one that can (its `needs_owner`
    /// record says why and which command resumes it).
    NeedsOwner,
}

impl Status {
    /// The status of a session a live writer holds, whose last record is `last_kind`:
    /// `running`, except that a session whose last record asks for approval waits for a
    /// person whoever holds it (nothing was written since the question).
    pub fn of_held(last_kind: &str) -> Status {
        if last_kind == "approval_request" {
            Status::AwaitingApproval
        } else {
            Status::Running
        }
    }

    /// Whether a session in this status may owe work, judged from its last record alone (as
    /// [`owes_work_from_tail`] does, for listings): inputs not answered, cut off mid-turn, or
    /// stopped with work left (a stop is recorded only then).
    pub fn owes_work(self) -> bool {
        matches!(
            self,
            Status::Pending
                | Status::Interrupted
                | Status::InDoubt
                | Status::Stopped
                | Status::NeedsOwner
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
            Status::AwaitingApproval => "awaiting_approval",
            Status::NeedsOwner => "needs_owner",
        };
        f.write_str(s)
    }
}

/// Whether a session whose last record is `kind`/`data` may owe work, judged from that record
/// alone: the first step of [`owes_work_from_records`], the tail-only twin of
/// [`SessionState::owes_work`]. Where only a replay can tell (the last record is a resume
/// receipt, a stop or a fork point) it says "yes", and whoever acts on it replays anyway.
/// Its "no" needs the records before (an input recorded while the last turn was in flight
/// is still owed): use [`owes_work_from_records`].
pub fn owes_work_from_tail(kind: &str, data: &serde_json::Value) -> bool {
    match kind {
        "header" | "approval_request" => false,
        // a refusal is written only while work is owed; a world alone says nothing
        "needs_owner" | "world" => true,
        // a host framework's records: its own runs, never Lazarus's runner
        k if k.starts_with(crate::record::HOST_KIND_PREFIX) => false,
        "approval" => true,
        "response" => status_from_tail(kind, data) == Status::Interrupted,
        "input" | "control" | "turn_start" | "tool_intent" | "tool_start" | "tool_outcome"
        | "tool_task" | "tool_task_status" | "resume" | "interrupted" | "fork" => true,
        // automatic ones are written only while work is owed, manual ones only when not
        "compaction" => data["trigger"] != "manual",
        // A kind this build does not know: say "maybe" rather than leave work behind.
        _ => true,
    }
}

/// The tail rule over the last records of a log (`records`, oldest first: kind and data):
/// whether the session owes work, for readers that see only the end of a file (boot-resume).
/// `Some(true)`: it may (never "no" where a replay says "yes"); `Some(false)`: it owes
/// nothing; `None`: the records do not reach back far enough to tell — read further.
///
/// The last record alone cannot settle a session that looks finished: an input recorded
/// while its last turn was in flight is still owed. So the records are read back to the
/// last `turn_start` (what a replay needs of them): an input, a tool call's record, a
/// `resume` event no receipt answered, an automatic compaction, or a response asking for
/// tools after it means work is owed, as does a turn with no response yet — unless a call
/// there waits for a person's decision (an `approval_request` no `approval` answers), which
/// holds everything after it. This relies on a turn taking every input pending when it
/// starts, as the runner's turns do.
pub fn owes_work_from_records(records: &[(&str, &serde_json::Value)]) -> Option<bool> {
    let mut receipt_after = false;
    let mut response_after = false;
    // What the records after the one looked at settle, if anything: kept while the scan goes
    // on, because a call waiting for a person (further back) holds everything after it.
    let mut early: Option<bool> = None;
    let mut decided: Vec<&str> = Vec::new();
    for (i, &(kind, data)) in records.iter().enumerate().rev() {
        let last = i + 1 == records.len();
        // the newest record that says "work is owed" settles it, unless a waiting call holds it
        let mut owed = || {
            early.get_or_insert(true);
        };
        match kind {
            "header" => return Some(early.unwrap_or(false)),
            // neither changes the work: the records before them decide
            "world" | "needs_owner" => {}
            // a host framework's session (the Python package): Lazarus's runner owes it nothing
            k if k.starts_with(crate::record::HOST_KIND_PREFIX) => {
                return Some(early.unwrap_or(false));
            }
            "turn_start" => return Some(early.unwrap_or(!response_after)),
            "approval" => {
                decided.push(data["call_id"].as_str().unwrap_or_default());
                owed();
            }
            // a call waits for a person (no decision after it): nothing can be done
            "approval_request" if !decided.contains(&data["call_id"].as_str().unwrap_or("")) => {
                return Some(false);
            }
            "approval_request" => {}
            "input" | "tool_intent" | "tool_start" | "tool_task" | "tool_task_status"
            | "tool_outcome" => owed(),
            // a stop is recorded only where work is left; anything after it dealt with it
            "interrupted" if last => owed(),
            "interrupted" | "fork" => {}
            // a compact request owes no work by itself
            "control" if data["action"] == crate::state::COMPACT_ACTION => {}
            "control" if !receipt_after => owed(),
            "control" => {}
            "resume" => receipt_after = true,
            "response" => {
                if status_from_tail(kind, data) == Status::Interrupted {
                    owed();
                }
                response_after = true;
            }
            // automatic ones are written only while work is owed
            "compaction" if data["trigger"] != "manual" => owed(),
            "compaction" => {}
            // a kind this build does not know: say "maybe" rather than leave work behind
            _ => return Some(true),
        }
    }
    early
}

/// Status from the last record alone (for listings: no replay).
pub fn status_from_tail(kind: &str, data: &serde_json::Value) -> Status {
    match kind {
        "header" => Status::New,
        "input" | "control" => Status::Pending,
        // a call started (its task recorded or not) without an outcome
        "tool_start" | "tool_task" | "tool_task_status" | "host_call_intent" => Status::InDoubt,
        "needs_owner" => Status::NeedsOwner,
        // a world alone says nothing of the work: "maybe owed", as for a turn cut off
        "world" => Status::Interrupted,
        "approval_request" => Status::AwaitingApproval,
        "approval" => Status::Interrupted,
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
