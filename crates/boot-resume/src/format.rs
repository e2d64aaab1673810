//! The session log formats boot-resume understands, and telling them apart by their bytes.
//!
//! Its own module so that both the readers (`formats`) and the classifiers (`classify`) can
//! name a format without importing each other's parts: `formats` never imports `classify`.
use crate::lines;

/// The session log formats boot-resume understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Format {
    /// Native Lazarus ledger (`lazarus.session`).
    #[serde(rename = "lazarus")]
    Lazarus,
    /// OpenClaw transcripts (pi v3 shape plus sessions.json index facts).
    #[serde(rename = "openclaw")]
    Openclaw,
    /// pi coding agent session files.
    #[serde(rename = "pi")]
    Pi,
    /// Claude Code project transcripts.
    #[serde(rename = "claude-code")]
    ClaudeCode,
    /// Codex CLI rollouts.
    #[serde(rename = "codex")]
    Codex,
    /// Gemini CLI chat recordings (`~/.gemini/tmp/<project>/chats/session-*.jsonl`).
    #[serde(rename = "gemini-cli")]
    GeminiCli,
    /// OpenCode sessions (rows of its SQLite database, exported as JSON lines).
    #[serde(rename = "opencode")]
    Opencode,
}

impl Format {
    /// All formats, in the order they are scanned by default.
    pub const ALL: [Format; 7] = [
        Format::Lazarus,
        Format::Openclaw,
        Format::Pi,
        Format::ClaudeCode,
        Format::Codex,
        Format::GeminiCli,
        Format::Opencode,
    ];

    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Lazarus => "lazarus",
            Format::Openclaw => "openclaw",
            Format::Pi => "pi",
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::GeminiCli => "gemini-cli",
            Format::Opencode => "opencode",
        }
    }

    /// Parses a format name (`claude` is accepted for `claude-code`).
    pub fn parse(s: &str) -> Option<Format> {
        Some(match s {
            "lazarus" => Format::Lazarus,
            "openclaw" => Format::Openclaw,
            "pi" => Format::Pi,
            "claude-code" | "claude" => Format::ClaudeCode,
            "codex" => Format::Codex,
            "gemini-cli" | "gemini" => Format::GeminiCli,
            "opencode" => Format::Opencode,
            _ => return None,
        })
    }
}

/// Guesses the format of a file from its first line and a tail window.
/// Returns `None` when nothing looks like a known format.
pub fn detect(header: Option<&[u8]>, tail: &[u8], path_hint: &str) -> Option<Format> {
    let probe = |s: &[u8]| -> Option<Format> {
        if lines::contains(s, b"\"lazarus.session\"")
            || (lines::contains(s, b"\"seq\":") && lines::contains(s, b"\"kind\":"))
        {
            return Some(Format::Lazarus);
        }
        if lines::contains(s, b"\"type\":\"session_meta\"")
            || (lines::contains(s, b"\"payload\":") && lines::contains(s, b"\"timestamp\":"))
        {
            return Some(Format::Codex);
        }
        if lines::contains(s, b"\"projectHash\":")
            || (lines::contains(s, b"\"type\":\"gemini\"") && lines::contains(s, b"\"id\":"))
        {
            return Some(Format::GeminiCli);
        }
        if lines::contains(s, b"\"parentUuid\":") || lines::contains(s, b"\"sessionId\":\"") {
            return Some(Format::ClaudeCode);
        }
        if lines::contains(s, b"\"type\":\"session\"") || lines::contains(s, b"\"parentId\":") {
            let openclaw = path_hint.contains(".openclaw")
                || path_hint.contains(".clawdbot")
                || lines::contains(s, b"openclaw");
            return Some(if openclaw {
                Format::Openclaw
            } else {
                Format::Pi
            });
        }
        None
    };
    header.and_then(probe).or_else(|| {
        let t = lines::split(tail, false);
        t.lines.iter().rev().take(4).find_map(|l| probe(l))
    })
}
