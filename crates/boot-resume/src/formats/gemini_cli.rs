//! Gemini CLI chat recordings (0.61: `~/.gemini/tmp/<project>/chats/session-*.jsonl`; see
//! docs/boot-resume.md): the record model, the fold that turns the lines into the message
//! list the CLI itself would load, and the reader of a whole conversation.
//!
//! The file is a log of operations, not of messages: the first line is metadata
//! (`sessionId`, `projectHash`, `kind`), a message line with an `id` seen before replaces
//! that message in place (a tool turn is written twice: without its calls when the answer
//! arrived, with calls and results once the tools finished), `{"$set": {"messages": […]}}`
//! replaces the whole list (a failed turn is rolled back this way, and a resume starts this
//! way), and `{"$rewindTo": id}` drops that message and everything after it.
//!
//! What becomes what: `user` text parts are user messages (the `<session_context>` message
//! the CLI writes first is dropped), `gemini` records are answers (`content` text,
//! `thoughts` reasoning, `toolCalls` calls whose `result` parts are their results), and the
//! `user` records that repeat those results as `functionResponse` parts are dropped as
//! duplicates. `info`, `warning` and `error` records are counted as dropped.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::stream::Lines;
use super::{Answer, Conversation, Event, Part, ReadError, ReadOptions, Usage};
use crate::format::Format;
use crate::verdict::InterruptedCall;

/// One line, whichever of the four kinds it is: metadata, `$set`, `$rewindTo`, or a message
/// (then `message.ty` is not empty).
#[derive(Deserialize, Default)]
pub struct Line {
    // metadata
    #[serde(rename = "sessionId", default)]
    pub session_id: Option<String>,
    #[serde(rename = "projectHash", default)]
    pub project_hash: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    // operations
    #[serde(rename = "$set", default)]
    pub set: Option<SetOp>,
    #[serde(rename = "$rewindTo", default)]
    pub rewind_to: Option<String>,
    #[serde(flatten)]
    pub message: Message,
}

/// `$set`: metadata updates; `messages` replaces the list.
#[derive(Deserialize, Default)]
pub struct SetOp {
    #[serde(default)]
    pub messages: Option<Vec<Message>>,
}

/// A message of the conversation.
#[derive(Deserialize, Clone, Debug, Default)]
pub struct Message {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(rename = "type", default)]
    pub ty: String,
    #[serde(default)]
    pub content: Value,
    #[serde(rename = "toolCalls", default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub timestamp: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub thoughts: Value,
    #[serde(default)]
    pub tokens: Option<Value>,
}

/// A tool call recorded with its answer (only once it finished).
#[derive(Deserialize, Clone, Debug, Default)]
pub struct ToolCall {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub args: Value,
    #[serde(default)]
    pub result: Value,
    #[serde(default)]
    pub status: Option<String>,
}

impl Message {
    /// The text parts of a `user` message (or a `gemini` message's string content).
    pub fn text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }

    /// `functionResponse` parts of a `user` message.
    pub fn function_responses(&self) -> Vec<&Value> {
        match &self.content {
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p.get("functionResponse"))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// `functionCall` parts of a `gemini` message: a resumed session's `$set messages`
    /// writes calls in the API's shape, not as `toolCalls`.
    pub fn function_calls(&self) -> Vec<&Value> {
        match &self.content {
            Value::Array(parts) => parts.iter().filter_map(|p| p.get("functionCall")).collect(),
            _ => Vec::new(),
        }
    }

    /// The context message the CLI writes at the start of every session.
    pub fn is_session_context(&self) -> bool {
        self.ty == "user" && self.text().trim_start().starts_with("<session_context>")
    }
}

