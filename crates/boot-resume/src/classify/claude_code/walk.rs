//! The classification rule: the walk from the newest line back to the deciding one, with the
//! newest assistant response (its calls, stop reason and API error) as a group decided once
//! an older line shows it is complete.

use super::api_error::api_error_is_transient;
use super::record::{Content, INTERRUPT_MARKER, Line, NOTIFICATION, content, user_info};
use crate::classify::clip;
use crate::lines::{UserText, user_text_kind};
use crate::verdict::{InterruptedCall, SkipWhy, Verdict};
use std::collections::HashSet;

fn writes_turn_duration(version: Option<&str>) -> bool {
    let Some(v) = version else { return false };
    let mut it = v.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
    let (a, b) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (a, b) >= (2, 1)
}

/// The newest assistant response (all lines sharing its `message.id`) and what follows it.
#[derive(Default)]
struct Group {
    id: Option<String>,
    uuid: String,
    /// (tool-use id, the call as recorded)
    calls: Vec<(String, InterruptedCall)>,
    stop: Option<String>,
    api_error: Option<(bool, String)>,
}

/// State of the walk from the newest line back.
#[derive(Default)]
pub(super) struct Walk {
    turn_ended: bool,
    saw_turn_duration: bool,
    results: HashSet<String>,
    saw_result: bool,
    /// An `api-request` newer than every conversation line: a request was in flight.
    inflight: bool,
    seen_conversation: bool,
    group: Group,
}

pub(super) struct Decision {
    pub(super) verdict: Verdict,
    pub(super) reason: String,
    /// For `interrupted_tool_call`: the calls without a result.
    pub(super) calls: Vec<InterruptedCall>,
}

fn decision(verdict: Verdict, reason: impl Into<String>) -> Option<Decision> {
    Some(Decision {
        verdict,
        reason: reason.into(),
        calls: Vec::new(),
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
        let open: Vec<&InterruptedCall> = g
            .calls
            .iter()
            .filter(|(id, _)| !self.results.contains(id))
            .map(|(_, c)| c)
            .collect();
        if !open.is_empty() {
            let names: Vec<&str> = open.iter().map(|c| c.tool.as_str()).collect();
            let sub = if names.iter().any(|n| *n == "Task" || *n == "Agent") {
                " (a sub-agent was running)"
            } else {
                ""
            };
            return Some(Decision {
                verdict: Verdict::InterruptedToolCall,
                reason: format!(
                    "assistant {uuid}: tool_use {} has no tool_result{sub}",
                    names.join(", ")
                ),
                calls: open.into_iter().cloned().collect(),
            });
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
                        let id = b.id.unwrap_or_default();
                        let call = InterruptedCall::new(
                            b.name.as_deref().unwrap_or_default(),
                            b.input.as_ref(),
                            Some(&id),
                        );
                        self.group.calls.push((id, call));
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
    pub(super) fn step(&mut self, l: &Line, version: Option<&str>) -> Option<Decision> {
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
    pub(super) fn at_window_start(
        &self,
        may_grow: bool,
        version: Option<&str>,
    ) -> Option<Decision> {
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
