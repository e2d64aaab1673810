//! Claude Code project transcripts (`~/.claude/projects/<cwd>/<session>.jsonl`).
//!
//! Facts from files Claude Code 2.1.x wrote (see docs/boot-resume.md, "Claude Code"):
//! - an `assistant` line is written only once its whole answer arrived; one API response may
//!   span several lines sharing `message.id` (one per content block);
//! - a finished turn ends with `system`/`turn_duration` (2.1+);
//! - a request in flight leaves only an `api-request` record after the last conversation
//!   line; `api-request-blob` records are message-like copies of request bodies and never
//!   conversation; `mode`, `permission-mode`, `atis-latch`, `cost-state`, `tools-used`,
//!   `attachment` (a `prompt_snapshot` is ~60 KB) and others are bookkeeping;
//! - API errors are `assistant` lines with `isApiErrorMessage`, `apiErrorStatus`,
//!   `apiErrorType` and `error`;
//! - `Agent` launched in the background returns at once (`toolUseResult.status:
//!   "async_launched"`) and reports back later as a user line holding a
//!   `<task-notification>` with `<tool-use-id>…</tool-use-id>`;
//! - `entrypoint` says which program path wrote a line (`cli` interactive, `sdk-*` for
//!   `claude -p` and the SDKs). `claude -p --resume` writes `sdk-cli` on the lines it adds, so
//!   ownership is decided by the first line that names an entrypoint (see [`owner_line`]).
use super::{Parsed, clip, need_more, stem};
use crate::lines::{UserText, is_context_overflow, is_transient_error, user_text_kind};
use crate::verdict::{Classification, SessionMeta, SkipWhy, Verdict};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashSet;

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", default)]
    ty: String,
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(rename = "isSidechain", default)]
    is_sidechain: bool,
    #[serde(rename = "isMeta", default)]
    is_meta: bool,
    #[serde(rename = "isCompactSummary", default)]
    is_compact_summary: bool,
    #[serde(rename = "isApiErrorMessage", default)]
    is_api_error: bool,
    #[serde(rename = "apiErrorStatus", default)]
    api_error_status: Option<serde_json::Value>,
    #[serde(rename = "apiErrorType", default)]
    api_error_type: Option<String>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(rename = "sessionId", default)]
    session_id: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    entrypoint: Option<String>,
    #[serde(rename = "permissionMode", default)]
    permission_mode: Option<String>,
    #[serde(rename = "agentId", default)]
    agent_id: Option<String>,
    #[serde(rename = "toolUseResult", borrow, default)]
    tool_use_result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message: Option<Msg<'a>>,
}

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(default)]
    id: Option<String>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", default)]
    ty: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    tool_use_id: Option<String>,
    #[serde(default)]
    is_error: bool,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    /// `tool_result` content (string or blocks); a `Value` because untagged enums cannot
    /// hold borrowed raw values.
    #[serde(default)]
    content: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Blocks(#[serde(borrow)] Vec<Block<'a>>),
}

fn content(raw: Option<&RawValue>) -> Option<Content<'_>> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}

/// Record types that carry no conversation (everything but `user`, `assistant`, `system`
/// is skipped anyway; these are named so the list documents what was seen).
pub const BOOKKEEPING: &[&str] = &[
    "summary",
    "file-history-snapshot",
    "queue-operation",
    "permission-mode",
    "mode",
    "custom-title",
    "ai-title",
    "last-prompt",
    "attachment",
    "progress",
    "api-request",
    "api-request-shape",
    "api-request-blob",
    "cost-state",
    "tools-used",
    "atis-latch",
];

const INTERRUPT_MARKER: &str = "[Request interrupted by user";
const REJECT_TEXT: &str = "The user doesn't want to proceed";
const NOTIFICATION: &str = "<task-notification>";

/// What a user line holds.
struct UserInfo {
    text: String,
    results: Vec<String>,
    rejected: bool,
}

