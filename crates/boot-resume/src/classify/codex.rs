//! Codex CLI rollouts (session-formats.md §4; mirrors codex-rs turn_lifecycle).
use super::{Parsed, clip, need_more, stem};
use crate::formats::codex::{CALLS, Line, OUTPUTS, Payload};
use crate::lines::is_transient_error;
use crate::verdict::{Classification, InterruptedCall, SessionMeta, SkipWhy, Verdict};
use std::collections::HashSet;

/// The last interesting response item of the open turn.
enum Last {
    Call(String),
    Output,
    User,
    Stream,
    Compacted,
    Assistant,
}

/// The name of a `codex_error_info`: a string (`"context_window_exceeded"`) or an object
/// whose single key names it (`{"http_connection_failed": {"http_status_code": 502}}`).
fn error_info_name(info: &serde_json::Value) -> String {
    match info {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(m) => m.keys().next().cloned().unwrap_or_default(),
        _ => String::new(),
    }
}

/// Whether a turn that ended with this Codex error may succeed when resumed.
fn codex_error_is_transient(info: Option<&serde_json::Value>, message: &str) -> bool {
    match info.map(error_info_name).as_deref() {
        Some(
            "server_overloaded"
            | "internal_server_error"
            | "http_connection_failed"
            | "response_stream_connection_failed"
            | "response_stream_disconnected"
            | "response_too_many_failed_attempts",
        ) => true,
        Some(
            "context_window_exceeded"
            | "usage_limit_exceeded"
            | "unauthorized"
            | "bad_request"
            | "sandbox_error"
            | "thread_rollback_failed",
        ) => false,
        _ => is_transient_error(message),
    }
}

/// Classifies a Codex rollout tail in three steps: the header (who owns the rollout), a walk
/// back to the start of the last turn (a terminal event decides at once), then the open
/// turn's last item.
/// The newest Codex major version whose rollouts this build reads.
const KNOWN_MAJOR: u64 = 0;

pub fn classify(tail: &[u8], meta: &SessionMeta) -> Classification {
    let p: Parsed<Line> = Parsed::new(tail, meta.at_start);
    let mut out = Classification::new(Verdict::Skipped(SkipWhy::Empty), "");
    out.torn = p.torn;
    let torn_note = torn_note(&p);
    let decide = |mut out: Classification, (v, reason): (Verdict, String)| {
        out.verdict = v;
        out.reason = format!("{reason}{torn_note}");
        out
    };
    if let Some(skip) = read_header(&mut out, &p, meta) {
        return decide(out, skip);
    }
    if let Some((j, l)) = (0..p.len()).rev().find_map(|j| p.get(j).map(|l| (j, l))) {
        out.last_record_id = l.timestamp.clone().map(|t| format!("{t}#{j}"));
    }
    if p.len() == 0 && !p.torn && meta.at_start {
        return decide(out, (Verdict::Skipped(SkipWhy::Empty), "empty file".into()));
    }
    let mut turn = match walk_back(&p, &mut out) {
        Ok(turn) => turn,
        Err(decided) => return decide(out, decided),
    };
    if !turn.lifecycle && !meta.at_start && !meta.at_cap {
        return need_more(p.torn);
    }
    let decided = open_turn(&turn);
    if decided.0 == Verdict::InterruptedToolCall {
        // oldest first, as they were made
        turn.open_calls.reverse();
        out.set_interrupted(turn.open_calls);
    }
    decide(out, decided)
}

/// What the reason adds when the last line was torn.
fn torn_note<'a>(p: &Parsed<'a, Line<'a>>) -> &'static str {
    if !p.torn {
        ""
    } else if p.torn_contains(b"\"function_call_output\"") || p.torn_contains(b"_call_output\"") {
        "; a tool output was being written when the process died (torn last line ignored)"
    } else {
        "; torn last line ignored"
    }
}

