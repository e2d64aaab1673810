//! OpenCode sessions, as exported from its database by `formats::opencode` (a `session`
//! line, then one line per message with its parts). The last message decides, as OpenCode
//! itself does when it continues a session (a tool part left `running` in an earlier turn
//! that later finished is history, not an open call):
//! - an assistant with a `tool` part `pending` / `running`: that call was cut off (OpenCode
//!   records the running call, with its input);
//! - an assistant with `finish: "error"` (or an `error`): failed, transient by the error's
//!   status when it has one; `MessageAbortedError` is the user's stop;
//! - an assistant completed with `finish: "tool-calls"`: results recorded, never answered;
//! - an assistant completed otherwise: finished;
//! - an assistant never completed: a request or stream was open (streamed text is stored
//!   only when its part ends). If the turn before it ended in tool calls, the results were
//!   never answered;
//! - a user message: its prompt was never answered.
use super::{Parsed, clip, need_more};
use crate::formats::opencode::{
    Info, MessageLine, PartData, SessionLine, interrupted_call, user_text,
};
use crate::lines::{UserText, is_context_overflow, is_transient_error, user_text_kind};
use crate::verdict::{Classification, SessionMeta, SkipWhy, Verdict};

/// Classifies an OpenCode session export.
pub fn classify(tail: &[u8], meta: &SessionMeta) -> Classification {
    let p: Parsed<MessageLine> = Parsed::new(tail, true);
    let session = p
        .lines
        .first()
        .and_then(|l| serde_json::from_slice::<SessionLine>(l).ok())
        .filter(|s| s.ty == "session");
    let Some(session) = session else {
        let mut c = Classification::new(
            Verdict::Skipped(SkipWhy::Unreadable),
            "no session line in the export",
        );
        c.torn = p.torn;
        return c;
    };
    if let Some(v) = session
        .version
        .as_deref()
        .filter(|v| !crate::formats::opencode::version_known(v))
    {
        let mut c = Classification::unknown_format("OpenCode session version", v, "OpenCode 1.x");
        c.session_id = Some(session.id.clone());
        c.torn = p.torn;
        return c;
    }
    let msgs: Vec<(String, Info, Vec<PartData>)> = (1..p.len())
        .filter_map(|i| p.get(i))
        .filter(|m| m.ty == "message")
        .map(|m| (m.id.clone(), m.info(), m.parts()))
        .collect();
    let may_grow = !meta.at_start && !meta.at_cap;
    let mut out = decide(&msgs, may_grow);
    if out.need_more {
        return out;
    }
    out.torn = p.torn;
    out.session_id = Some(session.id.clone());
    out.cwd = session.directory.clone();
    out.last_record_id = msgs.last().map(|(id, _, _)| id.clone());
    if session.parent_id.is_some() {
        let inner = out.verdict;
        out.verdict = Verdict::Skipped(SkipWhy::Subagent);
        out.reason = format!(
            "a sub-agent session (parent {}); tail: {inner}",
            session.parent_id.as_deref().unwrap_or("?")
        );
    } else if session.time_archived.is_some() && out.verdict.is_resumable(true) {
        let inner = out.verdict;
        out.verdict = Verdict::UserStopped;
        out.reason = format!("the user archived the session; tail: {inner}");
    }
    out
}

fn decided(v: Verdict, reason: impl Into<String>) -> Classification {
    Classification::new(v, reason)
}

fn decide(msgs: &[(String, Info, Vec<PartData>)], may_grow: bool) -> Classification {
    let Some((id, info, parts)) = msgs.last() else {
        return decided(Verdict::Skipped(SkipWhy::Empty), "no message recorded");
    };
    if info.role == "user" {
        let text = user_text(parts);
        if parts.iter().any(|p| p.ty == "compaction") {
            return decided(
                Verdict::InterruptedStream,
                format!("user {id}: a compaction was requested and never ran"),
            );
        }
        return match user_text_kind(&text) {
            UserText::Trivial => decided(Verdict::Skipped(SkipWhy::TrivialInput), "trivial input"),
            _ => decided(
                Verdict::PendingInput,
                format!("user {id}: {:?} was never answered", clip(&text, 60)),
            ),
        };
    }
    let running: Vec<&PartData> = parts
        .iter()
        .filter(|p| {
            p.ty == "tool"
                && p.state
                    .as_ref()
                    .is_none_or(|s| matches!(s.status.as_str(), "pending" | "running"))
        })
        .collect();
    if let Some(c) = running.first() {
        let more = match running.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        let mut out = decided(
            Verdict::InterruptedToolCall,
            format!(
                "assistant {id}: tool {} (call {}) is {} with no result{more}",
                c.tool.as_deref().unwrap_or("?"),
                c.call_id.as_deref().unwrap_or("?"),
                c.state.as_ref().map_or("pending", |s| s.status.as_str())
            ),
        );
        out.set_interrupted(running.iter().map(|c| interrupted_call(c)).collect());
        return out;
    }
    if info.finish.as_deref() == Some("error") || info.error.is_some() {
        return failed(id, info);
    }
    let completed = info.time.as_ref().and_then(|t| t.completed).is_some();
    if completed {
        return match info.finish.as_deref() {
            Some("tool-calls") => decided(
                Verdict::InterruptedAfterToolResult,
                format!("assistant {id}: tool results recorded; the next answer never started"),
            ),
            Some(f) => decided(Verdict::Finished, format!("assistant {id}: finished ({f})")),
            None => decided(
                Verdict::InterruptedStream,
                format!("assistant {id}: completed with no finish reason and nothing stored"),
            ),
        };
    }
    // Never completed: what came before says whether results were waiting for it.
    match msgs.len().checked_sub(2).map(|i| &msgs[i]) {
        Some((_, prev, _))
            if prev.role == "assistant" && prev.finish.as_deref() == Some("tool-calls") =>
        {
            decided(
                Verdict::InterruptedAfterToolResult,
                format!(
                    "assistant {id}: the answer to the tool results was in flight (never completed)"
                ),
            )
        }
        None if may_grow => need_more(false),
        _ => decided(
            Verdict::InterruptedStream,
            format!("assistant {id}: a model request or stream was in flight (never completed)"),
        ),
    }
}

fn failed(id: &str, info: &Info) -> Classification {
    let err = info.error.as_ref();
    let name = err
        .and_then(|e| e.get("name"))
        .and_then(|n| n.as_str())
        .unwrap_or("error");
    let data = err.and_then(|e| e.get("data"));
    let message = data
        .and_then(|d| d.get("message"))
        .and_then(|m| m.as_str())
        .unwrap_or("");
    if name == "MessageAbortedError" {
        return decided(
            Verdict::UserStopped,
            format!("assistant {id}: aborted ({name})"),
        );
    }
    let status = data
        .and_then(|d| d.get("statusCode"))
        .and_then(|s| s.as_u64());
    let retryable = data
        .and_then(|d| d.get("isRetryable"))
        .and_then(|r| r.as_bool());
    let transient = if name == "ContextOverflowError" || is_context_overflow(message) {
        false
    } else if let Some(r) = retryable {
        r
    } else if let Some(s) = status {
        matches!(s, 408 | 429 | 500..=599)
    } else {
        is_transient_error(message)
    };
    decided(
        Verdict::Failed { transient },
        format!("assistant {id}: {name}: {}", clip(message, 120)),
    )
}