fn user_info(m: Option<&Msg>) -> UserInfo {
    let mut u = UserInfo {
        text: String::new(),
        results: Vec::new(),
        rejected: false,
    };
    match content(m.and_then(|m| m.content)) {
        Some(Content::Text(t)) => u.text = t.into_owned(),
        Some(Content::Blocks(bs)) => {
            for b in bs {
                match b.ty.as_str() {
                    "tool_result" => {
                        if let Some(id) = b.tool_use_id {
                            u.results.push(id);
                        }
                        if b.is_error
                            && b.content
                                .as_ref()
                                .is_some_and(|c| c.to_string().contains(REJECT_TEXT))
                        {
                            u.rejected = true;
                        }
                    }
                    "text" => {
                        if let Some(t) = b.text {
                            if !u.text.is_empty() {
                                u.text.push('\n');
                            }
                            u.text.push_str(&t);
                        }
                    }
                    _ => {}
                }
            }
        }
        None => {}
    }
    u
}

fn writes_turn_duration(version: Option<&str>) -> bool {
    let Some(v) = version else { return false };
    let mut it = v.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
    let (a, b) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (a, b) >= (2, 1)
}

/// Whether an API error ended the turn for a reason that may go away on retry. Decided from
/// the record's own fields (`apiErrorStatus`, `apiErrorType`, `error`); the text is only a
/// fallback, and a context overflow is never transient.
pub fn api_error_is_transient(
    status: Option<u16>,
    api_type: Option<&str>,
    error: Option<&str>,
    text: &str,
) -> bool {
    if is_context_overflow(text) {
        return false;
    }
    if let Some(s) = status {
        return matches!(s, 408 | 409 | 429 | 500..=599);
    }
    match api_type {
        Some(
            "overloaded_error" | "rate_limit_error" | "api_error" | "timeout_error"
            | "server_error",
        ) => return true,
        Some(
            "invalid_request_error"
            | "authentication_error"
            | "permission_error"
            | "billing_error"
            | "not_found_error"
            | "request_too_large",
        ) => return false,
        _ => {}
    }
    match error {
        Some("rate_limit" | "server_error" | "overloaded") => true,
        Some(
            "invalid_request"
            | "authentication_failed"
            | "billing_error"
            | "max_output_tokens"
            | "permission_error",
        ) => false,
        _ => is_transient_error(text),
    }
}

/// The line that tells who created the session: the separately read owner line (the first
/// line of the file naming an `entrypoint`), else the oldest such line in the window when
/// the window starts at the beginning of the file.
fn owner_line<'a>(p: &Parsed<'a, Line<'a>>, meta: &SessionMeta) -> Option<String> {
    if let Some(h) = meta.header
        && let Ok(l) = serde_json::from_slice::<Line>(h)
        && let Some(e) = l.entrypoint
    {
        return Some(e);
    }
    if meta.at_start {
        return (0..p.len()).find_map(|i| p.get(i).and_then(|l| l.entrypoint.clone()));
    }
    None
}

/// Session facts from the newest lines that carry them.
struct Facts {
    version: Option<String>,
    permission_mode: Option<String>,
    /// Every conversation line seen is a sidechain (a sub-agent transcript).
    sidechain_only: bool,
}

fn gather_facts<'a>(
    p: &Parsed<'a, Line<'a>>,
    meta: &SessionMeta,
    out: &mut Classification,
) -> Facts {
    let mut f = Facts {
        version: None,
        permission_mode: None,
        sidechain_only: true,
    };
    let mut any = false;
    for i in (0..p.len()).rev() {
        let Some(l) = p.get(i) else { continue };
        if out.last_record_id.is_none() {
            out.last_record_id = l.uuid.clone();
        }
        if out.session_id.is_none() {
            out.session_id = l.session_id.clone();
        }
        if out.cwd.is_none() {
            out.cwd = l.cwd.clone();
        }
        if f.version.is_none() {
            f.version = l.version.clone();
        }
        if f.permission_mode.is_none() && (l.ty == "user" || l.ty == "permission-mode") {
            f.permission_mode = l.permission_mode.clone();
        }
        if l.ty == "user" || l.ty == "assistant" {
            any = true;
            f.sidechain_only &= l.is_sidechain || l.agent_id.is_some();
        }
        // Stop once the facts are known and a few conversation lines were seen (enough to
        // tell a sidechain-only file); the decision walk parses lazily on its own.
        // (The permission mode is on every user line and in the `permission-mode` records
        // Claude Code writes at each turn's end, so the newest lines hold it.)
        if any
            && out.session_id.is_some()
            && out.cwd.is_some()
            && f.version.is_some()
            && i + 4 < p.len()
        {
            break;
        }
    }
    f.sidechain_only &= any;
    if out.session_id.is_none() {
        let s = stem(meta.file_name);
        if !s.is_empty() {
            out.session_id = Some(s.to_string());
        }
    }
    f
}

