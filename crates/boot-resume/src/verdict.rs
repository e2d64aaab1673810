//! Verdicts, skip reasons and the result of classifying one session tail.
use serde::{Serialize, Serializer};
use std::fmt;

/// Why a session was not classified for resumption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipWhy {
    /// A sub-agent session: its parent owns it.
    Subagent,
    /// A cron / scheduled run.
    Cron,
    /// A heartbeat turn or heartbeat session.
    Heartbeat,
    /// An ACP / hook / explicit model-run session owned by another program path.
    ForeignOwned,
    /// Last activity is older than the recency window.
    OutsideWindow,
    /// The session name matches `--skip-pattern`.
    SkipPattern,
    /// We already injected a resume for exactly this tail.
    AlreadyResumed,
    /// The maximum number of attempts for this interruption was reached.
    MaxAttempts,
    /// The last resume of this interruption failed for a reason retrying cannot fix.
    PermanentFailure,
    /// The owning agent recovers this session itself.
    SelfRecovering,
    /// Owned by an SDK / IDE / MCP client, not an interactive agent.
    SdkOwned,
    /// A live process still writes this session.
    Running,
    /// The file could not be read or holds no parsable record.
    Unreadable,
    /// The file holds no meaningful record (empty or header only).
    Empty,
    /// The last input is trivial ("ok", "thanks", a greeting).
    TrivialInput,
    /// Not a live transcript (trajectory, checkpoint, archive...).
    NotATranscript,
}

impl SkipWhy {
    /// The snake_case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipWhy::Subagent => "subagent",
            SkipWhy::Cron => "cron",
            SkipWhy::Heartbeat => "heartbeat",
            SkipWhy::ForeignOwned => "foreign_owned",
            SkipWhy::OutsideWindow => "outside_window",
            SkipWhy::SkipPattern => "skip_pattern",
            SkipWhy::AlreadyResumed => "already_resumed",
            SkipWhy::MaxAttempts => "max_attempts",
            SkipWhy::PermanentFailure => "permanent_failure",
            SkipWhy::SelfRecovering => "self_recovering",
            SkipWhy::SdkOwned => "sdk_owned",
            SkipWhy::Running => "running",
            SkipWhy::Unreadable => "unreadable",
            SkipWhy::Empty => "empty",
            SkipWhy::TrivialInput => "trivial_input",
            SkipWhy::NotATranscript => "not_a_transcript",
        }
    }
}

/// What the tail of a session says about how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The last turn ended normally.
    Finished,
    /// User input nobody answered.
    PendingInput,
    /// A tool call was issued and has no result; its side effects are unknown.
    InterruptedToolCall,
    /// A tool result was recorded but the model never saw it.
    InterruptedAfterToolResult,
    /// A model response was being streamed (or requested) when the process died.
    InterruptedStream,
    /// An API error ended the turn.
    Failed {
        /// Whether the error looks transient (429, 5xx, overloaded, network).
        transient: bool,
    },
    /// Parked on purpose, waiting for something external (e.g. sub-agents).
    WaitingExternal,
    /// The user stopped the turn.
    UserStopped,
    /// Written in a format version this build does not read (the version seen is in
    /// [`Classification::seen_version`]): never guessed into another verdict.
    UnknownFormat,
    /// Not considered, and why.
    Skipped(SkipWhy),
}

impl Verdict {
    /// The snake_case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Finished => "finished",
            Verdict::PendingInput => "pending_input",
            Verdict::InterruptedToolCall => "interrupted_tool_call",
            Verdict::InterruptedAfterToolResult => "interrupted_after_tool_result",
            Verdict::InterruptedStream => "interrupted_stream",
            Verdict::Failed { .. } => "failed",
            Verdict::WaitingExternal => "waiting_external",
            Verdict::UserStopped => "user_stopped",
            Verdict::UnknownFormat => "unknown_format",
            Verdict::Skipped(_) => "skipped",
        }
    }

    /// Whether a resume should be injected for this verdict.
    pub fn is_resumable(self, resume_failed_transient: bool) -> bool {
        match self {
            Verdict::PendingInput
            | Verdict::InterruptedToolCall
            | Verdict::InterruptedAfterToolResult
            | Verdict::InterruptedStream => true,
            Verdict::Failed { transient } => transient && resume_failed_transient,
            _ => false,
        }
    }

    /// The skip reason, if skipped.
    pub fn skip_why(self) -> Option<SkipWhy> {
        match self {
            Verdict::Skipped(w) => Some(w),
            _ => None,
        }
    }

    /// The transient flag, if failed.
    pub fn transient(self) -> Option<bool> {
        match self {
            Verdict::Failed { transient } => Some(transient),
            _ => None,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Failed { transient: true } => f.write_str("failed (transient)"),
            Verdict::Skipped(w) => write!(f, "skipped ({})", w.as_str()),
            v => f.write_str(v.as_str()),
        }
    }
}

