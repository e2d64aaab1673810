//! The record model of a Claude Code transcript, the one place its lines are understood: the
//! fields of a line, the message content blocks, the record types known to be bookkeeping,
//! and what a user line holds (text, tool results, a rejection). The classifier
//! (`classify::claude_code`) reads a tail through it, the reader (`formats::claude_code`) the
//! whole conversation.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

#[derive(Deserialize)]
pub struct Line<'a> {
    #[serde(rename = "type", default)]
    pub ty: String,
    #[serde(default)]
    pub subtype: Option<String>,
    #[serde(default)]
    pub uuid: Option<String>,
    #[serde(rename = "isSidechain", default)]
    pub is_sidechain: bool,
    #[serde(rename = "isMeta", default)]
    pub is_meta: bool,
    #[serde(rename = "isCompactSummary", default)]
    pub is_compact_summary: bool,
    #[serde(rename = "isApiErrorMessage", default)]
    pub is_api_error: bool,
    #[serde(rename = "apiErrorStatus", default)]
    pub api_error_status: Option<serde_json::Value>,
    #[serde(rename = "apiErrorType", default)]
    pub api_error_type: Option<String>,
    #[serde(default)]
    pub error: Option<serde_json::Value>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(rename = "sessionId", default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub entrypoint: Option<String>,
    #[serde(rename = "permissionMode", default)]
    pub permission_mode: Option<String>,
    #[serde(rename = "agentId", default)]
    pub agent_id: Option<String>,
    #[serde(rename = "toolUseResult", borrow, default)]
    pub tool_use_result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub message: Option<Msg<'a>>,
    #[serde(default)]
    pub timestamp: Option<String>,
}

#[derive(Deserialize)]
pub struct Msg<'a> {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(borrow, default)]
    pub content: Option<&'a RawValue>,
    #[serde(default)]
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub usage: Option<ApiUsage>,
}

/// An Anthropic API `usage` object.
#[derive(Deserialize, Clone, Default)]
pub struct ApiUsage {
    #[serde(default)]
    pub input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub struct Block<'a> {
    #[serde(rename = "type", default)]
    pub ty: String,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub tool_use_id: Option<String>,
    #[serde(default)]
    pub is_error: bool,
    #[serde(borrow, default)]
    pub text: Option<Cow<'a, str>>,
    /// `tool_result` content (string or blocks); a `Value` because untagged enums cannot
    /// hold borrowed raw values.
    #[serde(default)]
    pub content: Option<serde_json::Value>,
    /// `thinking` blocks' text.
    #[serde(borrow, default)]
    pub thinking: Option<Cow<'a, str>>,
    /// `tool_use` input.
    #[serde(default)]
    pub input: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum Content<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Blocks(#[serde(borrow)] Vec<Block<'a>>),
}

pub fn content(raw: Option<&RawValue>) -> Option<Content<'_>> {
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

/// Whether a raw line is bookkeeping that never decides anything, told from its first bytes
/// without parsing it (request shapes and blobs run to 40 KB, a prompt snapshot to 60 KB):
/// a line that starts `{"type":"T"` with T one of the types below, or one whose top-level
/// keys begin `parentUuid`, `isSidechain`, `attachment` (an `attachment` line). The
/// `permission-mode` and `api-request` records are not among them: the permission mode and
/// a request in flight are read from those.
pub fn is_idle_bookkeeping(raw: &[u8]) -> bool {
    const SKIP: &[&[u8]] = &[
        b"api-request-shape\"",
        b"api-request-blob\"",
        b"file-history-snapshot\"",
        b"queue-operation\"",
        b"last-prompt\"",
        b"cost-state\"",
        b"tools-used\"",
        b"atis-latch\"",
        b"mode\"",
        b"attachment\"",
    ];
    if let Some(rest) = raw.strip_prefix(b"{\"type\":\"") {
        return SKIP.iter().any(|t| rest.starts_with(t));
    }
    // {"parentUuid":"<id>" or null,"isSidechain":true|false,"attachment":
    let Some(rest) = raw.strip_prefix(b"{\"parentUuid\":") else {
        return false;
    };
    let rest = if let Some(r) = rest.strip_prefix(b"null") {
        r
    } else if let Some(r) = rest.strip_prefix(b"\"") {
        match memchr::memchr2(b'"', b'\\', r) {
            Some(i) if r[i] == b'"' => &r[i + 1..],
            _ => return false,
        }
    } else {
        return false;
    };
    let Some(rest) = rest.strip_prefix(b",\"isSidechain\":") else {
        return false;
    };
    let rest = rest
        .strip_prefix(b"false")
        .or_else(|| rest.strip_prefix(b"true"));
    rest.is_some_and(|r| r.starts_with(b",\"attachment\":"))
}

pub const INTERRUPT_MARKER: &str = "[Request interrupted by user";
pub const REJECT_TEXT: &str = "The user doesn't want to proceed";
pub const NOTIFICATION: &str = "<task-notification>";

/// What a user line holds.
pub struct UserInfo {
    pub text: String,
    pub results: Vec<String>,
    pub rejected: bool,
}

pub fn user_info(m: Option<&Msg>) -> UserInfo {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_bookkeeping_is_told_from_its_first_bytes_only_when_sure() {
        for l in [
            &br#"{"type":"api-request-shape","sessionId":"s"}"#[..],
            br#"{"type":"mode","mode":"x"}"#,
            br#"{"parentUuid":"a-b","isSidechain":false,"attachment":{"type":"x"}}"#,
            br#"{"parentUuid":null,"isSidechain":true,"attachment":{}}"#,
        ] {
            assert!(is_idle_bookkeeping(l), "{}", String::from_utf8_lossy(l));
        }
        for l in [
            &br#"{"type":"permission-mode","permissionMode":"plan"}"#[..],
            br#"{"type":"api-request","sessionId":"s"}"#,
            br#"{"type":"user","message":{}}"#,
            br#"{"parentUuid":"a","isSidechain":false,"message":{"attachment":1}}"#,
            br#"{"parentUuid":"a\"","isSidechain":false,"attachment":{}}"#,
            br#"{"isSidechain":false,"parentUuid":"a","attachment":{}}"#,
        ] {
            assert!(!is_idle_bookkeeping(l), "{}", String::from_utf8_lossy(l));
        }
    }
}