/// Background agents launched in the window (tool-use ids) that never reported back.
fn outstanding_background_agents<'a>(p: &Parsed<'a, Line<'a>>) -> Vec<String> {
    let mut launched: Vec<String> = Vec::new();
    let mut reported: HashSet<String> = HashSet::new();
    for i in 0..p.len() {
        // Cheap byte checks first: most lines are neither.
        let raw = p.lines[i];
        let launch = crate::lines::contains(raw, b"\"async_launched\"");
        let notify = crate::lines::contains(raw, NOTIFICATION.as_bytes());
        if !launch && !notify {
            continue;
        }
        let Some(l) = p.get(i) else { continue };
        if l.ty != "user" || l.is_sidechain {
            continue;
        }
        let u = user_info(l.message.as_ref());
        if launch
            && l.tool_use_result
                .is_some_and(|r| r.get().contains("\"async_launched\""))
        {
            launched.extend(u.results.iter().cloned());
        }
        if notify {
            let mut rest = u.text.as_str();
            while let Some(s) = rest.find("<tool-use-id>") {
                let after = &rest[s + "<tool-use-id>".len()..];
                let Some(e) = after.find("</tool-use-id>") else {
                    break;
                };
                reported.insert(after[..e].trim().to_string());
                rest = &after[e..];
            }
        }
    }
    launched.retain(|id| !reported.contains(id));
    launched
}

/// The newest assistant response (all lines sharing its `message.id`) and what follows it.
#[derive(Default)]
struct Group {
    id: Option<String>,
    uuid: String,
    calls: Vec<(String, String)>,
    stop: Option<String>,
    api_error: Option<(bool, String)>,
}

/// State of the walk from the newest line back.
#[derive(Default)]
struct Walk {
    turn_ended: bool,
    saw_turn_duration: bool,
    results: HashSet<String>,
    saw_result: bool,
    /// An `api-request` newer than every conversation line: a request was in flight.
    inflight: bool,
    seen_conversation: bool,
    group: Group,
}

struct Decision {
    verdict: Verdict,
    reason: String,
}

fn decision(verdict: Verdict, reason: impl Into<String>) -> Option<Decision> {
    Some(Decision {
        verdict,
        reason: reason.into(),
    })
}

impl Walk {
    /// Decides from the newest assistant group, once an older line shows it is complete.
    fn finish_group(&self, version: Option<&str>) -> Option<Decision> {
        let g = &self.group;
        let uuid = &g.uuid;
        if let Some((transient, e)) = &g.api_error {
            return decision(
                Verdict::Failed {
                    transient: *transient,
                },
                format!("assistant {uuid}: API error: {}", clip(e, 100)),
            );
        }
        if self.turn_ended {
            return decision(
                Verdict::Finished,
                format!("turn ended (turn_duration) after assistant {uuid}"),
            );
        }
        let open: Vec<&str> = g
            .calls
            .iter()
            .filter(|(id, _)| !self.results.contains(id))
            .map(|(_, n)| n.as_str())
            .collect();
        if !open.is_empty() {
            let sub = if open.iter().any(|n| *n == "Task" || *n == "Agent") {
                " (a sub-agent was running)"
            } else {
                ""
            };
            return decision(
                Verdict::InterruptedToolCall,
                format!(
                    "assistant {uuid}: tool_use {} has no tool_result{sub}",
                    open.join(", ")
                ),
            );
        }
        if self.saw_result {
            let inflight = if self.inflight {
                " (the request carrying them was in flight)"
            } else {
                ""
            };
            return decision(
                Verdict::InterruptedAfterToolResult,
                format!("tool results for assistant {uuid} were never answered{inflight}"),
            );
        }
        if self.inflight {
            return decision(
                Verdict::InterruptedStream,
                format!(
                    "a model request after assistant {uuid} was in flight (api-request) and its answer was never recorded"
                ),
            );
        }
        match g.stop.as_deref() {
            Some(s) if s != "tool_use" => decision(
                Verdict::Finished,
                format!("assistant {uuid}: stop_reason {s}"),
            ),
            _ if writes_turn_duration(version) || self.saw_turn_duration => decision(
                Verdict::InterruptedStream,
                format!(
                    "assistant {uuid}: no stop_reason and no turn_duration after it: the response was cut off"
                ),
            ),
            _ => decision(
                Verdict::Finished,
                format!("assistant {uuid}: answer present (this version writes no turn_duration)"),
            ),
        }
    }

