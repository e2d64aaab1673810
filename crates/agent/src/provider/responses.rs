//! The OpenAI Responses API (`POST {base}/responses`): request bodies, the `response`
//! object, and stream assembly from `response.output_item.added` / `.done`,
//! `response.output_text.delta`, `response.reasoning_summary_text.delta`,
//! `response.function_call_arguments.delta`, `response.completed` / `.incomplete` /
//! `.failed` and `error` events.
//!
//! Requests are stateless (`store: false`): the whole context is sent each time, with
//! `include: ["reasoning.encrypted_content"]` so reasoning items come back encrypted. Each
//! `reasoning` item becomes an [`OutputItem::ProviderReasoning`] holding the item verbatim
//! and goes back in the next request's `input`, byte for byte.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::dialect::{Dialect, StreamAssembly};
use super::error::ProviderError;
use super::wire::{Delta, parse_object, snippet, split_known};
use crate::model::{Message, ModelRequest, ModelResponse, OutputItem, ToolCall, Usage};

/// The API name in [`OutputItem::ProviderReasoning::api`].
pub const API: &str = "responses";

/// Fields of a `response` object that only echo the request (instructions, tool schemas):
/// not kept in `provider_extra`, where they would repeat the request in every record.
const REQUEST_ECHO: &[&str] = &["instructions", "tools"];

/// The Responses JSON body for `req`. The first system message becomes `instructions`,
/// later ones `developer` messages. `extra` fields are added at top level without
/// overriding these.
pub fn request_body(req: &ModelRequest, extra: &Map<String, Value>) -> Value {
    let mut instructions: Option<&str> = None;
    let mut input = Vec::new();
    for m in &req.messages {
        match m {
            Message::System { content } => {
                if instructions.is_none() && input.is_empty() {
                    instructions = Some(content);
                } else {
                    input.push(json!({"type": "message", "role": "developer", "content": content}));
                }
            }
            Message::User { content } => {
                input.push(json!({"type": "message", "role": "user", "content": content}));
            }
            Message::Assistant {
                provider_items,
                text,
                tool_calls,
            } => {
                input.extend(
                    provider_items
                        .iter()
                        .filter(|p| p.api == API)
                        .map(|p| p.item.clone()),
                );
                if let Some(t) = text.as_ref().filter(|t| !t.is_empty()) {
                    input.push(json!({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": t}]}));
                }
                for c in tool_calls {
                    input.push(json!({"type": "function_call", "call_id": c.call_id,
                        "name": c.name, "arguments": c.arguments}));
                }
            }
            Message::Tool { call_id, content } => {
                input.push(
                    json!({"type": "function_call_output", "call_id": call_id, "output": content}),
                );
            }
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    if let Some(i) = instructions {
        body.insert("instructions".into(), json!(i));
    }
    body.insert("input".into(), Value::Array(input));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                    "parameters": t.parameters})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(m) = req.max_tokens {
        body.insert("max_output_tokens".into(), json!(m));
    }
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), json!(t));
    }
    body.insert("store".into(), json!(false));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    body.insert("stream".into(), json!(req.stream));
    for (k, v) in extra {
        body.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(body)
}

/// The usage object as [`Usage`] (`input_tokens` → `prompt_tokens`, `output_tokens` →
/// `completion_tokens`, `input_tokens_details.cached_tokens` → `cached_tokens`); the fields
/// with other names than Lazarus's stay in `extra` as sent.
fn usage(mut u: Map<String, Value>) -> Usage {
    let n = |u: &Map<String, Value>, k: &str| u.get(k).and_then(Value::as_u64);
    let cached = u
        .get("input_tokens_details")
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64);
    let total = u.remove("total_tokens").and_then(|v| v.as_u64());
    Usage {
        prompt_tokens: n(&u, "input_tokens"),
        completion_tokens: n(&u, "output_tokens"),
        total_tokens: total,
        cached_tokens: cached,
        extra: u,
    }
}