/// Reads the first `session_meta` (from the header the caller kept, or the window when it
/// starts the file): the id and cwd, and a verdict when the rollout belongs to someone else.
fn read_header<'a>(
    out: &mut Classification,
    p: &Parsed<'a, Line<'a>>,
    meta: &SessionMeta,
) -> Option<(Verdict, String)> {
    let header_line = meta
        .header
        .and_then(|h| serde_json::from_slice::<Line>(h).ok());
    let header_in_window = if meta.at_start { p.get(0) } else { None };
    let hdr = header_line
        .as_ref()
        .or(header_in_window)
        .filter(|l| l.ty == "session_meta")
        .and_then(|l| l.payload.as_ref());
    if let Some(h) = hdr {
        out.session_id = h.id.clone();
        out.cwd = h.cwd.clone();
        if let Some(v) = h.cli_version.as_deref()
            && super::newer_major(v, KNOWN_MAJOR)
        {
            let u = super::unknown_format(out, "Codex version", v, "Codex 0.x");
            return Some((u.verdict, u.reason));
        }
    }
    if out.session_id.is_none() {
        // rollout-YYYY-MM-DDThh-mm-ss-<uuid>.jsonl: the uuid is the last 36 chars.
        let s = stem(meta.file_name);
        if s.len() >= 36 && s.is_char_boundary(s.len() - 36) {
            out.session_id = Some(s[s.len() - 36..].to_string());
        }
    }
    let src = hdr.and_then(|h| h.source)?.get();
    if src.contains("subagent") {
        return Some((
            Verdict::Skipped(SkipWhy::Subagent),
            format!(
                "sub-agent rollout (source {}): its parent thread owns it",
                clip(src, 80)
            ),
        ));
    }
    if src == "\"mcp\"" || src == "\"vscode\"" {
        return Some((
            Verdict::Skipped(SkipWhy::SdkOwned),
            format!("source {src}: owned by another program"),
        ));
    }
    None
}

/// The last turn as far as the walk back saw it, when no terminal event decided it.
struct OpenTurn {
    /// A `task_started`/`turn_started` was found: the window holds the whole turn.
    lifecycle: bool,
    /// Calls that need an output and have none, newest first.
    open_calls: Vec<InterruptedCall>,
    last: Option<Last>,
}

/// Walks back from the end to the start of the last turn. A terminal event (completion,
/// abort, error) decides the verdict at once (`Err`); otherwise the open turn is returned.
fn walk_back<'a>(
    p: &Parsed<'a, Line<'a>>,
    out: &mut Classification,
) -> Result<OpenTurn, (Verdict, String)> {
    let mut outputs: HashSet<String> = HashSet::new();
    let mut turn = OpenTurn {
        lifecycle: false,
        open_calls: Vec::new(),
        last: None,
    };
    for i in (0..p.len()).rev() {
        let Some(l) = p.get(i) else { continue };
        if out.cwd.is_none()
            && l.ty == "turn_context"
            && let Some(pl) = &l.payload
        {
            out.cwd = pl.cwd.clone();
        }
        let Some(pl) = &l.payload else { continue };
        let pty = pl.ty.as_deref().unwrap_or("");
        match (l.ty.as_str(), pty) {
            ("event_msg", "task_complete" | "turn_complete") => {
                return Err(completed(pty, pl, turn.last.as_ref()));
            }
            ("event_msg", "turn_aborted") => return Err(aborted(pl.reason.as_deref())),
            ("event_msg", "error") => {
                let msg = pl
                    .message
                    .as_ref()
                    .map(|m| {
                        m.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| m.to_string())
                    })
                    .unwrap_or_default();
                return Err((
                    Verdict::Failed {
                        transient: is_transient_error(&msg),
                    },
                    format!("error ended the turn: {}", clip(&msg, 100)),
                ));
            }
            ("event_msg", "task_started" | "turn_started") => {
                turn.lifecycle = true;
                break;
            }
            ("event_msg", "user_message") => {
                turn.last.get_or_insert(Last::User);
            }
            ("event_msg", "context_compacted") | ("compacted", _) => {
                turn.last.get_or_insert(Last::Compacted);
            }
            ("response_item", t) => response_item(t, pl, &mut outputs, &mut turn),
            _ => {}
        }
    }
    Ok(turn)
}

/// A completed turn: failed if it carries an error, else finished — unless a user message
/// came after it.
fn completed(pty: &str, pl: &Payload, last: Option<&Last>) -> (Verdict, String) {
    if let Some(e) = pl.error.as_ref().filter(|e| !e.is_null()) {
        let msg = e
            .get("message")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let info = e.get("codex_error_info");
        return (
            Verdict::Failed {
                transient: codex_error_is_transient(info, msg),
            },
            format!(
                "{pty} with an error ({}): {}",
                info.map(error_info_name).unwrap_or_default(),
                clip(msg, 100)
            ),
        );
    }
    if matches!(last, Some(Last::User)) {
        return (
            Verdict::PendingInput,
            "user message after the last completed turn".into(),
        );
    }
    (Verdict::Finished, format!("{pty}: the turn completed"))
}

