//! Each foreign session format understood in one place: its record model (what a line
//! holds) and a reader that yields the whole conversation. The classifiers (`classify`) judge
//! a tail through the same record models; `lazarus sessions import` reads whole files through
//! the readers.
//!
//! Readers stream: a file is read line by line through [`stream::Lines`], which holds at most
//! one line (bounded by [`Limits::line_bytes`]) besides what the conversation keeps, refuses
//! non-regular files before opening them, and names the line and byte offset of anything it
//! refuses. A reader never writes.

pub mod claude_code;
pub mod codex;
pub mod gemini_cli;
pub mod openclaw;
pub mod opencode;
pub mod pi;
pub mod stream;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::format::Format;

/// The bounds every reader holds to. Each is named in the error that refuses input past it.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest line (one record) read, in bytes.
    pub line_bytes: usize,
    /// Largest source read, in bytes.
    pub file_bytes: u64,
    /// Deepest nesting of JSON arrays and objects in one record.
    pub depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            line_bytes: 16 << 20,
            file_bytes: 4 << 30,
            depth: 64,
        }
    }
}

/// Why a source cannot be read. Every variant names what, where, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not a regular file ({kind}); import reads only regular files: copy it to a file first"
    )]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(
        "{path}: line {line} (byte {offset}) is longer than the {limit}-byte line limit; this is not a session log this build reads"
    )]
    LineTooLong {
        path: PathBuf,
        line: u64,
        offset: u64,
        limit: usize,
    },
    #[error("{path} is larger than the {limit}-byte limit of an import")]
    FileTooLarge { path: PathBuf, limit: u64 },
    #[error(
        "{path}: line {line} (byte {offset}) nests JSON deeper than {limit} levels; refused as hostile input"
    )]
    TooDeep {
        path: PathBuf,
        line: u64,
        offset: u64,
        limit: usize,
    },
    #[error(
        "{path}: {what} version {version:?} is not one this build reads ({known}); import it with a Lazarus that knows it"
    )]
    UnknownVersion {
        path: PathBuf,
        what: &'static str,
        version: String,
        known: &'static str,
    },
    #[error("{path}: {why}")]
    NotThisFormat { path: PathBuf, why: String },
    #[error("OpenClaw database {path}: {why}")]
    Sqlite { path: PathBuf, why: String },
    /// `why` names the database and what went wrong.
    #[error("{why}")]
    Database { path: PathBuf, why: String },
}

/// One part of a model's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Text(String),
    /// Readable reasoning (thinking, a reasoning summary). Kept, never sent back.
    Reasoning(String),
    /// A tool call; `arguments` is JSON object text.
    Call {
        id: String,
        name: String,
        arguments: String,
    },
}

/// Token counts as the source recorded them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub cached: Option<u64>,
}

/// One model answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// The source's id for it (Claude Code's `message.id`), used to join its lines.
    pub source_id: Option<String>,
    pub parts: Vec<Part>,
    pub model: Option<String>,
    pub usage: Option<Usage>,
    pub stop_reason: Option<String>,
    pub timestamp: Option<String>,
}

/// One step of a conversation, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A message from the user (`id`: the source's own id for it, when it has one).
    User {
        id: Option<String>,
        text: String,
        timestamp: Option<String>,
    },
    /// A model answer.
    Answer(Answer),
    /// The result of a tool call, its text as the source holds it.
    Result {
        call_id: String,
        text: String,
        is_error: bool,
    },
    /// The agent compacted its context: from here the model was sent this summary in place
    /// of what came before.
    Compaction { summary: String },
}

/// A whole conversation read from a source.
#[derive(Debug, Clone)]
pub struct Conversation {
    pub format: Format,
    /// The agent's version, when the source says it.
    pub agent_version: Option<String>,
    /// The source format's own version, when it has one.
    pub format_version: Option<String>,
    /// The source's own session id or key.
    pub session_id: Option<String>,
    /// The workspace the agent ran in.
    pub cwd: Option<String>,
    /// The model last used.
    pub model: Option<String>,
    pub events: Vec<Event>,
    /// What was read and not kept: (what) -> (count, why).
    pub dropped: BTreeMap<String, (u64, String)>,
    /// Bytes read and their SHA-256 (lowercase hex).
    pub bytes: u64,
    pub sha256: String,
    /// A torn last record was left out (its byte offset).
    pub torn_at: Option<u64>,
    /// Sub-agent conversations found beside the source (Claude Code), with their own id.
    pub subagents: Vec<(String, Conversation)>,
    /// Other branches of a session tree (pi, OpenClaw), each as the events of the whole
    /// branch from the root, when asked for.
    pub branches: Vec<Vec<Event>>,
    /// The source the conversation was read from.
    pub source: PathBuf,
}