impl Serialize for Verdict {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The result of classifying one session tail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Classification {
    /// The verdict.
    pub verdict: Verdict,
    /// Human-readable why, naming the deciding record.
    pub reason: String,
    /// The last line of the file was torn (no newline or unparsable) and was ignored.
    pub torn: bool,
    /// Id of the last complete record (uuid, entry id, seq or timestamp), for fingerprints.
    pub last_record_id: Option<String>,
    /// Session id, if the tail or header names one.
    pub session_id: Option<String>,
    /// Working directory of the session, if known.
    pub cwd: Option<String>,
    /// The permission mode the session ran in (Claude Code `permissionMode`), so a resume
    /// can run the same way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    /// For `unknown_format`: the version the file (or database) names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seen_version: Option<String>,
    /// The tool calls that were running when the session was cut off, as the session
    /// recorded them (`bash {"command":…} (call call01)`), joined by `; `, or what is known
    /// when none was recorded; the resume message names them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted_call: Option<String>,
    /// The same calls, one by one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interrupted_calls: Vec<InterruptedCall>,
    /// The deciding record lies before the window: read a larger tail and classify again.
    #[serde(skip)]
    pub need_more: bool,
}

impl Classification {
    /// An `unknown_format` classification naming what was seen.
    pub fn unknown_format(what: &str, version: impl Into<String>, known: &str) -> Self {
        let version = version.into();
        let mut c = Classification::new(
            Verdict::UnknownFormat,
            format!(
                "{what} {version:?} is not one this build reads ({known}); upgrade Lazarus to judge it"
            ),
        );
        c.seen_version = Some(version);
        c
    }

    /// A classification with the given verdict and reason and nothing else known.
    pub fn new(verdict: Verdict, reason: impl Into<String>) -> Self {
        Classification {
            verdict,
            reason: reason.into(),
            torn: false,
            last_record_id: None,
            session_id: None,
            cwd: None,
            permission_mode: None,
            seen_version: None,
            interrupted_call: None,
            interrupted_calls: Vec::new(),
            need_more: false,
        }
    }

    /// Records the calls that were running (their descriptions in `interrupted_call`).
    pub fn set_interrupted(&mut self, calls: Vec<InterruptedCall>) {
        self.interrupted_call = (!calls.is_empty()).then(|| {
            calls
                .iter()
                .map(InterruptedCall::describe)
                .collect::<Vec<_>>()
                .join("; ")
        });
        self.interrupted_calls = calls;
    }
}

/// Longest argument summary kept for an interrupted call, in characters.
pub const ARGUMENTS_SUMMARY_CHARS: usize = 200;

/// A tool call that was running when a session was cut off, as the session recorded it: what
/// a resume must name, because its effect is unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InterruptedCall {
    /// The tool as the model called it (`Bash`, `mcp__side__bump`).
    pub tool: String,
    /// The MCP server that provides the tool, when its name says so (`mcp__<server>__<tool>`,
    /// the form Claude Code names MCP tools in and Codex's `namespace` + `name` make).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_server: Option<String>,
    /// Its arguments, as compact JSON (or the recorded text), cut to
    /// [`ARGUMENTS_SUMMARY_CHARS`] characters.
    pub arguments: String,
    /// The call's id in the session, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

impl InterruptedCall {
    /// A call of `tool` with `arguments` (a JSON value; a string holding JSON, as Codex
    /// records arguments, is read as the JSON it holds).
    pub fn new(tool: &str, arguments: Option<&serde_json::Value>, id: Option<&str>) -> Self {
        let text = match arguments {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(s)) => {
                match serde_json::from_str::<serde_json::Value>(s) {
                    Ok(v) if v.is_object() || v.is_array() => v.to_string(),
                    _ => s.clone(),
                }
            }
            Some(v) => v.to_string(),
        };
        let tool = if tool.is_empty() { "a tool" } else { tool };
        InterruptedCall {
            tool: tool.to_string(),
            mcp_server: mcp_server_of(tool),
            arguments: summary(&text),
            id: id.filter(|i| !i.is_empty()).map(str::to_string),
        }
    }

    /// One line naming the call: `mcp__side__bump {"sleep_secs":300} (call toolu_01, MCP
    /// server side)`.
    pub fn describe(&self) -> String {
        let mut out = self.tool.clone();
        if !self.arguments.is_empty() {
            out.push(' ');
            out.push_str(&self.arguments);
        }
        let mut notes = Vec::new();
        if let Some(id) = &self.id {
            notes.push(format!("call {id}"));
        }
        if let Some(s) = &self.mcp_server {
            notes.push(format!("MCP server {s}"));
        }
        if !notes.is_empty() {
            out.push_str(&format!(" ({})", notes.join(", ")));
        }
        out
    }
}

