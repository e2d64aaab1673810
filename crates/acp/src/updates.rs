//! What the editor is shown of a session: each durable record as ACP `session/update`s, the
//! same whether it happens now (a prompt's turn) or is replayed (`session/load`). A call cut
//! off by a crash is shown `failed`, with the words that say its effect is unknown — never
//! left `in_progress` for good.

use agent_client_protocol::v1::schema::SessionUpdate;
use agent_client_protocol::v1::schema::{
    Content, ContentBlock, ContentChunk, TextContent, ToolCall, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;

/// What the editor is told of a call cut off by a crash, before a resume settles it.
pub const CUT_OFF_NOTICE: &str = "This call was cut off by a crash while it ran: its effect is unknown (it may have run completely, partly, or not at all). Lazarus does not run it again unless it is idempotent; the model is told before it goes on.";

/// Longest title of a call, in characters.
const TITLE_CHARS_MAX: usize = 120;

fn text(s: impl Into<String>) -> ContentBlock {
    ContentBlock::Text(TextContent::new(s.into()))
}

/// An agent message chunk of `s`.
pub fn agent_text(s: impl Into<String>) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(text(s)))
}

/// A thought chunk of `s`.
pub fn agent_thought(s: impl Into<String>) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(ContentChunk::new(text(s)))
}

/// What kind of tool a call is, for the editor's icon.
fn kind_of(tool: &str) -> ToolKind {
    match tool {
        "shell" => ToolKind::Execute,
        "read_file" | "list_dir" => ToolKind::Read,
        "write_file" | "edit_file" => ToolKind::Edit,
        _ => ToolKind::Other,
    }
}

/// `shell: cargo test`, `edit_file: src/main.rs`, or the tool's name: the argument that
/// says what the call does, shortened.
pub fn title_of(tool: &str, arguments: &str) -> String {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let main = ["command", "path", "file", "url", "query"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str));
    let mut t = match main {
        Some(m) => format!("{tool}: {}", m.replace(['\n', '\r'], " ")),
        None => tool.to_string(),
    };
    if t.chars().count() > TITLE_CHARS_MAX {
        t = t.chars().take(TITLE_CHARS_MAX - 1).collect::<String>() + "…";
    }
    t
}

/// A call the model made, announced `pending`.
pub fn call_announced(call_id: &str, tool: &str, arguments: &str) -> SessionUpdate {
    let raw = serde_json::from_str::<Value>(arguments)
        .unwrap_or_else(|_| Value::String(arguments.to_string()));
    SessionUpdate::ToolCall(
        ToolCall::new(call_id.to_string(), title_of(tool, arguments))
            .kind(kind_of(tool))
            .status(ToolCallStatus::Pending)
            .raw_input(raw),
    )
}

/// A call's status changed (`content`: its result text, shown to the person).
pub fn call_status(call_id: &str, status: ToolCallStatus, content: Option<&str>) -> SessionUpdate {
    let mut fields = ToolCallUpdateFields::new().status(status);
    if let Some(c) = content {
        fields = fields.content(vec![ToolCallContent::Content(Content::new(text(c)))]);
    }
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call_id.to_string(), fields))
}

/// The status a recorded outcome shows.
fn outcome_status(status: &str) -> ToolCallStatus {
    if status == "ok" {
        ToolCallStatus::Completed
    } else {
        ToolCallStatus::Failed
    }
}

/// The words of a resume receipt, for the editor.
pub fn receipt_words(d: &Value) -> String {
    let n = |k: &str| d[k].as_u64().unwrap_or(0);
    let mut s = format!(
        "[Lazarus resumed this session ({}): {} call(s) reused, {} re-run, {} in doubt",
        d["trigger"].as_str().unwrap_or("?"),
        n("calls_reused"),
        n("calls_rerun"),
        n("calls_in_doubt")
    );
    for c in d["in_doubt"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "; {} ({}) not run again: {}",
            c["tool"].as_str().unwrap_or("?"),
            c["call_id"].as_str().unwrap_or("?"),
            c["why"].as_str().unwrap_or("?")
        ));
    }
    s.push_str(".]\n");
    s
}

/// Whether a receipt tells of a crash: calls re-run or in doubt, debris cut, an open turn.
fn notable(d: &Value) -> bool {
    let n = |k: &str| d[k].as_u64().unwrap_or(0);
    n("calls_rerun") + n("calls_in_doubt") + n("truncated_bytes") > 0 || !d["open_turn"].is_null()
}

/// What one record shows, as it happens (`live`: a turn running now, whose text and
/// reasoning were streamed already) or replayed.
pub fn of_record(kind: &str, data: &Value, live: bool) -> Vec<SessionUpdate> {
    let s = |k: &str| data[k].as_str().unwrap_or_default();
    match kind {
        "input" if !live => vec![SessionUpdate::UserMessageChunk(ContentChunk::new(text(s(
            "text",
        ))))],
        "response" => {
            let mut out = Vec::new();
            for item in data["items"].as_array().into_iter().flatten() {
                match item["type"].as_str() {
                    Some("text") if !live => {
                        out.push(agent_text(item["text"].as_str().unwrap_or_default()))
                    }
                    Some("reasoning" | "provider_reasoning") if !live => {
                        let t = item["text"].as_str().unwrap_or_default();
                        if !t.is_empty() {
                            out.push(agent_thought(t));
                        }
                    }
                    Some("tool_call") => out.push(call_announced(
                        item["call_id"].as_str().unwrap_or_default(),
                        item["name"].as_str().unwrap_or_default(),
                        item["arguments"].as_str().unwrap_or_default(),
                    )),
                    _ => {}
                }
            }
            if let Some(f) = data.get("failure").filter(|f| !f.is_null()) {
                out.push(agent_text(format!(
                    "[the model request failed: {}]",
                    f["message"].as_str().unwrap_or("?")
                )));
            }
            out
        }
        "tool_start" => vec![call_status(s("call_id"), ToolCallStatus::InProgress, None)],
        "tool_outcome" => vec![call_status(
            s("call_id"),
            outcome_status(s("status")),
            Some(s("result")),
        )],
        // a resume that settled something the person should know of: calls cut off, crash
        // debris, a turn asked again (a receipt after an approval says nothing new)
        "resume" if notable(data) => vec![agent_text(receipt_words(data))],
        "interrupted" if !live => vec![agent_text(format!("[stopped: {}]\n", s("reason")))],
        "needs_owner" => vec![agent_text(format!(
            "[left to its owner by {}: {}; resume it with: {}]\n",
            s("by"),
            s("reason"),
            s("resume_with")
        ))],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_says_what_the_call_does_in_one_short_line() {
        assert_eq!(
            title_of("shell", r#"{"command":"ls\n-la"}"#),
            "shell: ls -la"
        );
        assert_eq!(
            title_of("read_file", r#"{"path":"a.rs"}"#),
            "read_file: a.rs"
        );
        assert_eq!(title_of("mcp__x__y", "not json"), "mcp__x__y");
        let long = format!(r#"{{"command":"{}"}}"#, "x".repeat(500));
        assert_eq!(title_of("shell", &long).chars().count(), TITLE_CHARS_MAX);
    }
}