    fn assistant(&mut self, l: &Line, uuid: &str, version: Option<&str>) -> Option<Decision> {
        let mid = l
            .message
            .as_ref()
            .and_then(|m| m.id.clone())
            .unwrap_or_else(|| uuid.to_string());
        match &self.group.id {
            // An older response: the newest group is complete.
            Some(g) if *g != mid => return self.finish_group(version),
            Some(_) => {}
            None => {
                self.group.id = Some(mid);
                self.group.uuid = uuid.to_string();
            }
        }
        if l.is_api_error && self.group.api_error.is_none() {
            let mut text = String::new();
            if let Some(m) = &l.message
                && let Some(Content::Blocks(bs)) = content(m.content)
            {
                for b in bs {
                    if let Some(t) = b.text {
                        text.push_str(&t);
                    }
                }
            }
            let status = l
                .api_error_status
                .as_ref()
                .and_then(|s| s.as_u64().or_else(|| s.as_str()?.parse().ok()))
                .and_then(|s| u16::try_from(s).ok());
            let error = l.error.as_ref().and_then(|e| e.as_str());
            let transient =
                api_error_is_transient(status, l.api_error_type.as_deref(), error, &text);
            let mut e = String::new();
            if let Some(s) = status {
                e.push_str(&format!("{s} "));
            }
            if let Some(t) = l.api_error_type.as_deref().or(error) {
                e.push_str(t);
                e.push_str(": ");
            }
            e.push_str(&text);
            self.group.api_error = Some((transient, e));
        }
        if let Some(m) = &l.message {
            if self.group.stop.is_none() {
                self.group.stop = m.stop_reason.clone();
            }
            if let Some(Content::Blocks(bs)) = content(m.content) {
                for b in bs {
                    if b.ty == "tool_use" {
                        self.group
                            .calls
                            .push((b.id.unwrap_or_default(), b.name.unwrap_or_default()));
                    }
                }
            }
        }
        None
    }

    fn user(&mut self, l: &Line, uuid: &str, version: Option<&str>) -> Option<Decision> {
        let u = user_info(l.message.as_ref());
        if u.results.is_empty()
            && (u.text.contains("<command-name>")
                || u.text.contains("<local-command-stdout>")
                || u.text.contains("<local-command-stderr>"))
        {
            return None;
        }
        if self.group.id.is_some() {
            if !u.results.is_empty() {
                // A result older than the newest group's last line: it answers one of the
                // group's own calls (interleaved) or an older group.
                self.results.extend(u.results);
                return None;
            }
            return self.finish_group(version);
        }
        if u.text.contains(INTERRUPT_MARKER) || u.rejected {
            return decision(
                Verdict::UserStopped,
                format!("user {uuid}: request interrupted by the user"),
            );
        }
        if !u.results.is_empty() {
            self.results.extend(u.results);
            self.saw_result = true;
            return None;
        }
        if self.turn_ended {
            return decision(
                Verdict::Finished,
                format!("turn ended (turn_duration) after user {uuid}"),
            );
        }
        if self.saw_result {
            return decision(
                Verdict::InterruptedAfterToolResult,
                "tool results were never answered",
            );
        }
        if u.text.contains(NOTIFICATION) {
            return decision(
                Verdict::PendingInput,
                format!("user {uuid}: a background task's <task-notification> was never answered"),
            );
        }
        let (v, r) = match user_text_kind(&u.text) {
            UserText::Heartbeat => (Verdict::Skipped(SkipWhy::Heartbeat), "heartbeat prompt"),
            UserText::Cron => (Verdict::Skipped(SkipWhy::Cron), "cron prompt"),
            UserText::Trivial => (Verdict::Skipped(SkipWhy::TrivialInput), "trivial input"),
            UserText::Real if self.inflight => (
                Verdict::InterruptedStream,
                "the model request for this prompt was in flight (api-request) and its answer was never recorded; a tool may already have run",
            ),
            UserText::Real => (Verdict::PendingInput, "prompt not answered"),
        };
        decision(v, format!("user {uuid}: {r}: {:?}", clip(&u.text, 60)))
    }

