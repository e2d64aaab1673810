//! Gemini CLI recordings (0.61). The window's lines are folded into the message list the CLI
//! would load ([`Fold`]), and the last message of that list decides:
//! - a `gemini` record with no text and no `toolCalls`: a tool was running. The CLI writes
//!   the answer when it arrives and writes it again, with its calls and their results, only
//!   once the tools finished; so the running call's name and arguments are nowhere, and the
//!   resume says so;
//! - a `gemini` record whose calls all have results, or a `user` record of
//!   `functionResponse`s: results the model never saw;
//! - a `gemini` record with text: finished;
//! - a `user` prompt: nobody answered it (no partial answer is ever written);
//! - nothing after a `$set messages` that dropped the prompt: the CLI rolled a failed turn
//!   back. The file does not say why (an API error and a stream the CLI gave up on leave the
//!   same bytes), so it is never called transient.
//!
//! There is no version marker: a first line that is not the metadata object is reported
//! `unknown_format` (the `.json` files of versions before 0.5x are one JSON object).
use super::{Parsed, clip, need_more};
use crate::formats::gemini_cli::{Fold, Line, Message, interrupted_call, is_metadata};
use crate::lines::{UserText, user_text_kind};
use crate::verdict::{Classification, InterruptedCall, SessionMeta, SkipWhy, Verdict};

/// Classifies a Gemini CLI recording's tail.
pub fn classify(tail: &[u8], meta: &SessionMeta) -> Classification {
    if meta.file_name.ends_with(".json") {
        return Classification::unknown_format(
            "Gemini CLI session file",
            "legacy .json (before 0.5x)",
            "0.61 .jsonl recordings",
        );
    }
    let p: Parsed<Line> = Parsed::new(tail, meta.at_start);
    let first: Option<&[u8]> = meta
        .header
        .or_else(|| meta.at_start.then(|| p.lines.first().copied()).flatten());
    let header = match first.map(serde_json::from_slice::<Line>) {
        Some(Ok(h)) if is_metadata(&h) => Some(h),
        Some(Ok(_)) => {
            // No version marker exists: the first line's shape is the only sign of the format.
            let mut c = Classification::unknown_format(
                "Gemini CLI recording shape",
                "a first line without sessionId and projectHash",
                "0.61 .jsonl recordings",
            );
            c.torn = p.torn;
            return c;
        }
        Some(Err(_)) => {
            let mut c = Classification::new(
                Verdict::Skipped(SkipWhy::Unreadable),
                "the first line is not JSON: not a Gemini CLI recording",
            );
            c.torn = p.torn;
            return c;
        }
        None => None,
    };
    let mut fold = Fold::new(meta.at_start);
    // A window at the start holds the metadata line itself (the loop below folds it).
    if let Some(h) = header.filter(|_| !meta.at_start) {
        fold.apply(h);
    }
    let mut last_id = None;
    for i in 0..p.len() {
        let Some(l) = serde_json::from_slice::<Line>(p.lines[i]).ok() else {
            continue;
        };
        if let Some(id) = &l.message.id {
            last_id = Some(id.clone());
        }
        fold.apply(l);
    }
    let may_grow = !meta.at_start && !meta.at_cap;
    let mut out = decide(&fold, may_grow);
    if out.need_more {
        return out;
    }
    out.torn = p.torn;
    if p.torn {
        out.reason.push_str("; torn last line ignored");
    }
    out.session_id = fold.session_id.clone().or_else(|| {
        // session-<date>-<first 8 of the id>.jsonl, or <id>.jsonl for a sub-agent
        Some(super::stem(meta.file_name).to_string()).filter(|s| !s.is_empty())
    });
    out.last_record_id = last_id;
    if fold.kind.as_deref() == Some("subagent") || meta.subagent_path {
        let inner = out.verdict;
        out.verdict = Verdict::Skipped(SkipWhy::Subagent);
        out.reason = format!("a sub-agent's recording (its parent session owns it); tail: {inner}");
    }
    out
}

fn decided(v: Verdict, reason: impl Into<String>) -> Classification {
    Classification::new(v, reason)
}

