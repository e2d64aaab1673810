//! Claude Code transcripts (session-formats.md §3): the record model (`record`) and the
//! reader of a whole conversation, sub-agent transcripts included.
//!
//! What becomes what: a `user` line's text is a user message, its `tool_result` blocks are
//! results (text blocks joined by `\n`); `assistant` lines sharing `message.id` are one answer
//! (`text`, `thinking` as readable reasoning, `tool_use` as a call with its `input`); an
//! `isCompactSummary` user line is a compaction summary. Bookkeeping types, `isMeta` users,
//! local command output, `system` lines and API error stand-ins are dropped and counted.
//! Sub-agent transcripts (`<session>/subagents/agent-*.jsonl`) are read the same way.

pub mod record;

use std::path::Path;

use record::{BOOKKEEPING, Block, Content, Line, content};

use super::stream::Lines;
use super::{
    Answer, Conversation, Event, Part, ReadError, ReadOptions, Usage, dropped_blocks, text_content,
};
use crate::format::Format;

/// Claude Code major versions whose transcripts this reader knows.
const KNOWN: &str = "1.x, 2.x";

/// Reads a transcript and the sub-agent transcripts beside it.
pub fn read(source: &Path, opts: &ReadOptions) -> Result<Conversation, ReadError> {
    // a sub-agent's own file (`agent-<id>.jsonl`) is all sidechain lines
    let sub = source
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("agent-"));
    let mut conv = read_one(source, opts, sub)?;
    let dir = source.with_extension("").join("subagents");
    if let Ok(rd) = std::fs::read_dir(&dir) {
        let mut files: Vec<_> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.extension().is_some_and(|x| x == "jsonl")
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("agent-"))
            })
            .collect();
        files.sort();
        for f in files {
            let sub = read_one(&f, opts, true)?;
            let id = f
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.strip_prefix("agent-"))
                .unwrap_or_default()
                .to_string();
            conv.subagents.push((id, sub));
        }
    }
    Ok(conv)
}

fn read_one(source: &Path, opts: &ReadOptions, sidechain: bool) -> Result<Conversation, ReadError> {
    let mut conv = Conversation::new(Format::ClaudeCode, source);
    let mut lines = Lines::open(source, &opts.limits)?;
    while let Some(l) = lines.next_line()? {
        let Ok(line) = serde_json::from_slice::<Line>(l.bytes) else {
            conv.unparsable(l.terminated, l.offset);
            continue;
        };
        on_line(&mut conv, line, sidechain)?;
    }
    conv.finish_lines(&lines);
    Ok(conv)
}

fn check_version(conv: &mut Conversation, v: &str) -> Result<(), ReadError> {
    if conv.agent_version.is_some() {
        return Ok(());
    }
    let major = v.split('.').next().unwrap_or_default();
    if !matches!(major, "1" | "2") {
        return Err(ReadError::UnknownVersion {
            path: conv.source.clone(),
            what: "Claude Code",
            version: v.to_string(),
            known: KNOWN,
        });
    }
    conv.agent_version = Some(v.to_string());
    Ok(())
}

fn on_line(conv: &mut Conversation, line: Line, sidechain: bool) -> Result<(), ReadError> {
    if let Some(v) = &line.version {
        check_version(conv, v)?;
    }
    if conv.session_id.is_none() {
        conv.session_id = line.session_id.clone();
    }
    if conv.cwd.is_none() {
        conv.cwd = line.cwd.clone();
    }
    let ty = line.ty.as_str();
    match ty {
        "user" | "assistant" if line.is_sidechain && !sidechain => {
            conv.drop_one(
                "sidechain line",
                "a sub-agent's line inside the main transcript",
            );
        }
        "user" if line.is_meta => conv.drop_one(
            "meta user line",
            "context the agent injected, not typed by the user",
        ),
        "user" if line.is_compact_summary => {
            let text = line
                .message
                .as_ref()
                .and_then(|m| m.content)
                .and_then(|r| serde_json::from_str::<serde_json::Value>(r.get()).ok())
                .map(|v| text_content(&v).0)
                .unwrap_or_default();
            conv.events.push(Event::Compaction { summary: text });
        }
        "user" => on_user(conv, &line),
        "assistant" if line.is_api_error => conv.drop_one(
            "API error stand-in",
            "an answer the agent wrote in place of a failed model request",
        ),
        "assistant" => on_assistant(conv, &line),
        "system" => conv.drop_one(
            format!("system/{}", line.subtype.as_deref().unwrap_or("?")),
            "the agent's own bookkeeping",
        ),
        t if BOOKKEEPING.contains(&t) => conv.drop_one(t, "the agent's own bookkeeping"),
        t => conv.drop_one(
            if t.is_empty() { "untyped line" } else { t },
            "a record type this reader does not know",
        ),
    }
    Ok(())
}

