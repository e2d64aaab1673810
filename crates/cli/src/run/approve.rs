//! A call that waits for approval, as `lazarus run` meets it: on a terminal the person is
//! asked (y / n / s / a) and the answer is recorded before the call can start; off a terminal
//! the run prints the commands that answer and exits with [`EXIT_AWAITING_APPROVAL`].

use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex};

use anyhow::{Result, anyhow};
use lazarus_session::InboxMessage;
use lazarus_session::approval::REASON_BYTES_MAX;
use lazarus_session::record::{Approval, Decision, Scope, approval_input_id};
use serde_json::json;

use super::live::print_line;
use crate::args::StoreArgs;
use crate::term::{escape, shell_quote};

/// Exit code when the run stopped because a tool call waits for a person's decision.
pub const EXIT_AWAITING_APPROVAL: i32 = 3;

/// What became of the question.
pub(super) enum Asked {
    /// A decision is recorded (by this prompt, or one that arrived meanwhile): drive again.
    Decided,
    /// No terminal, or the person left (end of input): the run ends, the request stays.
    Left,
}

/// Whether the person at this terminal can be asked.
pub(super) fn can_ask() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The call `call_id` waits: ask on the terminal and record the answer, or say how to answer.
pub(super) fn ask(
    session: &Arc<Mutex<lazarus_session::Session>>,
    id: &str,
    call_id: &str,
    (store, workspace): (&StoreArgs, &std::path::Path),
    json_out: bool,
) -> Result<Asked> {
    let (tool, arguments, reason, mode) = {
        let s = session
            .lock()
            .map_err(|_| anyhow!("session lock poisoned"))?;
        let call = s
            .state()
            .call(call_id)
            .ok_or_else(|| anyhow!("call {call_id} of session {id} vanished"))?;
        let a = call.approval.as_ref();
        (
            call.name.clone(),
            call.arguments.clone(),
            a.map(|a| a.reason.clone()).unwrap_or_default(),
            a.map(|a| a.mode.clone()).unwrap_or_default(),
        )
    };
    eprintln!(
        "approval needed: {} {}\n  call {} of session {id}; why: {} (--ask-for-approval {mode})",
        escape(&tool),
        escape(&arguments),
        escape(call_id),
        escape(&reason)
    );
    if !can_ask() {
        print_how_to_answer(id, call_id, store, workspace);
        return Ok(Asked::Left);
    }
    let Some((decision, scope, why)) = read_answer()? else {
        print_how_to_answer(id, call_id, store, workspace);
        return Ok(Asked::Left);
    };
    if scope == Scope::Always {
        crate::approvals::grant_always(&tool, "cli", id, call_id)?;
        eprintln!(
            "`always` grant for {} written to {} (revoke: lazarus approvals revoke {})",
            escape(&tool),
            crate::approvals::policy_path().display(),
            escape(&tool)
        );
    }
    let approval = Approval {
        input_id: approval_input_id(call_id),
        call_id: call_id.to_string(),
        decision,
        scope,
        reason: why,
        by: "cli".into(),
        decided_at: lazarus_ledger::clock::now_ts(),
    };
    let msg = InboxMessage::approval(approval);
    let ack = session
        .lock()
        .map_err(|_| anyhow!("session lock poisoned"))?
        .append_message(&msg)?;
    if ack.duplicate {
        eprintln!(
            "a decision on call {} was recorded meanwhile (seq {}); it stands",
            escape(call_id),
            ack.seq
        );
    } else if json_out {
        print_line(
            &json!({"seq": ack.seq, "ts": ack.ts, "kind": "approval", "data": msg.record().data_value()})
                .to_string(),
        );
    }
    Ok(Asked::Decided)
}

/// Reads y / n / s / a (and a reason for n) from the terminal; `None` at end of input.
fn read_answer() -> Result<Option<(Decision, Scope, Option<String>)>> {
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        eprint!("allow it? [y] yes, once  [s] yes, for this session  [a] yes, always  [n] no > ");
        std::io::stderr().flush()?;
        line.clear();
        if stdin.lock().read_line(&mut line)? == 0 {
            eprintln!();
            return Ok(None);
        }
        let answer = match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => (Decision::Allow, Scope::Once),
            "s" | "session" => (Decision::Allow, Scope::Session),
            "a" | "always" => (Decision::Allow, Scope::Always),
            "n" | "no" => (Decision::Deny, Scope::Once),
            _ => {
                eprintln!("answer y, s, a or n");
                continue;
            }
        };
        let mut reason = None;
        if answer.0 == Decision::Deny {
            eprint!("reason, for the model (Enter for none) > ");
            std::io::stderr().flush()?;
            line.clear();
            stdin.lock().read_line(&mut line)?;
            let mut r = line.trim().to_string();
            if r.len() > REASON_BYTES_MAX {
                let mut end = REASON_BYTES_MAX;
                while !r.is_char_boundary(end) {
                    end -= 1;
                }
                r.truncate(end);
            }
            reason = (!r.is_empty()).then_some(r);
        }
        return Ok(Some((answer.0, answer.1, reason)));
    }
}

/// The commands that answer a waiting call, for a run without a terminal.
fn print_how_to_answer(id: &str, call_id: &str, store: &StoreArgs, workspace: &std::path::Path) {
    let mut flags = String::new();
    if let Some(d) = &store.session_dir {
        flags.push_str(&format!(
            " --session-dir {}",
            shell_quote(&d.display().to_string())
        ));
    }
    if store.store.is_some() {
        flags.push_str(" --store URL");
    }
    let quoted = shell_quote(call_id);
    let call = escape(&quoted);
    // a resumed run works in the session's recorded world: its workspace, tools and model
    let _ = workspace;
    eprintln!(
        "the session waits for a decision; answer with one of:\n  lazarus sessions approve{flags} {id} {call} [--scope once|session|always]\n  lazarus sessions deny{flags} {id} {call} [--reason TEXT]\nthen continue it in its world: lazarus run{flags} --session {id}"
    );
}