/// An aborted turn: the user's interrupt, a budget limit, or otherwise terminal.
fn aborted(reason: Option<&str>) -> (Verdict, String) {
    match reason.unwrap_or("") {
        "interrupted" => (
            Verdict::UserStopped,
            "turn_aborted (interrupted by the user)".into(),
        ),
        "budget_limited" => (
            Verdict::Failed { transient: false },
            "turn_aborted: budget limited".into(),
        ),
        r => (
            Verdict::Finished,
            format!("turn_aborted ({r}): the turn is terminal"),
        ),
    }
}

/// Notes one `response_item` of the open turn (seen newest first).
fn response_item(t: &str, pl: &Payload, outputs: &mut HashSet<String>, turn: &mut OpenTurn) {
    if OUTPUTS.contains(&t) {
        if let Some(c) = &pl.call_id {
            outputs.insert(c.clone());
        }
        turn.last.get_or_insert(Last::Output);
    } else if CALLS.contains(&t) {
        let cid = pl.call_id.clone().unwrap_or_default();
        let name = match &pl.name {
            Some(_) => pl.call_name(t),
            None => t.to_string(),
        };
        // web search / image generation calls carry no separate output.
        let needs_output = matches!(
            t,
            "function_call" | "custom_tool_call" | "local_shell_call" | "tool_search_call"
        );
        if needs_output && !outputs.contains(&cid) {
            let args = serde_json::Value::String(pl.call_arguments(t));
            turn.open_calls
                .push(InterruptedCall::new(&name, Some(&args), Some(&cid)));
        }
        turn.last.get_or_insert(Last::Call(name));
    } else if t == "message" {
        match pl.role.as_deref() {
            Some("user") => {
                turn.last.get_or_insert(Last::User);
            }
            Some("assistant") => {
                turn.last.get_or_insert(Last::Assistant);
            }
            _ => {}
        }
    } else if t == "reasoning" {
        turn.last.get_or_insert(Last::Stream);
    } else if t == "compaction" || t == "context_compaction" {
        turn.last.get_or_insert(Last::Compacted);
    }
}

/// The verdict of a turn that never ended: an unanswered call first, else its last item.
fn open_turn(turn: &OpenTurn) -> (Verdict, String) {
    if !turn.open_calls.is_empty() {
        let names: Vec<&str> = turn
            .open_calls
            .iter()
            .rev()
            .map(|c| c.tool.as_str())
            .collect();
        let s = if names.len() == 1 { "" } else { "s" };
        return (
            Verdict::InterruptedToolCall,
            format!("call{s} {} has no output", names.join(", ")),
        );
    }
    let lifecycle = turn.lifecycle;
    let what = if lifecycle {
        "open turn"
    } else {
        "no turn lifecycle events"
    };
    match &turn.last {
        Some(Last::Call(name)) => (
            Verdict::InterruptedAfterToolResult,
            format!("{what}: call {name} has its output, the model never saw it"),
        ),
        Some(Last::Output) => (
            Verdict::InterruptedAfterToolResult,
            format!("{what}: tool output last, the model never saw it"),
        ),
        Some(Last::User) => (
            Verdict::PendingInput,
            format!("{what}: user message not answered"),
        ),
        Some(Last::Stream) => (
            Verdict::InterruptedStream,
            format!("{what}: reasoning last, the response was cut off"),
        ),
        Some(Last::Compacted) => (
            Verdict::InterruptedStream,
            format!("{what}: compaction last, the turn never went on"),
        ),
        Some(Last::Assistant) if lifecycle => (
            Verdict::InterruptedStream,
            "open turn: assistant message but no task_complete".into(),
        ),
        Some(Last::Assistant) => (
            Verdict::Finished,
            "assistant message last (no lifecycle events)".into(),
        ),
        None if lifecycle => (
            Verdict::InterruptedStream,
            "turn started, nothing recorded after it".into(),
        ),
        None => (
            Verdict::Skipped(SkipWhy::Empty),
            "no turn and no response item".into(),
        ),
    }
}
