//! `sessions approvals`, `sessions approve`, `sessions deny`: the calls waiting for a person,
//! and a decision recorded through the session's inbox (so it works while a run or a gateway
//! holds the writer, and on PostgreSQL from any machine).

use std::io::Write;

use anyhow::Result;
use lazarus_session::approval::{DecisionError, Existing, Pending, check_in_store, pending};
use lazarus_session::handoff::{Handed, hand_over};
use lazarus_session::inbox::INBOX_MESSAGES_MAX;
use lazarus_session::record::{Approval, Decision, Scope, approval_input_id};
use lazarus_session::{InboxMessage, SessionId, Status, Store};
use serde_json::json;

use crate::term::escape;

/// The waiting calls of one session, or of every session awaiting approval.
pub(super) fn list(
    store: &dyn Store,
    id: Option<&SessionId>,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let ids: Vec<SessionId> = match id {
        Some(id) => vec![id.clone()],
        None => store
            .list()?
            .into_iter()
            .filter(|s| s.status == Status::AwaitingApproval || s.waiting > 0)
            .map(|s| s.id)
            .collect(),
    };
    let mut all: Vec<Pending> = Vec::new();
    for id in &ids {
        let state = store.load(id)?;
        let inbox = store.inbox(id, INBOX_MESSAGES_MAX as usize)?;
        all.extend(pending(&state, &inbox));
    }
    for p in &all {
        if json {
            writeln!(
                out,
                "{}",
                json!({"session": p.session, "call_id": p.call_id, "tool": p.tool, "arguments": p.arguments, "requested_at": p.requested_at, "reason": p.reason, "mode": p.mode})
            )?;
        } else {
            writeln!(
                out,
                "{}  {}  {}  ({}, asked {})\n{}",
                p.session,
                escape(&p.call_id),
                escape(&p.tool),
                escape(&p.reason),
                escape(&p.requested_at),
                crate::term::arguments_block(&p.tool, &p.arguments, "    ").trim_end()
            )?;
        }
    }
    if all.is_empty() && !json {
        match id {
            Some(id) => writeln!(out, "no call of {id} waits for approval")?,
            None => writeln!(out, "no call waits for approval")?,
        }
    }
    Ok(())
}

/// Records a decision: checked against the session (an unknown call, or a different decision
/// taken already, is refused and nothing is written), then handed to its writer through the
/// inbox, or recorded here when nobody holds it.
pub(super) fn decide(
    store: &dyn Store,
    id: &SessionId,
    call_id: &str,
    (decision, scope, reason): (Decision, Scope, Option<String>),
    json: bool,
    out: &mut impl Write,
) -> Result<i32> {
    let approval = Approval {
        input_id: approval_input_id(call_id),
        call_id: call_id.to_string(),
        decision,
        scope,
        reason,
        by: "cli".into(),
        decided_at: lazarus_ledger::clock::now_ts(),
    };
    // one replay of the session (and a look at its inbox) answers the whole check; what is
    // wrong with the decision itself (its call id, its reason) is a usage error
    let check = || -> Result<Existing> {
        check_in_store(store, id, &approval)?.map_err(|e| match e {
            DecisionError::BadCallId { .. }
            | DecisionError::ReasonTooLong { .. }
            | DecisionError::DenialScope { .. } => crate::Usage(e.to_string()).into(),
            other => anyhow::Error::from(other),
        })
    };
    let said = |existing: &str, out: &mut dyn Write| -> Result<i32> {
        if json {
            writeln!(
                out,
                "{}",
                json!({"id": id, "call_id": call_id, "decision": decision.as_str(), "scope": scope.as_str(), "result": existing})
            )?;
        } else {
            writeln!(
                out,
                "the same decision on call {} of {id} is {existing} already; nothing added",
                escape(call_id)
            )?;
        }
        Ok(0)
    };
    let tool = match check()? {
        Existing::Recorded(seq) => return said(&format!("recorded at seq {seq}"), out),
        Existing::Waiting => return said("waiting in the inbox", out),
        Existing::New { tool } => tool,
    };
    if scope == Scope::Always {
        crate::approvals::grant_always(&tool, "cli", id, call_id)?;
    }
    let msg = InboxMessage::approval(approval.clone());
    let handed = hand_over(store, id, &msg, &mut super::inputs::note_lease_wait)?;
    // Two people deciding at once: both pass the check, one id is taken. Say which counts.
    let duplicate = match &handed {
        Handed::Queued { duplicate, .. } | Handed::Recorded { duplicate, .. } => *duplicate,
    };
    if duplicate {
        match check() {
            Ok(Existing::Recorded(seq)) => return said(&format!("recorded at seq {seq}"), out),
            Ok(_) => return said("waiting in the inbox", out),
            Err(e) => return Err(e),
        }
    }
    let verb = match decision {
        Decision::Allow => "allowed",
        Decision::Deny => "denied",
    };
    match handed {
        Handed::Queued { holder, .. } => {
            let by = super::inputs::holder_words(&holder);
            if json {
                writeln!(
                    out,
                    "{}",
                    json!({"id": id, "call_id": call_id, "decision": decision.as_str(), "scope": scope.as_str(), "queued": true, "holder": holder})
                )?;
            } else {
                writeln!(
                    out,
                    "{verb} call {} of {id} ({}): queued in its inbox; {by} holds the session and records it before anything of its own",
                    escape(call_id),
                    scope.as_str()
                )?;
            }
        }
        Handed::Recorded { seq, .. } => {
            // a gateway serving this directory learns that the session owes work
            store.ring(id)?;
            if json {
                writeln!(
                    out,
                    "{}",
                    json!({"id": id, "call_id": call_id, "decision": decision.as_str(), "scope": scope.as_str(), "seq": seq})
                )?;
            } else {
                writeln!(
                    out,
                    "{verb} call {} of {id} ({}), recorded at seq {seq}; continue it with: lazarus run --session {id} (a gateway serving it goes on by itself)",
                    escape(call_id),
                    scope.as_str()
                )?;
            }
        }
    }
    Ok(0)
}
