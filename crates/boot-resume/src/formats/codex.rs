//! Codex CLI rollouts (session-formats.md §4): the record model and the reader of a whole
//! conversation.
//!
//! What becomes what: `response_item` `message`s of role `user` are user messages (except the
//! context Codex injects: `<environment_context>`, instructions), of role `assistant` answer
//! text; `reasoning` is readable reasoning (its summary; the encrypted part is not kept);
//! `function_call`, `custom_tool_call` (arguments `{"input": …}`) and `local_shell_call` are
//! calls, their `*_output` items results; consecutive answer items form one answer;
//! `compacted` is a compaction summary; `event_msg` `token_count` gives the last answer's
//! usage; `turn_context` the model and workspace. Everything else is counted as dropped.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::stream::Lines;
use super::{
    Conversation, Event, Part, ReadError, ReadOptions, Usage, dropped_blocks, text_content,
};
use crate::format::Format;

/// One line: `{"timestamp", "type", "payload"}`.
#[derive(Deserialize)]
pub struct Line<'a> {
    #[serde(default)]
    pub timestamp: Option<String>,
    #[serde(rename = "type", default)]
    pub ty: String,
    #[serde(borrow, default)]
    pub payload: Option<Payload<'a>>,
}

/// The members of a payload that the classifier and the reader look at.
#[derive(Deserialize)]
pub struct Payload<'a> {
    #[serde(rename = "type", default)]
    pub ty: Option<String>,
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub call_id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    /// The tool namespace a call names (0.171+: an MCP server's tools are sent as the
    /// namespace `mcp__<server>`, and a call records `"name":"bump","namespace":"mcp__side"`).
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<Value>,
    /// `task_complete.error` (0.171+): `{"message", "codex_error_info"}`.
    #[serde(default)]
    pub error: Option<Value>,
    // session_meta
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(borrow, default)]
    pub source: Option<&'a RawValue>,
    #[serde(default)]
    pub cli_version: Option<String>,
    // turn_context
    #[serde(default)]
    pub model: Option<String>,
    // response items
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(default)]
    pub summary: Option<Value>,
    #[serde(default)]
    pub arguments: Option<Value>,
    #[serde(default)]
    pub input: Option<Value>,
    #[serde(default)]
    pub output: Option<Value>,
    #[serde(default)]
    pub action: Option<Value>,
    // token_count
    #[serde(default)]
    pub info: Option<Value>,
}

/// Response item types that are tool calls.
pub const CALLS: &[&str] = &[
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "tool_search_call",
    "web_search_call",
    "image_generation_call",
];
/// Response item types that are tool results.
pub const OUTPUTS: &[&str] = &[
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "tool_search_call_output",
];

impl Payload<'_> {
    /// The name of the call this item (of type `ty`) makes, as the model called it: an MCP
    /// tool is its namespace and name joined by `__` (`mcp__side__bump`, the name Codex
    /// gave the model before 0.171 and Claude Code gives it), so it is never mistaken for a
    /// built-in tool of the same name.
    pub fn call_name(&self, ty: &str) -> String {
        let name = self.name.clone().unwrap_or_else(|| ty.replace("_call", ""));
        match self.namespace.as_deref().filter(|n| !n.is_empty()) {
            Some(ns) => format!("{ns}__{name}"),
            None => name,
        }
    }

    /// The arguments of the call this item (of type `ty`) makes, as JSON object text:
    /// `function_call` records them as a string, `custom_tool_call` an `input`,
    /// `local_shell_call` an `action`.
    pub fn call_arguments(&self, ty: &str) -> String {
        match ty {
            "function_call" => match &self.arguments {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => "{}".into(),
            },
            "custom_tool_call" => {
                serde_json::json!({"input": self.input.clone().unwrap_or(Value::Null)}).to_string()
            }
            "local_shell_call" => {
                serde_json::json!({"action": self.action.clone().unwrap_or(Value::Null)})
                    .to_string()
            }
            _ => self
                .arguments
                .as_ref()
                .map_or_else(|| "{}".into(), |v| v.to_string()),
        }
    }
}

/// Codex CLI versions whose rollouts this reader knows.
const KNOWN: &str = "0.x";

/// Text Codex puts in user messages for the model's context, not typed by the user.
const INJECTED: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "<skills_instructions>",
    "<permissions instructions>",
    "# AGENTS.md instructions",
    "<user_shell_command>",
];

/// Reads a rollout.
pub fn read(source: &Path, opts: &ReadOptions) -> Result<Conversation, ReadError> {
    let mut conv = Conversation::new(Format::Codex, source);
    let mut lines = Lines::open(source, &opts.limits)?;
    let mut first = true;
    while let Some(l) = lines.next_line()? {
        let Ok(line) = serde_json::from_slice::<Line>(l.bytes) else {
            conv.unparsable(l.terminated, l.offset);
            continue;
        };
        if first && line.ty != "session_meta" {
            return Err(ReadError::NotThisFormat {
                path: source.to_path_buf(),
                why: format!(
                    "line 1 is a {:?} record, not session_meta: not a Codex rollout",
                    line.ty
                ),
            });
        }
        first = false;
        on_line(&mut conv, line)?;
    }
    conv.finish_lines(&lines);
    Ok(conv)
}

