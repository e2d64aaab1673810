//! What a server sends back, as Lazarus keeps it: a tool listing reduced to what the model
//! and the re-run rule need, and a call's result as the text the model sees (within
//! [`RESULT_BYTES_MAX`], the cut said).

use rmcp::model::{CallToolResult, Tool};
use serde_json::{Map, Value};

/// A tool as the server lists it (what Lazarus uses of it).
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub description: String,
    pub input_schema: Map<String, Value>,
    /// `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`, as given (absent
    /// ones absent: the spec's defaults apply).
    pub annotations: Map<String, Value>,
}

/// Largest result text kept from one call, in bytes; the rest is cut, and the cut is said.
pub const RESULT_BYTES_MAX: usize = 1024 * 1024;

/// A call's result as text: text blocks as they are, other blocks named, structured content
/// only when there is no text at all (the spec asks servers to send its text form too).
pub fn render(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in &result.content {
        let v = serde_json::to_value(block).unwrap_or(Value::Null);
        match v["type"].as_str() {
            Some("text") => parts.push(v["text"].as_str().unwrap_or("").to_string()),
            Some("image") | Some("audio") => parts.push(format!(
                "[{} content, {}; not shown]",
                v["type"].as_str().unwrap_or("binary"),
                v["mimeType"].as_str().unwrap_or("unknown type")
            )),
            Some("resource") => parts.push(
                v["resource"]["text"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("[resource {}]", v["resource"]["uri"])),
            ),
            Some("resource_link") => parts.push(format!("[resource link {}]", v["uri"])),
            _ => parts.push(v.to_string()),
        }
    }
    if let Some(s) = &result.structured_content
        && parts.is_empty()
    {
        parts.push(s.to_string());
    }
    cut(parts.join("\n"))
}

/// A tool as Lazarus keeps it: its annotations as given (hints only).
pub fn listed(t: Tool) -> ListedTool {
    let annotations = match t.annotations.as_ref().map(serde_json::to_value) {
        Some(Ok(Value::Object(mut m))) => {
            m.retain(|k, _| {
                matches!(
                    k.as_str(),
                    "readOnlyHint" | "destructiveHint" | "idempotentHint" | "openWorldHint"
                )
            });
            m
        }
        _ => Map::new(),
    };
    ListedTool {
        name: t.name.to_string(),
        description: t.description.as_deref().unwrap_or_default().to_string(),
        input_schema: (*t.input_schema).clone(),
        annotations,
    }
}

/// The first 200 bytes of `text`, for messages.
pub fn snippet(text: &str) -> String {
    let mut end = text.len().min(200);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if end < text.len() {
        format!("{}…", &text[..end])
    } else {
        text.to_string()
    }
}

/// `text` within [`RESULT_BYTES_MAX`], the cut said.
fn cut(mut text: String) -> String {
    if text.len() <= RESULT_BYTES_MAX {
        return text;
    }
    let total = text.len();
    let mut end = RESULT_BYTES_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!(
        "\n[Lazarus: the result was {total} bytes; cut to the first {end}]"
    ));
    text
}
