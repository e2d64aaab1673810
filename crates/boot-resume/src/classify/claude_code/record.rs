//! The record model of a Claude Code transcript: the fields of a line this classifier reads,
//! the message content blocks, the record types known to be bookkeeping, and what a user
//! line holds (text, tool results, a rejection).

use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

#[derive(Deserialize)]
pub(super) struct Line<'a> {
    #[serde(rename = "type", default)]
    pub(super) ty: String,
    #[serde(default)]
    pub(super) subtype: Option<String>,
    #[serde(default)]
    pub(super) uuid: Option<String>,
    #[serde(rename = "isSidechain", default)]
    pub(super) is_sidechain: bool,
    #[serde(rename = "isMeta", default)]
    pub(super) is_meta: bool,
    #[serde(rename = "isCompactSummary", default)]
    pub(super) is_compact_summary: bool,
    #[serde(rename = "isApiErrorMessage", default)]
    pub(super) is_api_error: bool,
    #[serde(rename = "apiErrorStatus", default)]
    pub(super) api_error_status: Option<serde_json::Value>,
    #[serde(rename = "apiErrorType", default)]
    pub(super) api_error_type: Option<String>,
    #[serde(default)]
    pub(super) error: Option<serde_json::Value>,
    #[serde(default)]
    pub(super) cwd: Option<String>,
    #[serde(rename = "sessionId", default)]
    pub(super) session_id: Option<String>,
    #[serde(default)]
    pub(super) version: Option<String>,
    #[serde(default)]
    pub(super) entrypoint: Option<String>,
    #[serde(rename = "permissionMode", default)]
    pub(super) permission_mode: Option<String>,
    #[serde(rename = "agentId", default)]
    pub(super) agent_id: Option<String>,
    #[serde(rename = "toolUseResult", borrow, default)]
    pub(super) tool_use_result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(super) message: Option<Msg<'a>>,
}

#[derive(Deserialize)]
pub(super) struct Msg<'a> {
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(borrow, default)]
    pub(super) content: Option<&'a RawValue>,
    #[serde(default)]
    pub(super) stop_reason: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct Block<'a> {
    #[serde(rename = "type", default)]
    pub(super) ty: String,
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) tool_use_id: Option<String>,
    #[serde(default)]
    pub(super) is_error: bool,
    #[serde(borrow, default)]
    pub(super) text: Option<Cow<'a, str>>,
    /// `tool_result` content (string or blocks); a `Value` because untagged enums cannot
    /// hold borrowed raw values.
    #[serde(default)]
    pub(super) content: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Content<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Blocks(#[serde(borrow)] Vec<Block<'a>>),
}

pub(super) fn content(raw: Option<&RawValue>) -> Option<Content<'_>> {
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

pub(super) const INTERRUPT_MARKER: &str = "[Request interrupted by user";
const REJECT_TEXT: &str = "The user doesn't want to proceed";
pub(super) const NOTIFICATION: &str = "<task-notification>";

/// What a user line holds.
pub(super) struct UserInfo {
    pub(super) text: String,
    pub(super) results: Vec<String>,
    pub(super) rejected: bool,
}

pub(super) fn user_info(m: Option<&Msg>) -> UserInfo {
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