    /// Feeds one line, newest first. Returns a decision once one is reached.
    fn step(&mut self, l: &Line, version: Option<&str>) -> Option<Decision> {
        if l.ty == "api-request" && !self.seen_conversation {
            self.inflight = true;
            return None;
        }
        if l.is_sidechain || (l.ty != "user" && l.ty != "assistant" && l.ty != "system") {
            return None;
        }
        let uuid = l.uuid.as_deref().unwrap_or("?");
        match l.ty.as_str() {
            "system" => {
                if let Some("turn_duration" | "stop_hook_summary") = l.subtype.as_deref() {
                    self.saw_turn_duration = true;
                    if self.group.id.is_none() && !self.saw_result {
                        self.turn_ended = true;
                    }
                    self.seen_conversation = true;
                }
                None
            }
            "assistant" => {
                self.seen_conversation = true;
                self.assistant(l, uuid, version)
            }
            _ => {
                if l.is_meta || l.is_compact_summary {
                    return None;
                }
                self.seen_conversation = true;
                self.user(l, uuid, version)
            }
        }
    }

    /// Decides when the window ran out without an older line closing the walk.
    fn at_window_start(&self, may_grow: bool, version: Option<&str>) -> Option<Decision> {
        let g = &self.group;
        if g.id.is_some() && (!may_grow || !g.calls.is_empty() || g.stop.is_some()) {
            return self.finish_group(version);
        }
        if may_grow {
            return None;
        }
        if self.saw_result {
            return decision(
                Verdict::InterruptedAfterToolResult,
                "tool results were never answered",
            );
        }
        if self.turn_ended {
            return decision(Verdict::Finished, "turn ended (turn_duration)");
        }
        None
    }
}

/// Classifies a Claude Code transcript tail.
pub fn classify(tail: &[u8], meta: &SessionMeta) -> Classification {
    let p: Parsed<Line> = Parsed::new(tail, meta.at_start);
    let may_grow = !meta.at_start && !meta.at_cap;
    let mut out = Classification::new(Verdict::Skipped(SkipWhy::Empty), "");
    out.torn = p.torn;
    let torn_note = if p.torn {
        if p.torn_contains(b"\"tool_result\"") {
            "; a tool result was being written when the process died (torn last line ignored)"
        } else {
            "; torn last line ignored"
        }
    } else {
        ""
    };
    let facts = gather_facts(&p, meta, &mut out);
    out.permission_mode = facts.permission_mode.clone();
    let decide = |mut out: Classification, v: Verdict, reason: String| {
        out.verdict = v;
        out.reason = format!("{reason}{torn_note}");
        out
    };

    // Step 1: whose session is it?
    if meta.subagent_path || stem(meta.file_name).starts_with("agent-") || facts.sidechain_only {
        return decide(
            out,
            Verdict::Skipped(SkipWhy::Subagent),
            "sub-agent transcript (the parent's Agent/Task call covers it)".into(),
        );
    }
    let owner = owner_line(&p, meta);
    if let Some(ep) = owner.as_deref()
        && ep.starts_with("sdk")
    {
        return decide(
            out,
            Verdict::Skipped(SkipWhy::SdkOwned),
            format!("created by entrypoint {ep:?}: owned by an SDK program"),
        );
    }

    // Step 2: walk back from the newest line to the deciding one.
    let version = facts.version.as_deref();
    let mut walk = Walk::default();
    let mut found = None;
    for i in (0..p.len()).rev() {
        let Some(l) = p.get(i) else { continue };
        if let Some(d) = walk.step(l, version) {
            found = Some(d);
            break;
        }
    }
    let Some(d) = found.or_else(|| walk.at_window_start(may_grow, version)) else {
        if may_grow {
            return need_more(p.torn);
        }
        let r = if p.len() == 0 && !p.torn {
            "empty file"
        } else {
            "no user or assistant record"
        };
        return decide(out, Verdict::Skipped(SkipWhy::Empty), r.into());
    };

    // Step 3: a finished turn may still owe work to a background agent.
    if d.verdict == Verdict::Finished {
        let open = outstanding_background_agents(&p);
        if !open.is_empty() {
            return decide(
                out,
                Verdict::InterruptedToolCall,
                format!(
                    "background agent(s) launched by tool_use {} never reported back (no <task-notification>): their work was cut off; {}",
                    open.join(", "),
                    d.reason
                ),
            );
        }
        if meta.has_subagents && may_grow {
            // A launch may lie before the window: look at the whole file (up to the cap).
            return need_more(p.torn);
        }
    }
    decide(out, d.verdict, d.reason)
}
