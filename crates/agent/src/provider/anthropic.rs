//! The Anthropic Messages API (`POST {base}/v1/messages`): request bodies, the `message`
//! object, and stream assembly from `message_start`, `content_block_start` /
//! `content_block_delta` (`text_delta`, `thinking_delta`, `signature_delta`,
//! `input_json_delta`) / `content_block_stop`, `message_delta`, `message_stop`, `ping` and
//! `error` events.
//!
//! `thinking` blocks (with their `signature`) and `redacted_thinking` blocks become
//! [`OutputItem::ProviderReasoning`] holding the block verbatim, and go back first in the
//! assistant turn, byte for byte. Tool-use ids are kept as sent.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::dialect::{Dialect, StreamAssembly};
use super::error::ProviderError;
use super::wire::{Delta, parse_object, snippet, split_known};
use crate::model::{Message, ModelRequest, ModelResponse, OutputItem, ToolCall, Usage};

/// The API name in [`OutputItem::ProviderReasoning::api`].
pub const API: &str = "anthropic";

/// The `anthropic-version` header sent with every request.
pub const VERSION: &str = "2023-06-01";

/// `max_tokens` is required by the Messages API; this is sent when the request sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The Messages JSON body for `req`. System messages become `system`; consecutive messages
/// of one role are merged (the API wants user and assistant to alternate), tool results
/// become `tool_result` blocks of the user turn, empty text is left out (the API refuses
/// empty text blocks). `extra` fields are added at top level without overriding these.
pub fn request_body(req: &ModelRequest, extra: &Map<String, Value>) -> Value {
    let mut system: Vec<&str> = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, blocks: Vec<Value>| {
        if blocks.is_empty() {
            return;
        }
        match turns.last_mut() {
            Some((r, b)) if *r == role => b.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    };
    for m in &req.messages {
        match m {
            Message::System { content } => system.push(content),
            Message::User { content } => push("user", text_block(content)),
            Message::Tool { call_id, content } => push(
                "user",
                vec![json!({"type": "tool_result", "tool_use_id": call_id, "content": content})],
            ),
            Message::Assistant {
                provider_items,
                text,
                tool_calls,
            } => {
                let mut blocks: Vec<Value> = provider_items
                    .iter()
                    .filter(|p| p.api == API)
                    .map(|p| p.item.clone())
                    .collect();
                if let Some(t) = text {
                    blocks.extend(text_block(t));
                }
                for c in tool_calls {
                    blocks.push(json!({"type": "tool_use", "id": c.call_id, "name": c.name,
                        "input": tool_input(&c.arguments)}));
                }
                push("assistant", blocks);
            }
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert(
        "max_tokens".into(),
        json!(req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), json!(t));
    }
    body.insert("stream".into(), json!(req.stream));
    for (k, v) in extra {
        body.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(body)
}

fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "text", "text": text})]
    }
}

/// A tool call's arguments as the `input` object the API wants. Arguments the model cut off
/// (not a JSON object) go back as `{}`: the API refuses anything else, and the call's
/// result already says what went wrong.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

/// The provider's usage object as [`Usage`]: `prompt_tokens` counts every input token
/// (`input_tokens` plus cache reads and writes, which Anthropic counts apart),
/// `cached_tokens` the cache reads; the object itself stays in `extra` as sent.
fn usage(u: &Map<String, Value>) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64);
    let input = n("input_tokens");
    let prompt = input.map(|i| {
        i + n("cache_read_input_tokens").unwrap_or(0)
            + n("cache_creation_input_tokens").unwrap_or(0)
    });
    let output = n("output_tokens");
    Usage {
        prompt_tokens: prompt,
        completion_tokens: output,
        total_tokens: match (prompt, output) {
            (Some(p), Some(o)) => Some(p + o),
            _ => None,
        },
        cached_tokens: n("cache_read_input_tokens"),
        extra: u.clone(),
    }
}

/// One content block as the items it yields.
fn block_items(block: Value, items: &mut Vec<OutputItem>, other: &mut Vec<Value>) {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => {
            let t = block.get("text").and_then(Value::as_str).unwrap_or("");
            if !t.is_empty() {
                items.push(OutputItem::Text { text: t.into() });
            }
        }
        Some("thinking") | Some("redacted_thinking") => {
            let text = block
                .get("thinking")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            items.push(OutputItem::ProviderReasoning {
                api: API.into(),
                text,
                item: block,
            });
        }
        Some("tool_use") => {
            let arguments = match block.get("input") {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => "{}".into(),
            };
            items.push(OutputItem::ToolCall(ToolCall {
                call_id: block.get("id").and_then(Value::as_str).unwrap_or("").into(),
                name: block
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
                arguments,
            }));
        }
        // Server tools, citations and blocks this build does not model are kept verbatim.
        _ => other.push(block),
    }
}