/// The message list as the CLI would load it, folded from lines in file order.
#[derive(Default, Debug)]
pub struct Fold {
    pub messages: Vec<Message>,
    pub session_id: Option<String>,
    pub project_hash: Option<String>,
    pub kind: Option<String>,
    /// The list is known from its start: the fold began at the file's first line, or a
    /// `$set messages` gave the whole list since.
    pub based: bool,
    /// A `$rewindTo` named a message the fold has not seen (it lies before the window).
    pub rewind_unknown: bool,
    /// User prompts the last `$set messages` dropped, when nothing was recorded after it:
    /// the CLI rolls a failed turn back this way.
    pub rolled_back: Vec<Message>,
}

impl Fold {
    /// A fold starting at the file's first line (`based`) or inside it.
    pub fn new(based: bool) -> Fold {
        Fold {
            based,
            ..Default::default()
        }
    }

    /// Applies one parsed line.
    pub fn apply(&mut self, l: Line) {
        if let Some(id) = &l.session_id
            && l.message.ty.is_empty()
        {
            self.session_id = Some(id.clone());
            if l.project_hash.is_some() {
                self.project_hash = l.project_hash.clone();
            }
            if l.kind.is_some() {
                self.kind = l.kind.clone();
            }
        }
        if let Some(set) = l.set {
            if let Some(list) = set.messages {
                let kept: std::collections::HashSet<&str> =
                    list.iter().filter_map(|m| m.id.as_deref()).collect();
                self.rolled_back = self
                    .messages
                    .iter()
                    .filter(|m| {
                        m.ty == "user"
                            && !m.is_session_context()
                            && m.function_responses().is_empty()
                            && m.id.as_deref().is_none_or(|id| !kept.contains(id))
                    })
                    .cloned()
                    .collect();
                self.messages = list;
                self.based = true;
            }
            return;
        }
        if let Some(target) = l.rewind_to {
            match self
                .messages
                .iter()
                .position(|m| m.id.as_deref() == Some(target.as_str()))
            {
                Some(i) => self.messages.truncate(i),
                None if self.based => {}
                None => {
                    self.rewind_unknown = true;
                    self.messages.clear();
                }
            }
            self.rolled_back.clear();
            return;
        }
        if l.message.ty.is_empty() {
            return;
        }
        let m = l.message;
        self.rolled_back.clear();
        if let Some(id) = &m.id
            && let Some(slot) = self
                .messages
                .iter_mut()
                .find(|x| x.id.as_deref() == Some(id.as_str()))
        {
            *slot = m;
            return;
        }
        self.messages.push(m);
    }
}

/// Whether a line looks like a Gemini CLI metadata line (the first line of a recording).
pub fn is_metadata(l: &Line) -> bool {
    l.session_id.is_some() && l.project_hash.is_some() && l.message.ty.is_empty()
}

/// A recorded call without its result, as the session recorded it: name, arguments and id
/// (what a resume message names).
pub fn interrupted_call(c: &ToolCall) -> InterruptedCall {
    InterruptedCall::new(
        c.name.as_deref().unwrap_or_default(),
        Some(&c.args),
        c.id.as_deref(),
    )
}

/// The text of a call's result parts (`functionResponse.response.output`, else the JSON).
fn result_text(v: &Value) -> (String, bool) {
    let parts: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        Value::Null => Vec::new(),
        other => vec![other],
    };
    let mut out = Vec::new();
    let mut error = false;
    for p in parts {
        let resp = p
            .get("functionResponse")
            .and_then(|f| f.get("response"))
            .unwrap_or(p);
        if let Some(e) = resp.get("error") {
            error = true;
            out.push(e.as_str().map_or_else(|| e.to_string(), str::to_string));
        } else if let Some(o) = resp.get("output") {
            out.push(o.as_str().map_or_else(|| o.to_string(), str::to_string));
        } else {
            out.push(resp.to_string());
        }
    }
    (out.join("\n"), error)
}