fn text_of_parts(parts: Option<&Value>, kind: &str) -> String {
    parts
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some(kind))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A `response` object (the non-streaming body, or the one `response.completed` carries)
/// as a [`ModelResponse`].
fn from_response(mut top: Map<String, Value>) -> Result<ModelResponse, ProviderError> {
    let status = top
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("completed")
        .to_string();
    if status == "failed" {
        return Err(api_error(top.get("error")));
    }
    for k in REQUEST_ECHO {
        top.remove(*k);
    }
    let mut known = split_known(&mut top, &["output", "usage", "model"]);
    let output = match known.remove("output") {
        Some(Value::Array(o)) => o,
        _ => {
            return Err(ProviderError::InvalidResponse {
                detail: "Responses object has no `output` array".into(),
            });
        }
    };
    let mut items = Vec::new();
    let mut other = Vec::new();
    for item in output {
        match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => {
                let mut text = text_of_parts(item.get("summary"), "summary_text");
                if text.is_empty() {
                    text = text_of_parts(item.get("content"), "reasoning_text");
                }
                items.push(OutputItem::ProviderReasoning {
                    api: API.into(),
                    text,
                    item,
                });
            }
            Some("message") => {
                let mut t = text_of_parts(item.get("content"), "output_text");
                if t.is_empty() {
                    t = item
                        .get("content")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p.get("refusal").and_then(Value::as_str))
                        .collect();
                }
                if !t.is_empty() {
                    items.push(OutputItem::Text { text: t });
                }
            }
            Some("function_call") => {
                let s = |k: &str| {
                    item.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                items.push(OutputItem::ToolCall(ToolCall {
                    call_id: s("call_id"),
                    name: s("name"),
                    arguments: s("arguments"),
                }));
            }
            // Built-in tool calls and items this build does not model are kept verbatim.
            _ => other.push(item),
        }
    }
    if !other.is_empty() {
        top.insert("other_output".into(), Value::Array(other));
    }
    let has_calls = items.iter().any(|i| matches!(i, OutputItem::ToolCall(_)));
    // The Responses API has no finish reason: the status says it, and for an incomplete
    // response `incomplete_details.reason` (`max_output_tokens`, `content_filter`).
    let stop_reason = match status.as_str() {
        "incomplete" => top
            .get("incomplete_details")
            .and_then(|d| d.get("reason"))
            .and_then(Value::as_str)
            .unwrap_or("incomplete")
            .to_string(),
        "completed" if has_calls => "tool_calls".into(),
        "completed" => "stop".into(),
        other => other.to_string(),
    };
    let usage = match known.remove("usage") {
        Some(Value::Object(u)) => Some(usage(u)),
        _ => None,
    };
    top.retain(|_, v| !v.is_null());
    Ok(ModelResponse {
        items,
        usage,
        stop_reason,
        model: known
            .remove("model")
            .and_then(|m| m.as_str().map(str::to_string)),
        provider_extra: top,
    })
}

