//! Claude Code project transcripts (session-formats.md §3).
use super::{Parsed, clip, need_more, stem};
use crate::lines::{UserText, is_transient_error, user_text_kind};
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
    #[serde(rename = "agentId", default)]
    agent_id: Option<String>,
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

const BOOKKEEPING: &[&str] = &[
    "summary",
    "file-history-snapshot",
    "queue-operation",
    "permission-mode",
    "custom-title",
    "ai-title",
    "last-prompt",
    "attachment",
    "progress",
];

const INTERRUPT_MARKER: &str = "[Request interrupted by user";
const REJECT_TEXT: &str = "The user doesn't want to proceed";

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

    // Session facts from the newest lines that carry them.
    let mut entrypoint = None;
    let mut version = None;
    let mut all_sidechain = true;
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
        if entrypoint.is_none() {
            entrypoint = l.entrypoint.clone();
        }
        if version.is_none() {
            version = l.version.clone();
        }
        if l.ty == "user" || l.ty == "assistant" {
            any = true;
            all_sidechain &= l.is_sidechain || l.agent_id.is_some();
        }
        // Stop once the facts are known and a few conversation lines were seen (enough to
        // tell a sidechain-only file); the decision walk below parses lazily on its own.
        if any
            && out.session_id.is_some()
            && out.cwd.is_some()
            && version.is_some()
            && i + 4 < p.len()
        {
            break;
        }
    }
    if out.session_id.is_none() {
        let s = stem(meta.file_name);
        if !s.is_empty() {
            out.session_id = Some(s.to_string());
        }
    }
    let decide = |mut out: Classification, v: Verdict, reason: String| {
        out.verdict = v;
        out.reason = format!("{reason}{torn_note}");
        out
    };
    let file_stem = stem(meta.file_name);
    if meta.subagent_path || file_stem.starts_with("agent-") || (any && all_sidechain) {
        return decide(
            out,
            Verdict::Skipped(SkipWhy::Subagent),
            "sub-agent transcript (the parent's Task call covers it)".into(),
        );
    }
    if let Some(ep) = entrypoint.as_deref()
        && ep.starts_with("sdk")
    {
        return decide(
            out,
            Verdict::Skipped(SkipWhy::SdkOwned),
            format!("entrypoint {ep:?}: owned by an SDK program"),
        );
    }

    let mut turn_ended = false;
    let mut saw_turn_duration = false;
    let mut results: HashSet<String> = HashSet::new();
    let mut saw_result = false;
    let mut group: Option<String> = None; // message.id of the newest assistant group
    let mut group_calls: Vec<(String, String)> = Vec::new();
    let mut group_stop: Option<String> = None;
    let mut group_api_error: Option<String> = None;
    let mut group_uuid = String::new();

    let mut i = p.len();
    let finish_group = |out: Classification,
                        group_calls: &[(String, String)],
                        results: &HashSet<String>,
                        saw_result: bool,
                        turn_ended: bool,
                        group_stop: Option<&str>,
                        api_error: Option<&str>,
                        uuid: &str,
                        saw_turn_duration: bool| {
        if let Some(e) = api_error {
            return decide(
                out,
                Verdict::Failed {
                    transient: is_transient_error(e),
                },
                format!("assistant {uuid}: API error: {}", clip(e, 100)),
            );
        }
        if turn_ended {
            return decide(
                out,
                Verdict::Finished,
                format!("turn ended (turn_duration) after assistant {uuid}"),
            );
        }
        let open: Vec<&str> = group_calls
            .iter()
            .filter(|(id, _)| !results.contains(id))
            .map(|(_, n)| n.as_str())
            .collect();
        if !open.is_empty() {
            let sub = if open.iter().any(|n| *n == "Task" || *n == "Agent") {
                " (a sub-agent was running)"
            } else {
                ""
            };
            return decide(
                out,
                Verdict::InterruptedToolCall,
                format!(
                    "assistant {uuid}: tool_use {} has no tool_result{sub}",
                    open.join(", ")
                ),
            );
        }
        if saw_result {
            return decide(
                out,
                Verdict::InterruptedAfterToolResult,
                format!("tool results for assistant {uuid} were never answered"),
            );
        }
        match group_stop {
            Some(s @ ("end_turn" | "stop_sequence" | "max_tokens" | "refusal")) => decide(
                out,
                Verdict::Finished,
                format!("assistant {uuid}: stop_reason {s}"),
            ),
            Some(s) if s != "tool_use" => decide(
                out,
                Verdict::Finished,
                format!("assistant {uuid}: stop_reason {s}"),
            ),
            _ if writes_turn_duration(version.as_deref()) || saw_turn_duration => decide(
                out,
                Verdict::InterruptedStream,
                format!(
                    "assistant {uuid}: no stop_reason and no turn_duration after it: the response was cut off"
                ),
            ),
            _ => decide(
                out,
                Verdict::Finished,
                format!("assistant {uuid}: answer present (this version writes no turn_duration)"),
            ),
        }
    };

    while i > 0 {
        i -= 1;
        let Some(l) = p.get(i) else { continue };
        if BOOKKEEPING.contains(&l.ty.as_str()) || l.is_sidechain {
            continue;
        }
        let uuid = l.uuid.as_deref().unwrap_or("?");
        match l.ty.as_str() {
            "system" => {
                if let Some("turn_duration" | "stop_hook_summary") = l.subtype.as_deref() {
                    saw_turn_duration = true;
                    if group.is_none() && !saw_result {
                        turn_ended = true;
                    }
                }
            }
            "assistant" => {
                let mid = l
                    .message
                    .as_ref()
                    .and_then(|m| m.id.clone())
                    .unwrap_or_else(|| uuid.to_string());
                match &group {
                    Some(g) if *g != mid => {
                        // An older response: the newest group is complete.
                        return finish_group(
                            out,
                            &group_calls,
                            &results,
                            saw_result,
                            turn_ended,
                            group_stop.as_deref(),
                            group_api_error.as_deref(),
                            &group_uuid,
                            saw_turn_duration,
                        );
                    }
                    Some(_) => {}
                    None => {
                        group = Some(mid);
                        group_uuid = uuid.to_string();
                    }
                }
                if l.is_api_error && group_api_error.is_none() {
                    let mut e = String::new();
                    if let Some(s) = &l.api_error_status {
                        e.push_str(&s.to_string());
                        e.push(' ');
                    }
                    if let Some(s) = &l.error {
                        e.push_str(s.as_str().unwrap_or(&s.to_string()));
                        e.push(' ');
                    }
                    if let Some(m) = &l.message
                        && let Some(Content::Blocks(bs)) = content(m.content)
                    {
                        for b in bs {
                            if let Some(t) = b.text {
                                e.push_str(&t);
                            }
                        }
                    }
                    group_api_error = Some(e);
                }
                if let Some(m) = &l.message {
                    if group_stop.is_none() {
                        group_stop = m.stop_reason.clone();
                    }
                    if let Some(Content::Blocks(bs)) = content(m.content) {
                        for b in bs {
                            if b.ty == "tool_use" {
                                group_calls
                                    .push((b.id.unwrap_or_default(), b.name.unwrap_or_default()));
                            }
                        }
                    }
                }
            }
            "user" => {
                if l.is_meta || l.is_compact_summary {
                    continue;
                }
                let u = user_info(l.message.as_ref());
                if u.results.is_empty()
                    && (u.text.contains("<command-name>")
                        || u.text.contains("<local-command-stdout>")
                        || u.text.contains("<local-command-stderr>"))
                {
                    continue;
                }
                if group.is_some() {
                    if !u.results.is_empty() {
                        // A result older than the newest group's last line: it answers
                        // one of the group's own calls (interleaved) or an older group.
                        results.extend(u.results);
                        continue;
                    }
                    return finish_group(
                        out,
                        &group_calls,
                        &results,
                        saw_result,
                        turn_ended,
                        group_stop.as_deref(),
                        group_api_error.as_deref(),
                        &group_uuid,
                        saw_turn_duration,
                    );
                }
                if u.text.contains(INTERRUPT_MARKER) || u.rejected {
                    return decide(
                        out,
                        Verdict::UserStopped,
                        format!("user {uuid}: request interrupted by the user"),
                    );
                }
                if !u.results.is_empty() {
                    results.extend(u.results);
                    saw_result = true;
                    continue;
                }
                if turn_ended {
                    return decide(
                        out,
                        Verdict::Finished,
                        format!("turn ended (turn_duration) after user {uuid}"),
                    );
                }
                if saw_result {
                    return decide(
                        out,
                        Verdict::InterruptedAfterToolResult,
                        "tool results were never answered".into(),
                    );
                }
                let (v, r) = match user_text_kind(&u.text) {
                    UserText::Heartbeat => {
                        (Verdict::Skipped(SkipWhy::Heartbeat), "heartbeat prompt")
                    }
                    UserText::Cron => (Verdict::Skipped(SkipWhy::Cron), "cron prompt"),
                    UserText::Trivial => (Verdict::Skipped(SkipWhy::TrivialInput), "trivial input"),
                    UserText::Real => (Verdict::PendingInput, "prompt not answered"),
                };
                return decide(out, v, format!("user {uuid}: {r}: {:?}", clip(&u.text, 60)));
            }
            _ => {}
        }
    }
    if group.is_some() && (!may_grow || !group_calls.is_empty() || group_stop.is_some()) {
        return finish_group(
            out,
            &group_calls,
            &results,
            saw_result,
            turn_ended,
            group_stop.as_deref(),
            group_api_error.as_deref(),
            &group_uuid,
            saw_turn_duration,
        );
    }
    if may_grow {
        return need_more(p.torn);
    }
    if saw_result {
        return decide(
            out,
            Verdict::InterruptedAfterToolResult,
            "tool results were never answered".into(),
        );
    }
    if turn_ended {
        return decide(out, Verdict::Finished, "turn ended (turn_duration)".into());
    }
    let r = if p.len() == 0 && !p.torn {
        "empty file"
    } else {
        "no user or assistant record"
    };
    decide(out, Verdict::Skipped(SkipWhy::Empty), r.into())
}