/// A `message` object (the whole non-streaming body) as a [`ModelResponse`].
fn from_message(mut top: Map<String, Value>) -> Result<ModelResponse, ProviderError> {
    if top.get("type").and_then(Value::as_str) == Some("error") {
        return Err(api_error(top.get("error")));
    }
    let mut known = split_known(
        &mut top,
        &["content", "usage", "model", "stop_reason", "role", "type"],
    );
    let content = match known.remove("content") {
        Some(Value::Array(c)) => c,
        _ => {
            return Err(ProviderError::InvalidResponse {
                detail: "Anthropic message has no `content` array".into(),
            });
        }
    };
    let mut items = Vec::new();
    let mut other = Vec::new();
    for b in content {
        block_items(b, &mut items, &mut other);
    }
    if !other.is_empty() {
        top.insert("other_content".into(), Value::Array(other));
    }
    let usage = match known.remove("usage") {
        Some(Value::Object(u)) => Some(usage(&u)),
        _ => None,
    };
    Ok(ModelResponse {
        items,
        usage,
        stop_reason: known
            .remove("stop_reason")
            .and_then(|s| s.as_str().map(str::to_string))
            .unwrap_or_default(),
        model: known
            .remove("model")
            .and_then(|s| s.as_str().map(str::to_string)),
        provider_extra: top,
    })
}

/// An `error` object (`{"type": "overloaded_error", "message": …}`) as an error.
fn api_error(e: Option<&Value>) -> ProviderError {
    ProviderError::ApiError {
        kind: e
            .and_then(|e| e.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("error")
            .to_string(),
        message: e
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .map(snippet)
            .unwrap_or_else(|| e.map(|e| snippet(&e.to_string())).unwrap_or_default()),
    }
}

/// Parses a non-streaming Messages response body.
pub fn parse_message(body: &[u8]) -> Result<ModelResponse, ProviderError> {
    from_message(parse_object(body, "response body")?)
}

/// The Anthropic Messages API (`POST {base_url}/v1/messages`).
#[derive(Debug, Clone, Copy)]
pub struct Anthropic;

impl Dialect for Anthropic {
    fn request_body(&self, req: &ModelRequest, extra: &Map<String, Value>) -> Value {
        request_body(req, extra)
    }

    fn parse_body(&self, body: &[u8]) -> Result<ModelResponse, ProviderError> {
        parse_message(body)
    }

    fn assembler(&self) -> Box<dyn StreamAssembly> {
        Box::new(AnthropicAssembler::new())
    }

    /// `x-api-key` instead of a bearer token, and the API version every request names.
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        api_key: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let request = request.header("anthropic-version", VERSION);
        match api_key {
            Some(key) => request.header("x-api-key", key),
            None => request,
        }
    }

    fn missing_end(&self) -> &'static str {
        "no stop_reason and no message_stop"
    }
}

/// A content block being streamed.
#[derive(Debug)]
struct Block {
    block: Map<String, Value>,
    /// `input_json_delta` pieces of a `tool_use` block, joined.
    partial_json: Option<String>,
}

/// Assembles a Messages event stream into one response.
#[derive(Debug, Default)]
pub struct AnthropicAssembler {
    message: Option<Map<String, Value>>,
    blocks: BTreeMap<u64, Block>,
    usage: Map<String, Value>,
    stop_reason: Option<String>,
    delta_extra: Map<String, Value>,
    done: bool,
    events: u64,
}

impl AnthropicAssembler {
    pub fn new() -> Self {
        Self::default()
    }
}

impl StreamAssembly for AnthropicAssembler {
    /// True once `message_stop` was seen.
    fn is_done(&self) -> bool {
        self.done
    }

    /// True once the response is whole: `message_stop`, or a `message_delta` with its
    /// `stop_reason` (the connection may break before `message_stop`).
    fn is_complete(&self) -> bool {
        self.done || self.stop_reason.is_some()
    }

    fn events(&self) -> u64 {
        self.events
    }

