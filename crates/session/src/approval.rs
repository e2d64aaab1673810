//! Deciding on a call that waits for approval, the same way from every door (the terminal,
//! `lazarus sessions approve|deny`, the HTTP API, the web view): what a new decision must fit
//! before it is delivered, and what a redelivery of one already taken means.
//!
//! A decision is an input with an id (`approval/<call id>`, one per call): delivered twice it
//! is recorded once (G6). A *different* decision on a call already decided (or with a decision
//! waiting in the inbox) is refused here, naming the first, so nobody is told "accepted" for a
//! decision that will never count.

use crate::inbox::{INBOX_MESSAGES_MAX, InboxMessage, check_message_id};
use crate::record::{Approval, Decision, Record, Scope};
use crate::state::SessionState;
use crate::{SessionId, Store};

/// Most bytes of a decision's reason (every door: the terminal, the CLI, the HTTP API).
pub const REASON_BYTES_MAX: usize = 4096;

/// A decision that cannot be taken. Each says what, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionError {
    #[error("call id {call_id:?}: {why}")]
    BadCallId { call_id: String, why: String },
    #[error("the reason is {bytes} bytes; at most {REASON_BYTES_MAX}")]
    ReasonTooLong { bytes: usize },
    #[error("a denial is for this call only: its scope is `once`, not `{scope}`")]
    DenialScope { scope: &'static str },
    #[error("session {session} has no tool call {call_id:?}{}", waiting_list(.waiting))]
    UnknownCall {
        session: String,
        call_id: String,
        /// The calls that do wait, to pick from.
        waiting: Vec<String>,
    },
    #[error(
        "tool call {call_id:?} of session {session} does not wait for approval (nothing asked for it){}",
        waiting_list(.waiting)
    )]
    NotAsked {
        session: String,
        call_id: String,
        waiting: Vec<String>,
    },
    #[error(
        "tool call {call_id:?} of session {session} was decided already: {first} ({scope}) by {by}{}; a call takes one decision, this one is refused",
        match .seq { Some(s) => format!(" at seq {s}"), None => " (waiting in the inbox to be recorded)".to_string() }
    )]
    Conflicts {
        session: String,
        call_id: String,
        first: &'static str,
        scope: &'static str,
        by: String,
        /// Where it is recorded (`None`: it waits in the inbox).
        seq: Option<u64>,
    },
}

fn waiting_list(waiting: &[String]) -> String {
    if waiting.is_empty() {
        "; no call of it waits for approval".to_string()
    } else {
        format!("; waiting for approval: {}", waiting.join(", "))
    }
}

/// Where a decision stands already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Existing {
    /// Nothing yet: deliver it. `tool`: the call's tool (what an `always` grant names).
    New { tool: String },
    /// The same decision is recorded at this seq: nothing to do.
    Recorded(u64),
    /// The same decision waits in the inbox: nothing to do.
    Waiting,
}

/// Checks `approval` on its own (its call id, its reason, a denial's scope), then against the
/// session's state and the messages waiting in its inbox.
pub fn check_decision(
    state: &SessionState,
    inbox: &[InboxMessage],
    approval: &Approval,
) -> Result<Existing, DecisionError> {
    check_message_id(&approval.input_id).map_err(|why| DecisionError::BadCallId {
        call_id: approval.call_id.clone(),
        why,
    })?;
    if let Some(bytes) = approval.reason.as_ref().map(String::len)
        && bytes > REASON_BYTES_MAX
    {
        return Err(DecisionError::ReasonTooLong { bytes });
    }
    if approval.decision == Decision::Deny && approval.scope != Scope::Once {
        return Err(DecisionError::DenialScope {
            scope: approval.scope.as_str(),
        });
    }
    let session = state.id().to_string();
    let waiting = || -> Vec<String> {
        state
            .awaiting_approval()
            .map(|c| c.call_id.clone())
            .collect()
    };
    let call_id = approval.call_id.clone();
    let Some(call) = state.call(&approval.call_id) else {
        return Err(DecisionError::UnknownCall {
            session,
            call_id,
            waiting: waiting(),
        });
    };
    let Some(request) = &call.approval else {
        return Err(DecisionError::NotAsked {
            session,
            call_id,
            waiting: waiting(),
        });
    };
    let same = |d: Decision, s: Scope| d == approval.decision && s == approval.scope;
    if let Some(d) = &request.decision {
        if same(d.decision, d.scope) {
            return Ok(Existing::Recorded(d.seq));
        }
        return Err(DecisionError::Conflicts {
            session,
            call_id,
            first: d.decision.as_str(),
            scope: d.scope.as_str(),
            by: d.by.clone(),
            seq: Some(d.seq),
        });
    }
    for m in inbox {
        if let Record::Approval(a) = m.record()
            && a.input_id == approval.input_id
        {
            if same(a.decision, a.scope) {
                return Ok(Existing::Waiting);
            }
            return Err(DecisionError::Conflicts {
                session,
                call_id,
                first: a.decision.as_str(),
                scope: a.scope.as_str(),
                by: a.by.clone(),
                seq: None,
            });
        }
    }
    Ok(Existing::New {
        tool: call.name.clone(),
    })
}