fn on_line(conv: &mut Conversation, line: Line) -> Result<(), ReadError> {
    let Some(p) = line.payload else {
        conv.drop_one(line.ty, "a record without payload");
        return Ok(());
    };
    match line.ty.as_str() {
        "session_meta" if conv.session_id.is_none() => {
            if let Some(v) = &p.cli_version {
                if !v.starts_with("0.") {
                    return Err(ReadError::UnknownVersion {
                        path: conv.source.clone(),
                        what: "Codex CLI",
                        version: v.clone(),
                        known: KNOWN,
                    });
                }
                conv.agent_version = Some(v.clone());
            }
            conv.session_id = p.id.clone();
            conv.cwd = p.cwd.clone();
        }
        "session_meta" => conv.drop_one(
            "session_meta (copied)",
            "a fork's copy of its parent's metadata",
        ),
        "turn_context" => {
            if p.model.is_some() {
                conv.model = p.model.clone();
            }
            if p.cwd.is_some() {
                conv.cwd = p.cwd.clone();
            }
        }
        "response_item" => response_item(conv, p, line.timestamp),
        "compacted" => {
            let summary = p
                .message
                .as_ref()
                .map(|m| text_content(m).0)
                .unwrap_or_default();
            conv.events.push(Event::Compaction { summary });
        }
        "event_msg" if p.ty.as_deref() == Some("token_count") => token_count(conv, &p),
        t => conv.drop_one(
            match &p.ty {
                Some(pt) => format!("{t}/{pt}"),
                None => t.to_string(),
            },
            "the agent's own bookkeeping",
        ),
    }
    Ok(())
}

fn response_item(conv: &mut Conversation, p: Payload, timestamp: Option<String>) {
    let ty = p.ty.clone().unwrap_or_default();
    match ty.as_str() {
        "message" => {
            let (text, other) = p.content.as_ref().map(text_content).unwrap_or_default();
            if !other.is_empty() {
                conv.drop_one(
                    format!("message {} part", dropped_blocks(&other)),
                    "content other than text",
                );
            }
            match p.role.as_deref() {
                Some("user") if INJECTED.iter().any(|m| text.trim_start().starts_with(m)) => conv
                    .drop_one(
                        "injected context message",
                        "context the agent put in a user message, not typed by the user",
                    ),
                Some("user") => conv.events.push(Event::User {
                    id: p.id.clone(),
                    text,
                    timestamp,
                }),
                Some("assistant") => {
                    conv.answer_part(Part::Text(text));
                    if let Some(a) = conv.last_answer()
                        && a.timestamp.is_none()
                    {
                        a.timestamp = timestamp;
                    }
                }
                _ => conv.drop_one(
                    "developer message",
                    "instructions the agent sends the model, not conversation",
                ),
            }
        }
        "reasoning" => {
            let (text, _) = p.summary.as_ref().map(text_content).unwrap_or_default();
            conv.answer_part(Part::Reasoning(text));
        }
        "function_call" | "custom_tool_call" | "local_shell_call" => {
            let arguments = p.call_arguments(&ty);
            let name = p.call_name(&ty);
            conv.answer_part(Part::Call {
                id: p.call_id.clone().unwrap_or_default(),
                name,
                arguments,
            });
            if let Some(a) = conv.last_answer()
                && a.timestamp.is_none()
            {
                a.timestamp = timestamp;
            }
        }
        t if OUTPUTS.contains(&t) => {
            let text = match &p.output {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Object(o)) => o
                    .get("content")
                    .map(|c| text_content(c).0)
                    .unwrap_or_else(|| Value::Object(o.clone()).to_string()),
                Some(v) => text_content(v).0,
                None => String::new(),
            };
            conv.events.push(Event::Result {
                call_id: p.call_id.clone().unwrap_or_default(),
                text,
                is_error: false,
            });
        }
        t if CALLS.contains(&t) => conv.drop_one(
            t.to_string(),
            "a tool the model's provider ran itself (no result in the log to pair it with)",
        ),
        t => conv.drop_one(
            format!("response_item/{t}"),
            "an item type this reader does not know",
        ),
    }
}

fn token_count(conv: &mut Conversation, p: &Payload) {
    let Some(last) = p.info.as_ref().and_then(|i| i.get("last_token_usage")) else {
        return;
    };
    let n = |k: &str| last.get(k).and_then(Value::as_u64);
    let usage = Usage {
        input: n("input_tokens"),
        output: n("output_tokens"),
        cached: n("cached_input_tokens"),
    };
    // the answer this count is for: the newest one
    if let Some(Event::Answer(a)) = conv
        .events
        .iter_mut()
        .rev()
        .find(|e| matches!(e, Event::Answer(_)))
        && a.usage.is_none()
    {
        a.usage = Some(usage);
    }
}