fn on_user(conv: &mut Conversation, line: &Line) {
    let id = line.uuid.clone();
    let timestamp = line.timestamp.clone();
    match content(line.message.as_ref().and_then(|m| m.content)) {
        Some(Content::Text(t)) => {
            if is_command_output(&t) {
                conv.drop_one(
                    "local command",
                    "a command the user ran in the agent, not a message",
                );
            } else {
                conv.events.push(Event::User {
                    id,
                    text: t.into_owned(),
                    timestamp,
                });
            }
        }
        Some(Content::Blocks(blocks)) => {
            let mut text = Vec::new();
            for b in blocks {
                match b.ty.as_str() {
                    "tool_result" => on_result(conv, b),
                    "text" => text.push(b.text.map(|t| t.into_owned()).unwrap_or_default()),
                    other => conv.drop_one(
                        format!("user {other} block"),
                        "content other than text (an image, a document)",
                    ),
                }
            }
            if !text.is_empty() {
                conv.events.push(Event::User {
                    id,
                    text: text.join("\n"),
                    timestamp,
                });
            }
        }
        None => conv.drop_one("empty user line", "no content"),
    }
}

fn on_result(conv: &mut Conversation, b: Block) {
    let (text, other) = b.content.as_ref().map(text_content).unwrap_or_default();
    if !other.is_empty() {
        conv.drop_one(
            format!("tool result {} block", dropped_blocks(&other)),
            "content other than text in a tool result",
        );
    }
    conv.events.push(Event::Result {
        call_id: b.tool_use_id.unwrap_or_default(),
        text,
        is_error: b.is_error,
    });
}

fn is_command_output(t: &str) -> bool {
    let t = t.trim_start();
    t.starts_with("<command-name>")
        || t.starts_with("<local-command-stdout>")
        || t.starts_with("<local-command-stderr>")
        || t.starts_with("<command-message>")
}

fn on_assistant(conv: &mut Conversation, line: &Line) {
    let Some(m) = &line.message else {
        conv.drop_one("empty assistant line", "no message");
        return;
    };
    if let Some(model) = &m.model
        && model != "<synthetic>"
    {
        conv.model = Some(model.clone());
    }
    let mut parts = Vec::new();
    match content(m.content) {
        Some(Content::Text(t)) => parts.push(Part::Text(t.into_owned())),
        Some(Content::Blocks(blocks)) => {
            for b in blocks {
                match b.ty.as_str() {
                    "text" => parts.push(Part::Text(b.text.map(|t| t.into_owned()).unwrap_or_default())),
                    "thinking" => parts.push(Part::Reasoning(
                        b.thinking.map(|t| t.into_owned()).unwrap_or_default(),
                    )),
                    "tool_use" | "server_tool_use" => parts.push(Part::Call {
                        id: b.id.unwrap_or_default(),
                        name: b.name.unwrap_or_default(),
                        arguments: b
                            .input
                            .map(|i| i.to_string())
                            .unwrap_or_else(|| "{}".into()),
                    }),
                    other => conv.drop_one(
                        format!("assistant {other} block"),
                        "content a model answer had that is not text, thinking or a tool call (redacted thinking is opaque)",
                    ),
                }
            }
        }
        None => {}
    }
    let usage = m.usage.as_ref().map(|u| Usage {
        input: u.input_tokens.map(|i| {
            i + u.cache_read_input_tokens.unwrap_or(0) + u.cache_creation_input_tokens.unwrap_or(0)
        }),
        output: u.output_tokens,
        cached: u.cache_read_input_tokens,
    });
    // the lines of one API response share message.id: one answer
    let same = m.id.is_some()
        && matches!(conv.events.last(), Some(Event::Answer(a)) if a.source_id == m.id);
    if same && let Some(a) = conv.last_answer() {
        a.parts.extend(parts);
        if m.stop_reason.is_some() {
            a.stop_reason = m.stop_reason.clone();
        }
        if usage.is_some() {
            a.usage = usage;
        }
        return;
    }
    conv.events.push(Event::Answer(Answer {
        source_id: m.id.clone(),
        parts,
        model: m.model.clone().filter(|m| m != "<synthetic>"),
        usage,
        stop_reason: m.stop_reason.clone(),
        timestamp: line.timestamp.clone(),
    }));
}