/// The verdict from the folded list.
fn decide(fold: &Fold, may_grow: bool) -> Classification {
    if fold.rewind_unknown && may_grow {
        return need_more(false);
    }
    let last = fold
        .messages
        .iter()
        .enumerate()
        .rev()
        .find(|(_, m)| !matches!(m.ty.as_str(), "info" | "warning") && !m.is_session_context());
    let Some((_, m)) = last else {
        if !fold.based && may_grow {
            return need_more(false);
        }
        if let Some(p) = fold.rolled_back.last() {
            return decided(
                Verdict::Failed { transient: false },
                format!(
                    "the CLI rolled the prompt {:?} back ($set messages): the turn failed; the file does not say why, so it is not taken as transient",
                    clip(&p.text(), 60)
                ),
            );
        }
        return decided(
            Verdict::Skipped(SkipWhy::Empty),
            "no prompt recorded after the session context",
        );
    };
    let id = m.id.as_deref().unwrap_or("?");
    match m.ty.as_str() {
        "user" => user(m, id),
        "gemini" => answer(m, id),
        "error" => {
            let text = m.text();
            decided(
                Verdict::Failed {
                    transient: crate::lines::is_transient_error(&text),
                },
                format!("error record {id}: {}", clip(&text, 120)),
            )
        }
        other => decided(
            Verdict::Finished,
            format!("last record {id} is a {other:?} record; nothing owed"),
        ),
    }
}

fn user(m: &Message, id: &str) -> Classification {
    let responses = m.function_responses();
    if !responses.is_empty() {
        let names: Vec<&str> = responses
            .iter()
            .filter_map(|r| r.get("name").and_then(|n| n.as_str()))
            .collect();
        return decided(
            Verdict::InterruptedAfterToolResult,
            format!(
                "user {id}: results of {} recorded; the model never answered them",
                names.join(", ")
            ),
        );
    }
    let text = m.text();
    match user_text_kind(&text) {
        UserText::Trivial => decided(Verdict::Skipped(SkipWhy::TrivialInput), "trivial input"),
        _ => decided(
            Verdict::PendingInput,
            format!("user {id}: {:?} was never answered", clip(&text, 60)),
        ),
    }
}

fn answer(m: &Message, id: &str) -> Classification {
    if !m.tool_calls.is_empty() {
        let open: Vec<_> = m
            .tool_calls
            .iter()
            .filter(|c| {
                c.result.is_null()
                    || !matches!(c.status.as_deref(), Some("success" | "error" | "cancelled"))
            })
            .collect();
        if let Some(c) = open.first() {
            let more = match open.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            let mut out = decided(
                Verdict::InterruptedToolCall,
                format!(
                    "gemini {id}: call {} ({}) has no result{more}",
                    c.id.as_deref().unwrap_or("?"),
                    c.status.as_deref().unwrap_or("no status")
                ),
            );
            out.set_interrupted(open.iter().map(|c| interrupted_call(c)).collect());
            return out;
        }
        let names: Vec<&str> = m
            .tool_calls
            .iter()
            .filter_map(|c| c.name.as_deref())
            .collect();
        return decided(
            Verdict::InterruptedAfterToolResult,
            format!(
                "gemini {id}: {} finished and recorded; the model never saw the results",
                names.join(", ")
            ),
        );
    }
    let calls = m.function_calls();
    if let Some(c) = calls.first() {
        // A resumed session's list writes calls in the API's shape; their responses follow
        // as `user` records, so a call last in the list has none.
        let name = c.get("name").and_then(|n| n.as_str()).unwrap_or("a tool");
        let mut out = decided(
            Verdict::InterruptedToolCall,
            format!("gemini {id}: call {name} has no response"),
        );
        out.set_interrupted(
            calls
                .iter()
                .map(|c| {
                    InterruptedCall::new(
                        c.get("name").and_then(|n| n.as_str()).unwrap_or_default(),
                        c.get("args"),
                        c.get("id").and_then(|i| i.as_str()),
                    )
                })
                .collect(),
        );
        return out;
    }
    if m.text().trim().is_empty() {
        let mut out = decided(
            Verdict::InterruptedToolCall,
            format!(
                "gemini {id}: an answer with no text and no recorded call: a tool was running (Gemini CLI records a call only once it has finished)"
            ),
        );
        out.interrupted_call = Some(
            "a tool call Gemini CLI had not recorded yet (it writes calls only when they finish), so which call it was is unknown".into(),
        );
        return out;
    }
    decided(
        Verdict::Finished,
        format!("gemini {id}: answered {:?}", clip(&m.text(), 60)),
    )
}