/// `side` for `mcp__side__bump`.
fn mcp_server_of(tool: &str) -> Option<String> {
    let rest = tool.strip_prefix("mcp__")?;
    let (server, name) = rest.split_once("__")?;
    (!server.is_empty() && !name.is_empty()).then(|| server.to_string())
}

/// Text on one line, at most [`ARGUMENTS_SUMMARY_CHARS`] characters (`…` marks a cut).
fn summary(text: &str) -> String {
    let one_line: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= ARGUMENTS_SUMMARY_CHARS {
        return one_line;
    }
    let mut out: String = one_line.chars().take(ARGUMENTS_SUMMARY_CHARS).collect();
    out.push('…');
    out
}

/// Facts about a session that do not come from the tail bytes.
#[derive(Debug, Clone, Default)]
pub struct SessionMeta<'a> {
    /// The header line, if it was read separately and is complete: the first line of the
    /// file, or for Claude Code the first line that names an `entrypoint` (the session's
    /// creator).
    pub header: Option<&'a [u8]>,
    /// The tail window starts at byte 0 of the file (the whole file is in the window).
    pub at_start: bool,
    /// The window is as large as it may get: decide with what is there.
    pub at_cap: bool,
    /// File name (no directory), used for ids encoded in names.
    pub file_name: &'a str,
    /// Whether the path looks like a sub-agent transcript (e.g. `subagents/agent-*.jsonl`).
    pub subagent_path: bool,
    /// OpenClaw index entry facts, when the file was found through sessions.json.
    pub index: Option<&'a IndexFacts>,
    /// Sub-agent transcripts exist beside the session (Claude Code `<id>/subagents/`), so a
    /// finished tail is checked for background agents that never reported back over the
    /// whole file, not just the first window.
    pub has_subagents: bool,
}

/// What an OpenClaw sessions.json entry (or SQLite `sessions` row) says about a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IndexFacts {
    /// The session key (e.g. `agent:main:telegram:direct:123`).
    pub session_key: Option<String>,
    /// The session id.
    pub session_id: Option<String>,
    /// `status` field.
    pub status: Option<String>,
    /// `abortedLastRun`.
    pub aborted_last_run: bool,
    /// `restartRecoveryRuns` or a recovery idempotency key is present.
    pub restart_recovery: bool,
    /// `spawnDepth > 0` or `subagentRole` / `spawnedBy` set.
    pub spawned: bool,
    /// `updatedAt` in ms since the epoch.
    pub updated_at_ms: Option<i64>,
    /// `createdVia` (`run` for a gateway run; embedded `agent --local` runs write none).
    pub created_via: Option<String>,
    /// Owned by ACP or a plugin (`session_windows.acp_owned` / `plugin_owner_id`).
    pub foreign_owned: bool,
    /// Read from the SQLite store (OpenClaw 2026.9+), whose gateway recovery is known.
    pub sqlite: bool,
}

impl IndexFacts {
    /// Whether the index says the run died (status running, or abortedLastRun).
    pub fn run_died(&self) -> bool {
        self.aborted_last_run || self.status.as_deref() == Some("running")
    }

    /// Whether OpenClaw's own gateway restart recovery owns this session: the gateway marks
    /// the runs it executes `status: "running"` and resumes exactly those after a restart.
    /// An embedded (`agent --local`) run leaves no status, and nobody but us resumes it.
    pub fn gateway_recovers(&self) -> bool {
        self.sqlite && self.status.as_deref() == Some("running")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_interrupted_call_names_its_tool_server_arguments_and_id() {
        let c = InterruptedCall::new(
            "mcp__side__bump",
            Some(&json!({"sleep_secs": 300})),
            Some("t1"),
        );
        assert_eq!(c.mcp_server.as_deref(), Some("side"));
        assert_eq!(
            c.describe(),
            r#"mcp__side__bump {"sleep_secs":300} (call t1, MCP server side)"#
        );
        // Codex records arguments as a string of JSON: read as the JSON it holds
        let c = InterruptedCall::new("bash", Some(&json!("{\"command\": \"ls\"}")), None);
        assert_eq!(c.describe(), r#"bash {"command":"ls"}"#);
        assert_eq!(c.mcp_server, None);
        // not an MCP name: no server
        for t in ["mcp__", "mcp__x", "mcp____y", "Bash"] {
            assert_eq!(InterruptedCall::new(t, None, None).mcp_server, None, "{t}");
        }
        // long arguments are cut, on one line
        let long = "x\ny".repeat(500);
        let c = InterruptedCall::new("t", Some(&json!(long)), None);
        assert_eq!(c.arguments.chars().count(), ARGUMENTS_SUMMARY_CHARS + 1);
        assert!(c.arguments.ends_with('…') && !c.arguments.contains('\n'));
    }
}