/// Reads a Gemini CLI recording (`session-*.jsonl`).
pub fn read(source: &Path, opts: &ReadOptions) -> Result<Conversation, ReadError> {
    let mut conv = Conversation::new(Format::GeminiCli, source);
    let mut lines = Lines::open(source, &opts.limits)?;
    let mut fold = Fold::new(true);
    let mut first = true;
    while let Some(l) = lines.next_line()? {
        let parsed = serde_json::from_slice::<Line>(l.bytes);
        let Ok(parsed) = parsed else {
            conv.unparsable(l.terminated, l.offset);
            continue;
        };
        if first {
            first = false;
            if !is_metadata(&parsed) {
                return Err(ReadError::NotThisFormat {
                    path: source.to_path_buf(),
                    why: "the first line is not Gemini CLI session metadata (sessionId, projectHash): not a Gemini CLI 0.61 recording (an older session-*.json is one JSON object; resume it once with Gemini CLI to convert it)".into(),
                });
            }
        }
        fold.apply(parsed);
    }
    conv.finish_lines(&lines);
    conv.session_id = fold.session_id.clone();
    let mut answered = std::collections::HashSet::new();
    for m in fold.messages {
        match m.ty.as_str() {
            "user" if m.is_session_context() => conv.drop_one(
                "session context",
                "the CLI's own context message, not the user's",
            ),
            "user" if !m.function_responses().is_empty() => {
                for r in m.function_responses() {
                    let id = r
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    if answered.insert(id.clone()) {
                        let (text, is_error) =
                            result_text(&serde_json::json!([{ "functionResponse": r }]));
                        conv.events.push(Event::Result {
                            call_id: id,
                            text,
                            is_error,
                        });
                    } else {
                        conv.drop_one(
                            "function response",
                            "repeats a result already kept with its call",
                        );
                    }
                }
            }
            "user" => conv.events.push(Event::User {
                id: m.id.clone(),
                text: m.text(),
                timestamp: m.timestamp.clone(),
            }),
            "gemini" => push_answer(&mut conv, m, &mut answered),
            other => conv.drop_one(format!("{other} record"), "not part of the conversation"),
        }
    }
    Ok(conv)
}

fn push_answer(
    conv: &mut Conversation,
    m: Message,
    answered: &mut std::collections::HashSet<String>,
) {
    let mut parts = Vec::new();
    if let Value::Array(th) = &m.thoughts {
        for t in th {
            let text = [t.get("subject"), t.get("description")]
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(": ");
            if !text.is_empty() {
                parts.push(Part::Reasoning(text));
            }
        }
    }
    let text = m.text();
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    for c in m.function_calls() {
        parts.push(Part::Call {
            id: c
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            name: c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            arguments: c.get("args").map_or_else(|| "{}".into(), Value::to_string),
        });
    }
    let mut results = Vec::new();
    for c in &m.tool_calls {
        let id = c.id.clone().unwrap_or_default();
        parts.push(Part::Call {
            id: id.clone(),
            name: c.name.clone().unwrap_or_default(),
            arguments: match &c.args {
                Value::Null => "{}".into(),
                v => v.to_string(),
            },
        });
        if !c.result.is_null() && answered.insert(id.clone()) {
            let (text, is_error) = result_text(&c.result);
            results.push(Event::Result {
                call_id: id,
                text,
                is_error: is_error || c.status.as_deref() == Some("error"),
            });
        }
    }
    if parts.is_empty() {
        conv.drop_one(
            "empty answer",
            "a model turn with no text and no finished call (a tool was still running)",
        );
        return;
    }
    let usage = m.tokens.as_ref().map(|t| Usage {
        input: t.get("input").and_then(Value::as_u64),
        output: t.get("output").and_then(Value::as_u64),
        cached: t.get("cached").and_then(Value::as_u64),
    });
    if m.model.is_some() {
        conv.model = m.model.clone();
    }
    conv.events.push(Event::Answer(Answer {
        source_id: m.id,
        parts,
        model: m.model,
        usage,
        stop_reason: None,
        timestamp: m.timestamp,
    }));
    conv.events.extend(results);
}