/// [`check_decision`] against what the store holds now: the session replayed, its inbox read.
pub fn check_in_store(
    store: &dyn Store,
    id: &SessionId,
    approval: &Approval,
) -> crate::Result<Result<Existing, DecisionError>> {
    let state = store.load(id)?;
    let inbox = store.inbox(id, INBOX_MESSAGES_MAX as usize)?;
    Ok(check_decision(&state, &inbox, approval))
}

/// One call waiting for a person, as listings show it (`sessions approvals`, the HTTP API).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pending {
    pub session: String,
    pub call_id: String,
    pub tool: String,
    /// JSON text, exactly as the model wrote it.
    pub arguments: String,
    pub reason: String,
    pub mode: String,
    pub requested_at: String,
}

/// The calls of `state` that wait for a decision, leaving out those whose decision waits in
/// the inbox already.
pub fn pending(state: &SessionState, inbox: &[InboxMessage]) -> Vec<Pending> {
    state
        .awaiting_approval()
        .filter(|c| {
            !inbox
                .iter()
                .any(|m| matches!(m.record(), Record::Approval(a) if a.call_id == c.call_id))
        })
        .filter_map(|c| {
            let a = c.approval.as_ref()?;
            Some(Pending {
                session: state.id().to_string(),
                call_id: c.call_id.clone(),
                tool: c.name.clone(),
                arguments: c.arguments.clone(),
                reason: a.reason.clone(),
                mode: a.mode.clone(),
                requested_at: a.requested_at.clone(),
            })
        })
        .collect()
}

/// The argument each built-in tool acts on, shown first on every approval surface.
const EXECUTED_ARGUMENT: &[(&str, &str)] = &[
    ("shell", "command"),
    ("write_file", "path"),
    ("edit_file", "path"),
    ("read_file", "path"),
    ("list_dir", "path"),
];

/// A call's arguments as every approval surface shows them (the terminal prompt, `lazarus
/// sessions approvals`, the web card): the argument the tool executes first (a shell call's
/// `command`, a file tool's `path`), then the others in the order the model wrote them; each
/// value whole — a string as its text, anything else as JSON — never collapsed or cut.
/// Arguments a tool's schema does not declare never get this far (the runner refuses them
/// before anyone is asked), so a decoy key cannot stand in front of the one that runs.
/// Not a JSON object: one entry, `arguments`, with the text as the model wrote it.
pub fn arguments_shown(tool: &str, arguments: &str) -> Vec<(String, String)> {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(arguments)
    else {
        return vec![("arguments".to_string(), arguments.to_string())];
    };
    let first = EXECUTED_ARGUMENT
        .iter()
        .find(|(t, _)| *t == tool)
        .map(|(_, k)| *k);
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out: Vec<(String, String)> = Vec::with_capacity(map.len());
    if let Some(k) = first
        && let Some(v) = map.get(k)
    {
        out.push((k.to_string(), text(v)));
    }
    for (k, v) in &map {
        if Some(k.as_str()) != first {
            out.push((k.clone(), text(v)));
        }
    }
    out
}

#[cfg(test)]
mod shown_tests {
    use super::arguments_shown;

    #[test]
    fn the_executed_argument_comes_first_and_whole() {
        let args = r#"{"command_preview":"ls -la","note":"x","command":"rm -rf /tmp/x\nmore","timeout_secs":5}"#;
        let shown = arguments_shown("shell", args);
        assert_eq!(shown[0], ("command".into(), "rm -rf /tmp/x\nmore".into()));
        assert_eq!(shown[1].0, "command_preview");
        assert_eq!(shown[3], ("timeout_secs".into(), "5".into()));
        assert_eq!(
            arguments_shown("mcp__a__b", "not json"),
            vec![("arguments".into(), "not json".into())]
        );
        assert_eq!(arguments_shown("mcp__a__b", r#"{"b":1,"a":2}"#)[0].0, "b");
    }
}