    /// Applies one SSE event's data.
    fn push_event(&mut self, data: &str) -> Result<Vec<Delta>, ProviderError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let mut ev = parse_object(data.as_bytes(), "stream event")?;
        self.events += 1;
        let ty = ev
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut deltas = Vec::new();
        match ty.as_str() {
            "message_start" => {
                if let Some(Value::Object(mut m)) = ev.remove("message") {
                    if let Some(Value::Object(u)) = m.remove("usage") {
                        self.usage = u;
                    }
                    m.remove("content");
                    self.message = Some(m);
                }
            }
            "content_block_start" => {
                let index = index_of(&ev)?;
                let Some(Value::Object(block)) = ev.remove("content_block") else {
                    return Err(ProviderError::InvalidResponse {
                        detail: "`content_block_start` without a `content_block`".into(),
                    });
                };
                let is_tool = block.get("type").and_then(Value::as_str) == Some("tool_use");
                if is_tool {
                    deltas.push(Delta::ToolCallStart {
                        index,
                        name: block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .into(),
                    });
                }
                self.blocks.insert(
                    index,
                    Block {
                        block,
                        partial_json: is_tool.then(String::new),
                    },
                );
            }
            "content_block_delta" => {
                let index = index_of(&ev)?;
                let Some(b) = self.blocks.get_mut(&index) else {
                    return Err(ProviderError::InvalidResponse {
                        detail: format!("`content_block_delta` for block {index}, never started"),
                    });
                };
                let delta = ev.get("delta").cloned().unwrap_or(Value::Null);
                let s = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or("");
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        append(&mut b.block, "text", s("text"));
                        deltas.push(Delta::Text(s("text").into()));
                    }
                    Some("thinking_delta") => {
                        append(&mut b.block, "thinking", s("thinking"));
                        deltas.push(Delta::Reasoning(s("thinking").into()));
                    }
                    Some("signature_delta") => append(&mut b.block, "signature", s("signature")),
                    Some("input_json_delta") => {
                        b.partial_json
                            .get_or_insert_with(String::new)
                            .push_str(s("partial_json"));
                    }
                    Some("citations_delta") => {
                        if let Some(c) = delta.get("citation") {
                            let list = b
                                .block
                                .entry("citations")
                                .or_insert_with(|| Value::Array(Vec::new()));
                            if let Value::Array(l) = list {
                                l.push(c.clone());
                            }
                        }
                    }
                    _ => {
                        // A delta this build does not know: kept on the block, verbatim.
                        let list = b
                            .block
                            .entry("unknown_deltas")
                            .or_insert_with(|| Value::Array(Vec::new()));
                        if let Value::Array(l) = list {
                            l.push(delta.clone());
                        }
                    }
                }
            }
            "content_block_stop" | "ping" => {}
            "message_delta" => {
                if let Some(Value::Object(mut d)) = ev.remove("delta") {
                    if let Some(Value::String(r)) = d.remove("stop_reason") {
                        self.stop_reason = Some(r);
                    }
                    for (k, v) in d {
                        if !v.is_null() {
                            self.delta_extra.insert(k, v);
                        }
                    }
                }
                // Usage here is cumulative: it replaces what message_start said.
                if let Some(Value::Object(u)) = ev.remove("usage") {
                    for (k, v) in u {
                        if !v.is_null() {
                            self.usage.insert(k, v);
                        }
                    }
                }
            }
            "message_stop" => self.done = true,
            "error" => return Err(api_error(ev.get("error"))),
            _ => {} // new event types are ignored, as the API asks of clients
        }
        Ok(deltas)
    }

    /// The assembled response.
    fn finish(self: Box<Self>) -> Result<ModelResponse, ProviderError> {
        let mut top = self.message.unwrap_or_default();
        let mut content = Vec::new();
        for (_, b) in self.blocks {
            let mut block = b.block;
            if let Some(json) = b.partial_json {
                // The arguments exactly as streamed (possibly cut off); the runner keeps text.
                block.insert(
                    "input".into(),
                    if json.is_empty() {
                        json!({})
                    } else {
                        Value::String(json)
                    },
                );
            }
            content.push(Value::Object(block));
        }
        top.insert("content".into(), Value::Array(content));
        if let Some(r) = self.stop_reason {
            top.insert("stop_reason".into(), Value::String(r));
        }
        top.insert("usage".into(), Value::Object(self.usage));
        for (k, v) in self.delta_extra {
            top.insert(k, v);
        }
        top.retain(|_, v| !v.is_null());
        from_message(top)
    }
}

fn index_of(ev: &Map<String, Value>) -> Result<u64, ProviderError> {
    ev.get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| ProviderError::InvalidResponse {
            detail: "a content block event without an `index`".into(),
        })
}

fn append(block: &mut Map<String, Value>, key: &str, piece: &str) {
    match block.get_mut(key) {
        Some(Value::String(s)) => s.push_str(piece),
        _ => {
            block.insert(key.into(), Value::String(piece.into()));
        }
    }
}