impl Conversation {
    pub(crate) fn new(format: Format, source: &Path) -> Self {
        Conversation {
            format,
            agent_version: None,
            format_version: None,
            session_id: None,
            cwd: None,
            model: None,
            events: Vec::new(),
            dropped: BTreeMap::new(),
            bytes: 0,
            sha256: String::new(),
            torn_at: None,
            subagents: Vec::new(),
            branches: Vec::new(),
            source: source.to_path_buf(),
        }
    }

    /// Notes that something read was not kept.
    pub fn drop_one(&mut self, what: impl Into<String>, why: &str) {
        let e = self
            .dropped
            .entry(what.into())
            .or_insert_with(|| (0, why.to_string()));
        e.0 += 1;
    }

    /// Takes what a reader's [`stream::Lines`] read: the bytes and their SHA-256, and what
    /// the damage rule cut or replaced, reported as dropped.
    pub(crate) fn finish_lines(&mut self, lines: &stream::Lines) {
        (self.bytes, self.sha256) = lines.digest();
        let d = lines.damage();
        if d.nul_runs > 0 {
            let e = self
                .dropped
                .entry("NUL bytes (crash debris)".into())
                .or_insert_with(|| {
                    (
                        0,
                        "zeros where a write never landed, cut; the records around them were read"
                            .into(),
                    )
                });
            e.0 += d.nul_bytes;
        }
        if d.invalid_utf8 > 0 {
            let e = self
                .dropped
                .entry("invalid UTF-8 sequence".into())
                .or_insert_with(|| {
                    (
                        0,
                        "replaced by U+FFFD; the record around it was kept".into(),
                    )
                });
            e.0 += d.invalid_utf8;
        }
    }

    /// Notes a line that did not parse: a whole line in the middle is skipped (a write glued
    /// onto a torn one, as the agents' own loaders skip it); a last line cut short is torn.
    pub(crate) fn unparsable(&mut self, terminated: bool, offset: u64) {
        if terminated {
            self.drop_one(
                "unparsable line",
                "not JSON (a write glued onto a torn line?)",
            );
        } else {
            self.torn_at = Some(offset);
            self.drop_one(
                "torn last line",
                "the write was cut short (no newline, not whole JSON)",
            );
        }
    }

    /// The last answer, when the last event is one.
    pub(crate) fn last_answer(&mut self) -> Option<&mut Answer> {
        match self.events.last_mut() {
            Some(Event::Answer(a)) => Some(a),
            _ => None,
        }
    }

    /// Adds parts to the current answer, or starts one.
    pub(crate) fn answer_part(&mut self, part: Part) {
        match self.last_answer() {
            Some(a) => a.parts.push(part),
            None => self.events.push(Event::Answer(Answer {
                parts: vec![part],
                ..Default::default()
            })),
        }
    }

    /// Counts of (user messages, tool calls, tool results).
    pub fn counts(&self) -> (usize, usize, usize) {
        count(&self.events)
    }
}

/// Counts of (user messages, tool calls, tool results) in events.
pub fn count(events: &[Event]) -> (usize, usize, usize) {
    let (mut u, mut c, mut r) = (0, 0, 0);
    for e in events {
        match e {
            Event::User { .. } => u += 1,
            Event::Answer(a) => {
                c += a
                    .parts
                    .iter()
                    .filter(|p| matches!(p, Part::Call { .. }))
                    .count()
            }
            Event::Result { .. } => r += 1,
            Event::Compaction { .. } => {}
        }
    }
    (u, c, r)
}

