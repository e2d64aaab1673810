//! pi session v3 transcripts, shared by pi and OpenClaw (session-formats.md §1, §2.4).
use super::{Parsed, clip, need_more, stem};
use crate::formats::pi::{Content, Entry, Msg, content, text_of};
use crate::lines::{UserText, is_context_overflow, is_transient_error, user_text_kind};
use crate::verdict::{Classification, InterruptedCall, SessionMeta, SkipWhy, Verdict};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashSet;

fn has_content(raw: Option<&RawValue>) -> bool {
    match content(raw) {
        Some(Content::Text(t)) => !t.trim().is_empty(),
        Some(Content::Blocks(b)) => b.iter().any(|b| {
            b.ty == "toolCall"
                || b.text.as_deref().is_some_and(|t| !t.trim().is_empty())
                || b.thinking.as_deref().is_some_and(|t| !t.trim().is_empty())
        }),
        None => false,
    }
}

/// The `toolCall` blocks of a message: (call id, the call as recorded).
fn tool_calls(raw: Option<&RawValue>) -> Vec<(String, InterruptedCall)> {
    match content(raw) {
        Some(Content::Blocks(b)) => b
            .into_iter()
            .filter(|b| b.ty == "toolCall")
            .map(|b| {
                let id = b.id.unwrap_or_default();
                let call = InterruptedCall::new(
                    b.name.as_deref().unwrap_or_default(),
                    b.arguments.as_ref(),
                    Some(&id),
                );
                (id, call)
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn is_abort_text(s: &str) -> bool {
    s.contains("Request was aborted") || s.contains("This operation was aborted")
}

#[derive(Deserialize)]
struct PromptError {
    #[serde(default)]
    error: Option<String>,
}

enum Step {
    At(usize),
    End,
    Missing(String),
}

/// Classifies a pi transcript tail (no OpenClaw index facts).
pub fn classify(tail: &[u8], meta: &SessionMeta) -> Classification {
    classify_inner(tail, meta, false)
}

/// Classifies an OpenClaw transcript tail: the pi rules plus the sessions.json facts
/// (session-key filters, sub-agent fields, self-recovery markers, status).
pub fn classify_openclaw(tail: &[u8], meta: &SessionMeta) -> Classification {
    let mut c = classify_inner(tail, meta, true);
    if c.need_more {
        return c;
    }
    if let Some(ix) = meta.index {
        if c.session_id.is_none() {
            c.session_id = ix.session_id.clone();
        }
        let key = ix.session_key.as_deref().unwrap_or("");
        let inner = c.verdict;
        let skip = if ix.spawned || key.contains(":subagent:") {
            Some((SkipWhy::Subagent, "sub-agent session (its parent owns it)"))
        } else if key.contains(":cron:") {
            Some((SkipWhy::Cron, "cron session"))
        } else if key.ends_with(":heartbeat") {
            Some((SkipWhy::Heartbeat, "isolated heartbeat session"))
        } else if key.contains(":acp:")
            || key.contains(":explicit:model-run-")
            || key.starts_with("hook:")
        {
            Some((
                SkipWhy::ForeignOwned,
                "ACP / hook / explicit model-run session",
            ))
        } else if ix.foreign_owned {
            Some((SkipWhy::ForeignOwned, "ACP- or plugin-owned session"))
        } else if ix.restart_recovery && inner.is_resumable(true) {
            Some((
                SkipWhy::SelfRecovering,
                "OpenClaw's own restart recovery has handled or is handling this session",
            ))
        } else if ix.gateway_recovers() && inner.is_resumable(true) {
            Some((
                SkipWhy::SelfRecovering,
                "a gateway run (status running): the OpenClaw gateway resumes it itself when it restarts",
            ))
        } else {
            None
        };
        if let Some((why, text)) = skip {
            c.reason = format!("{text} [{key}]; tail: {inner}: {}", c.reason);
            c.verdict = Verdict::Skipped(why);
        }
    }
    c
}

/// A verdict reached by the walk (the torn-line note is added when it is applied).
struct Decision {
    verdict: Verdict,
    reason: String,
    /// For `interrupted_tool_call`: the calls without a result.
    calls: Vec<InterruptedCall>,
}

fn decision(verdict: Verdict, reason: impl Into<String>) -> Option<Decision> {
    Some(Decision {
        verdict,
        reason: reason.into(),
        calls: Vec::new(),
    })
}

/// Session id and cwd from the header (the separately read first line, else the window's
/// first line), else from the file name.
fn header_facts<'a>(p: &Parsed<'a, Entry<'a>>, meta: &SessionMeta, out: &mut Classification) {
    let header = meta
        .header
        .and_then(|h| serde_json::from_slice::<Entry>(h).ok())
        .filter(|e| e.ty == "session");
    if let Some(h) = &header {
        out.session_id = h.id.clone();
        out.cwd = h.cwd.clone();
    } else if let Some(h) = p.get(0).filter(|e| e.ty == "session") {
        out.session_id = h.id.clone();
        out.cwd = h.cwd.clone();
    }
    if out.session_id.is_none() {
        // pi: <timestamp>_<uuid>.jsonl; OpenClaw: <sessionId>[-topic-<n>].jsonl
        let s = stem(meta.file_name);
        let s = s.rsplit_once('_').map_or(s, |(_, id)| id);
        let s = s.split_once("-topic-").map_or(s, |(id, _)| id);
        if !s.is_empty() {
            out.session_id = Some(s.to_string());
        }
    }
}

fn version_text(v: &serde_json::Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// The header's `version`, as text (the header read apart, else the window's first line).
fn header_version<'a>(p: &Parsed<'a, Entry<'a>>, meta: &SessionMeta) -> Option<String> {
    let from_meta = meta
        .header
        .and_then(|h| serde_json::from_slice::<Entry>(h).ok())
        .filter(|e| e.ty == "session")
        .and_then(|e| e.version.as_ref().map(version_text));
    from_meta.or_else(|| {
        p.get(0)
            .filter(|e| e.ty == "session")
            .and_then(|e| e.version.as_ref().map(version_text))
    })
}

/// The entry the walk starts from: the last parsed non-header entry in file order, or the
/// target of a trailing `leaf` pointer. `None` when there is none: `out` is then the answer.
fn find_leaf<'a>(
    p: &Parsed<'a, Entry<'a>>,
    may_grow: bool,
    out: &mut Classification,
    torn_note: &str,
) -> Option<usize> {
    let leaf = (0..p.len())
        .rev()
        .find(|&i| p.get(i).is_some_and(|e| e.ty != "session"));
    let Some(mut cur) = leaf else {
        if may_grow && p.len() <= 1 {
            *out = need_more(p.torn);
            return None;
        }
        out.reason = if p.len() == 0 && !p.torn {
            "empty file".into()
        } else if p.torn {
            format!("no complete record after the header{torn_note}")
        } else {
            "header only: the first prompt was never persisted".into()
        };
        return None;
    };
    out.last_record_id = p.get(cur).and_then(|e| e.id.clone());
    if let Some(e) = p.get(cur)
        && e.ty == "leaf"
        && let Some(t) = e.target_id.as_deref()
    {
        match find(p, cur, t) {
            Some(j) => cur = j,
            None if may_grow => {
                *out = need_more(p.torn);
                return None;
            }
            None => {}
        }
    }
    Some(cur)
}

/// The index of the entry with `id` before `from`, searching backwards.
fn find<'a>(p: &Parsed<'a, Entry<'a>>, from: usize, id: &str) -> Option<usize> {
    (0..from)
        .rev()
        .find(|&j| p.get(j).and_then(|e| e.id.as_deref()) == Some(id))
}

/// What the walk from the leaf towards the root has seen so far.
#[derive(Default)]
struct Walk {
    results: HashSet<String>,
    saw_result: bool,
    prompt_error: Option<String>,
    compaction: bool,
    artifact: bool,
}

impl Walk {
    /// One entry, newest first. `Some` once the entry decides.
    fn entry(&mut self, e: &Entry, meta: &SessionMeta) -> Option<Decision> {
        let id = e.id.as_deref().unwrap_or("?");
        match e.ty.as_str() {
            "custom"
                if e.custom_type.as_deref() == Some("openclaw:prompt-error")
                    && self.prompt_error.is_none()
                    && !self.saw_result =>
            {
                let text = e
                    .data
                    .and_then(|d| serde_json::from_str::<PromptError>(d.get()).ok())
                    .and_then(|d| d.error)
                    .unwrap_or_default();
                self.prompt_error = Some(text);
                None
            }
            "compaction" | "branch_summary" => {
                self.compaction = true;
                None
            }
            "custom_message" => self.custom_message(id, e),
            "message" => match &e.message {
                Some(m) => match m.role.as_str() {
                    "toolResult" => {
                        if let Some(t) = &m.tool_call_id {
                            self.results.insert(t.clone());
                        }
                        self.saw_result = true;
                        None
                    }
                    "user" => self.user(id, m),
                    "assistant" => self.assistant(id, m, meta),
                    // system, bashExecution, custom, unknown roles: not decisive.
                    _ => None,
                },
                // A message entry without a message: ignore.
                None => None,
            },
            // label, session_info, model_change, thinking_level_change, active_tools_change,
            // usage, context_edit, leaf and unknown types: bookkeeping.
            _ => None,
        }
    }

    fn custom_message(&self, id: &str, e: &Entry) -> Option<Decision> {
        let ct = e.custom_type.as_deref().unwrap_or("");
        if ct == "openclaw.sessions_yield" {
            return decision(
                Verdict::WaitingExternal,
                format!("entry {id}: parked by sessions_yield, waiting for sub-agents"),
            );
        }
        if self.saw_result {
            return decision(
                Verdict::InterruptedAfterToolResult,
                "tool results recorded, the model never answered them",
            );
        }
        decision(
            Verdict::PendingInput,
            format!("entry {id}: custom message {ct:?} not answered"),
        )
    }

    fn user(&self, id: &str, m: &Msg) -> Option<Decision> {
        if self.saw_result {
            return decision(
                Verdict::InterruptedAfterToolResult,
                format!("entry {id}: tool results recorded after it were never answered"),
            );
        }
        if let Some(err) = &self.prompt_error {
            return decision(
                Verdict::Failed {
                    transient: is_transient_error(err),
                },
                format!("the run failed (openclaw:prompt-error: {})", clip(err, 120)),
            );
        }
        let text = text_of(m.content);
        let (v, r) = match user_text_kind(&text) {
            UserText::Heartbeat => (
                Verdict::Skipped(SkipWhy::Heartbeat),
                "last input is a heartbeat prompt",
            ),
            UserText::Cron => (
                Verdict::Skipped(SkipWhy::Cron),
                "last input is a cron run prompt",
            ),
            UserText::Trivial => (
                Verdict::Skipped(SkipWhy::TrivialInput),
                "last input is trivial",
            ),
            UserText::Real => (Verdict::PendingInput, "user message not answered"),
        };
        decision(v, format!("entry {id}: {r}: {:?}", clip(&text, 60)))
    }

    fn assistant(&mut self, id: &str, m: &Msg, meta: &SessionMeta) -> Option<Decision> {
        let stop = m.stop_reason.as_deref().unwrap_or("");
        let err = m.error_message.as_deref().unwrap_or("");
        if !self.saw_result
            && (stop == "aborted" || stop == "error")
            && !has_content(m.content)
            && is_abort_text(err)
        {
            // A restart-abort artifact: the empty answer a restart leaves; look beneath it.
            self.artifact = true;
            return None;
        }
        let open: Vec<InterruptedCall> = tool_calls(m.content)
            .into_iter()
            .filter(|(cid, _)| !self.results.contains(cid))
            .map(|(_, c)| c)
            .collect();
        if !open.is_empty() {
            let partial = if self.saw_result {
                " (some parallel calls have results)"
            } else {
                ""
            };
            let names: Vec<&str> = open.iter().map(|c| c.tool.as_str()).collect();
            return Some(Decision {
                verdict: Verdict::InterruptedToolCall,
                reason: format!(
                    "entry {id}: tool call {} has no result{partial}",
                    names.join(", ")
                ),
                calls: open,
            });
        }
        if self.saw_result {
            let a = if self.artifact {
                " (restart-abort artifact skipped)"
            } else {
                ""
            };
            return decision(
                Verdict::InterruptedAfterToolResult,
                format!("entry {id}: every tool call has a result, the model never saw them{a}"),
            );
        }
        if let Some(perr) = &self.prompt_error {
            let text = if perr.is_empty() { err } else { perr.as_str() };
            let transient = is_transient_error(text) || is_transient_error(err);
            return decision(
                Verdict::Failed { transient },
                format!("entry {id}: the run failed: {}", clip(text, 120)),
            );
        }
        match stop {
            "error" if self.compaction && is_context_overflow(err) => decision(
                Verdict::InterruptedStream,
                format!("entry {id}: context overflow recovery (compact, retry) was cut off"),
            ),
            "error" => decision(
                Verdict::Failed {
                    transient: is_transient_error(err),
                },
                format!("entry {id}: API error ended the turn: {}", clip(err, 120)),
            ),
            "aborted" if meta.index.is_some_and(|ix| ix.run_died()) => decision(
                Verdict::InterruptedStream,
                format!("entry {id}: partial answer aborted while the run died"),
            ),
            "aborted" => decision(
                Verdict::UserStopped,
                format!("entry {id}: answer aborted (stopped by the user)"),
            ),
            _ => {
                let a = if self.compaction {
                    " (compaction after it skipped)"
                } else {
                    ""
                };
                let s = if stop.is_empty() {
                    "no stopReason"
                } else {
                    stop
                };
                decision(
                    Verdict::Finished,
                    format!("entry {id}: assistant ended the turn ({s}){a}"),
                )
            }
        }
    }

    /// Decides when the walk reached the root without a decisive entry.
    fn at_root(&self) -> Option<Decision> {
        if self.saw_result {
            return decision(
                Verdict::InterruptedAfterToolResult,
                "tool results recorded, the model never answered them",
            );
        }
        self.prompt_error.as_ref().and_then(|err| {
            decision(
                Verdict::Failed {
                    transient: is_transient_error(err),
                },
                format!("the run failed (openclaw:prompt-error: {})", clip(err, 120)),
            )
        })
    }
}

/// Walks the `parentId` chain from the leaf to the root (so an abandoned branch does not
/// count), in named steps: header facts, the leaf, the walk, the root.
fn classify_inner(tail: &[u8], meta: &SessionMeta, _openclaw: bool) -> Classification {
    let p: Parsed<Entry> = Parsed::new(tail, meta.at_start);
    let may_grow = !meta.at_start && !meta.at_cap;
    let mut out = Classification::new(Verdict::Skipped(SkipWhy::Empty), "");
    out.torn = p.torn;
    header_facts(&p, meta, &mut out);
    if let Some(v) =
        header_version(&p, meta).filter(|v| !matches!(v.as_str(), "1" | "2" | "3" | "4"))
    {
        return super::unknown_format(&mut out, "session format version", &v, "1 to 4");
    }
    let torn_note = if p.torn {
        if p.torn_contains(b"\"role\":\"toolResult\"") {
            "; a tool result was being written when the process died (torn last line ignored)"
        } else {
            "; torn last line ignored"
        }
    } else {
        ""
    };
    let Some(mut cur) = find_leaf(&p, may_grow, &mut out, torn_note) else {
        return out;
    };
    let apply = |mut out: Classification, d: Decision| {
        out.verdict = d.verdict;
        out.reason = format!("{}{torn_note}", d.reason);
        out.set_interrupted(d.calls);
        out
    };
    let mut walk = Walk::default();
    let mut steps = 0usize;
    loop {
        steps += 1;
        if steps > p.len() + 2 {
            // A cycle in parentId links: stop.
            out.reason = "parentId links form a cycle".into();
            out.verdict = Verdict::Skipped(SkipWhy::Unreadable);
            return out;
        }
        let Some(e) = p.get(cur) else {
            // Unparsable line in the middle: walk on in file order.
            if cur == 0 {
                break;
            }
            cur -= 1;
            continue;
        };
        if e.ty == "session" {
            break;
        }
        if let Some(d) = walk.entry(e, meta) {
            return apply(out, d);
        }
        match step(&p, cur, e, &|from, id| find(&p, from, id)) {
            Step::At(j) => cur = j,
            Step::End => break,
            Step::Missing(_) if may_grow => return need_more(p.torn),
            Step::Missing(pid) => {
                if cur == 0 {
                    out.reason = format!("parent {pid} is not in the file");
                    break;
                }
                cur -= 1;
            }
        }
    }
    if let Some(d) = walk.at_root() {
        return apply(out, d);
    }
    if may_grow {
        return need_more(p.torn);
    }
    out.verdict = Verdict::Skipped(SkipWhy::Empty);
    if out.reason.is_empty() {
        out.reason = "no message in the transcript".into();
    }
    out.reason.push_str(torn_note);
    out
}

fn step<'a>(
    p: &Parsed<'a, Entry<'a>>,
    cur: usize,
    e: &Entry<'a>,
    find: &dyn Fn(usize, &str) -> Option<usize>,
) -> Step {
    match &e.parent {
        None => {
            // v1 linear file: the previous line.
            if cur == 0 {
                Step::End
            } else {
                Step::At(cur - 1)
            }
        }
        Some(None) => Step::End,
        Some(Some(pid)) => {
            // Fast path: the previous line is usually the parent.
            if cur > 0 && p.get(cur - 1).and_then(|x| x.id.as_deref()) == Some(pid.as_str()) {
                return Step::At(cur - 1);
            }
            match find(cur, pid) {
                Some(j) => Step::At(j),
                None => Step::Missing(pid.clone()),
            }
        }
    }
}