/// An `error` object (`{"code": "server_error", "message": …}`) as an error.
fn api_error(e: Option<&Value>) -> ProviderError {
    let s = |k: &str| {
        e.and_then(|e| e.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    ProviderError::ApiError {
        kind: s("code")
            .or_else(|| s("type"))
            .unwrap_or_else(|| "error".into()),
        message: s("message")
            .map(|m| snippet(&m))
            .unwrap_or_else(|| e.map(|e| snippet(&e.to_string())).unwrap_or_default()),
    }
}

/// Parses a non-streaming Responses body.
pub fn parse_response(body: &[u8]) -> Result<ModelResponse, ProviderError> {
    let top = parse_object(body, "response body")?;
    if let Some(e) = top.get("error").filter(|e| !e.is_null())
        && top.get("output").is_none()
    {
        return Err(api_error(Some(e)));
    }
    from_response(top)
}

/// The OpenAI Responses API (`POST {base_url}/responses`).
#[derive(Debug, Clone, Copy)]
pub struct Responses;

impl Dialect for Responses {
    fn request_body(&self, req: &ModelRequest, extra: &Map<String, Value>) -> Value {
        request_body(req, extra)
    }

    fn parse_body(&self, body: &[u8]) -> Result<ModelResponse, ProviderError> {
        parse_response(body)
    }

    fn assembler(&self) -> Box<dyn StreamAssembly> {
        Box::new(ResponsesAssembler::new())
    }

    fn missing_end(&self) -> &'static str {
        "no response.completed"
    }
}

/// Assembles a Responses event stream into one response. The final `response.completed`
/// object is authoritative; the items assembled from the events stand in for its `output`
/// when it comes without one.
#[derive(Debug, Default)]
pub struct ResponsesAssembler {
    /// Items by output index: from `output_item.done`, or as far as assembled.
    items: BTreeMap<u64, Value>,
    last: Option<Map<String, Value>>,
    done: bool,
    events: u64,
}

impl ResponsesAssembler {
    pub fn new() -> Self {
        Self::default()
    }
}

impl StreamAssembly for ResponsesAssembler {
    /// True once the final event (`response.completed` or `response.incomplete`) was seen.
    fn is_done(&self) -> bool {
        self.done
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    fn events(&self) -> u64 {
        self.events
    }

    /// Applies one SSE event's data.
    fn push_event(&mut self, data: &str) -> Result<Vec<Delta>, ProviderError> {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(Vec::new());
        }
        let mut ev = parse_object(data.as_bytes(), "stream event")?;
        self.events += 1;
        let ty = ev
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let index = ev.get("output_index").and_then(Value::as_u64);
        let s = |ev: &Map<String, Value>, k: &str| {
            ev.get(k).and_then(Value::as_str).unwrap_or("").to_string()
        };
        let mut deltas = Vec::new();
        match ty.as_str() {
            "response.created" | "response.in_progress" => {
                if let Some(Value::Object(r)) = ev.remove("response") {
                    self.last = Some(r);
                }
            }
            "response.output_item.added" => {
                if let (Some(i), Some(item)) = (index, ev.remove("item")) {
                    if item.get("type").and_then(Value::as_str) == Some("function_call") {
                        deltas.push(Delta::ToolCallStart {
                            index: i,
                            name: s(item.as_object().unwrap_or(&Map::new()), "name"),
                        });
                    }
                    self.items.insert(i, item);
                }
            }
            "response.output_text.delta" => deltas.push(Delta::Text(s(&ev, "delta"))),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                deltas.push(Delta::Reasoning(s(&ev, "delta")))
            }
            "response.function_call_arguments.delta" => {
                if let Some(item) = index.and_then(|i| self.items.get_mut(&i))
                    && let Some(o) = item.as_object_mut()
                {
                    let piece = s(&ev, "delta");
                    match o.get_mut("arguments") {
                        Some(Value::String(a)) => a.push_str(&piece),
                        _ => {
                            o.insert("arguments".into(), Value::String(piece));
                        }
                    }
                }
            }
            "response.output_item.done" => {
                if let (Some(i), Some(item)) = (index, ev.remove("item")) {
                    self.items.insert(i, item);
                }
            }
            "response.completed" | "response.incomplete" => {
                if let Some(Value::Object(r)) = ev.remove("response") {
                    self.last = Some(r);
                }
                self.done = true;
            }
            "response.failed" => {
                let e = ev.get("response").and_then(|r| r.get("error")).cloned();
                return Err(api_error(e.as_ref()));
            }
            "error" => return Err(api_error(Some(&Value::Object(ev)))),
            _ => {} // part added/done, annotations, …: the items carry them
        }
        Ok(deltas)
    }

    /// The assembled response.
    fn finish(self: Box<Self>) -> Result<ModelResponse, ProviderError> {
        let mut top = self.last.unwrap_or_default();
        let empty = top
            .get("output")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if empty {
            top.insert(
                "output".into(),
                Value::Array(self.items.into_values().collect()),
            );
        }
        from_response(top)
    }
}