/// What to read and how.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub limits: Limits,
    /// OpenClaw: the session key (or session id) to read; OpenCode: the session id.
    pub session_key: Option<String>,
    /// pi, OpenClaw: also read the other branches of the session tree.
    pub branches: bool,
}

/// Reads a whole conversation of `format` from `source`.
pub fn read(format: Format, source: &Path, opts: &ReadOptions) -> Result<Conversation, ReadError> {
    match format {
        Format::ClaudeCode => claude_code::read(source, opts),
        Format::Codex => codex::read(source, opts),
        Format::Pi => pi::read(source, opts),
        Format::Openclaw => openclaw::read(source, opts),
        Format::GeminiCli => gemini_cli::read(source, opts),
        Format::Opencode => opencode::read(source, opts),
        Format::Lazarus => Err(ReadError::NotThisFormat {
            path: source.to_path_buf(),
            why: "a Lazarus ledger is imported as it is, not through a foreign reader".into(),
        }),
    }
}

/// Guesses the format of `source` from its content (and, for a directory or SQLite file,
/// from what it holds): the first lines of a file, never more than the line limit each.
pub fn detect(source: &Path, limits: &Limits) -> Result<Format, ReadError> {
    let meta = std::fs::metadata(source).map_err(|e| ReadError::Io {
        path: source.to_path_buf(),
        source: e,
    })?;
    if meta.is_dir() && !opencode::databases(source).is_empty() {
        return Ok(Format::Opencode);
    }
    if openclaw::is_sqlite(source)
        && opencode::sessions(source, &crate::sqlite::WaitBudget::per_database()).is_ok()
    {
        return Ok(Format::Opencode);
    }
    if meta.is_dir() || openclaw::is_sqlite(source) {
        return Ok(Format::Openclaw);
    }
    let mut lines = stream::Lines::open(source, limits)?;
    let mut seen = 0;
    while let Some(l) = lines.next_line()? {
        if let Some(f) = crate::format::detect(Some(l.bytes), b"", &source.to_string_lossy()) {
            return Ok(f);
        }
        seen += 1;
        if seen >= 8 {
            break;
        }
    }
    Err(ReadError::NotThisFormat {
        path: source.to_path_buf(),
        why: "not a session log of Lazarus, Claude Code, Codex, pi, OpenClaw, Gemini CLI or OpenCode (looked at its first lines); name the format with --from".into(),
    })
}

/// The text of content that is a string or an array of blocks: `{"type":"text","text":…}`
/// blocks, and `tool_reference` blocks (Claude Code's ToolSearch result: the tools it made
/// callable) as a line naming the tool, joined by `\n`. The second value names the type of
/// each block that is neither (an image, a document), for the reader to report as dropped.
pub(crate) fn text_content(v: &serde_json::Value) -> (String, Vec<String>) {
    match v {
        serde_json::Value::String(s) => (s.clone(), Vec::new()),
        serde_json::Value::Array(items) => {
            let mut out = Vec::new();
            let mut other = Vec::new();
            for i in items {
                if let Some(t) = i.get("text").and_then(|t| t.as_str()) {
                    out.push(t.to_string());
                } else if let Some(tool) = tool_reference(i) {
                    out.push(format!("[tool reference: {tool}]"));
                } else {
                    other.push(
                        i.get("type")
                            .and_then(|t| t.as_str())
                            .unwrap_or("untyped")
                            .to_string(),
                    );
                }
            }
            (out.join("\n"), other)
        }
        serde_json::Value::Null => (String::new(), Vec::new()),
        other => (other.to_string(), Vec::new()),
    }
}

/// The tool a `{"type":"tool_reference","tool_name":…}` block names.
fn tool_reference(block: &serde_json::Value) -> Option<&str> {
    if block.get("type").and_then(|t| t.as_str()) != Some("tool_reference") {
        return None;
    }
    block
        .get("tool_name")
        .or_else(|| block.get("name"))
        .and_then(|t| t.as_str())
}

/// How a reader reports content blocks it did not keep: `image`, `document` …
pub(crate) fn dropped_blocks(types: &[String]) -> String {
    let mut t: Vec<&str> = types.iter().map(String::as_str).collect();
    t.sort_unstable();
    t.dedup();
    t.join(", ")
}
