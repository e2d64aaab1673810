//! The Anthropic Messages API (`POST /v1/messages`): request normalisation for matching, and
//! replies in the shapes the real API sends — a `message` object, or SSE with
//! `message_start`, `content_block_start` / `content_block_delta` (`thinking_delta`,
//! `signature_delta`, `text_delta`, `input_json_delta`) / `content_block_stop`, `ping`,
//! `message_delta`, `message_stop`, and `error`.
use serde_json::{Map, Value, json};

use crate::script::ScriptedResponse;
use crate::sse::SseEvent;

/// A chat-completions-shaped view of a Messages request, so [`crate::When`] rules apply
/// unchanged: `system` becomes a system message, `tool_use` blocks become `tool_calls`, and
/// each `tool_result` block becomes a `tool` message placed after the user text of the same
/// turn (Claude Code puts `<system-reminder>` text beside tool results).
pub fn normalize(req: &Value) -> Value {
    let mut messages = Vec::new();
    match req.get("system") {
        Some(Value::String(s)) => messages.push(json!({"role": "system", "content": s})),
        Some(Value::Array(blocks)) => {
            messages.push(json!({"role": "system", "content": blocks_text(blocks)}))
        }
        _ => {}
    }
    for m in req
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        match m.get("content") {
            Some(Value::String(s)) => messages.push(json!({"role": role, "content": s})),
            Some(Value::Array(blocks)) => {
                let text = blocks_text(blocks);
                let mut calls = Vec::new();
                let mut results = Vec::new();
                for b in blocks {
                    match b.get("type").and_then(Value::as_str) {
                        Some("tool_use") => calls.push(json!({
                            "id": b.get("id"), "type": "function",
                            "function": {"name": b.get("name"),
                                "arguments": b.get("input").map(Value::to_string).unwrap_or_default()}
                        })),
                        Some("tool_result") => {
                            let content = match b.get("content") {
                                Some(Value::String(s)) => s.clone(),
                                Some(Value::Array(parts)) => blocks_text(parts),
                                _ => String::new(),
                            };
                            results.push(json!({"role": "tool",
                                "tool_call_id": b.get("tool_use_id"), "content": content}));
                        }
                        _ => {}
                    }
                }
                if role == "assistant" {
                    let mut a = json!({"role": "assistant", "content": text});
                    if !calls.is_empty() {
                        a["tool_calls"] = Value::Array(calls);
                    }
                    messages.push(a);
                } else {
                    if !text.is_empty() || results.is_empty() {
                        messages.push(json!({"role": role, "content": text}));
                    }
                    messages.extend(results);
                }
            }
            _ => messages.push(json!({"role": role, "content": ""})),
        }
    }
    // Claude Code also sends `system`-role entries inside `messages` (after the prompt):
    // they are instructions, not turns, so they go first and "the last message" stays the
    // last user or tool message.
    let (mut sys, turns): (Vec<Value>, Vec<Value>) = messages
        .into_iter()
        .partition(|m| m.get("role").and_then(Value::as_str) == Some("system"));
    sys.extend(turns);
    let mut out = json!({"messages": sys});
    if let Some(t) = req.get("tools") {
        out["tools"] = t.clone();
    }
    out
}

fn blocks_text(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Thinking signatures and redacted-thinking data carried by a request's assistant turns.
pub fn opaque_in_request(req: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in req
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for b in m
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let v = match b.get("type").and_then(Value::as_str) {
                Some("thinking") => b.get("signature"),
                Some("redacted_thinking") => b.get("data"),
                _ => None,
            };
            if let Some(s) = v.and_then(Value::as_str) {
                out.push(s.to_string());
            }
        }
    }
    out
}

fn stop_reason(r: &ScriptedResponse) -> String {
    match r.finish_reason.as_deref() {
        Some("stop") => "end_turn".into(),
        Some("tool_calls") => "tool_use".into(),
        Some("length") => "max_tokens".into(),
        Some(other) => other.into(),
        None if r.tool_calls.is_empty() => "end_turn".into(),
        None => "tool_use".into(),
    }
}

fn usage(r: &ScriptedResponse) -> Value {
    r.usage.clone().unwrap_or_else(|| {
        json!({"input_tokens": 10, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0, "output_tokens": 5})
    })
}

fn model(r: &ScriptedResponse, req: &Value) -> String {
    r.model
        .clone()
        .or_else(|| req.get("model").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "scripted-model".into())
}

fn message_id(number: usize) -> String {
    format!("msg_scripted{number:06}")
}

/// The content blocks of the reply, complete (for the JSON reply and for the stream).
fn blocks(r: &ScriptedResponse, number: usize) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(t) = &r.reasoning {
        out.push(json!({"type": "thinking", "thinking": t, "signature": r.opaque(number)}));
    }
    if let Some(t) = &r.text {
        out.push(json!({"type": "text", "text": t}));
    }
    for c in &r.tool_calls {
        let input: Value = match &c.arguments {
            Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| json!({})),
            v => v.clone(),
        };
        out.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}));
    }
    out
}

/// The non-streaming reply: a `message` object.
pub fn to_json(r: &ScriptedResponse, number: usize, req: &Value) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), json!(message_id(number)));
    m.insert("type".into(), json!("message"));
    m.insert("role".into(), json!("assistant"));
    m.insert("model".into(), json!(model(r, req)));
    m.insert("content".into(), Value::Array(blocks(r, number)));
    m.insert("stop_reason".into(), json!(stop_reason(r)));
    m.insert("stop_sequence".into(), Value::Null);
    m.insert("usage".into(), usage(r));
    for (k, v) in &r.extra {
        m.insert(k.clone(), v.clone());
    }
    Value::Object(m)
}

fn ev(name: &str, data: Value) -> SseEvent {
    SseEvent::named(name, data.to_string())
}

/// The streaming reply, event by event.
pub fn to_sse(r: &ScriptedResponse, number: usize, req: &Value) -> Vec<SseEvent> {
    let mut out = Vec::new();
    let mut start_usage = usage(r);
    start_usage["output_tokens"] = json!(1);
    out.push(ev(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": message_id(number), "type": "message", "role": "assistant",
            "model": model(r, req), "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": start_usage}}),
    ));
    let per = r.text_chunk_chars.unwrap_or(4).max(1);
    let pieces = |s: &str| -> Vec<String> {
        let chars: Vec<char> = s.chars().collect();
        chars.chunks(per).map(|c| c.iter().collect()).collect()
    };
    for (index, block) in blocks(r, number).into_iter().enumerate() {
        let ty = block["type"].as_str().unwrap_or("").to_string();
        let start = match ty.as_str() {
            "thinking" => json!({"type": "thinking", "thinking": "", "signature": ""}),
            "text" => json!({"type": "text", "text": ""}),
            _ => json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
        };
        out.push(ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        if index == 0 {
            out.push(ev("ping", json!({"type": "ping"})));
        }
        let delta = |d: Value| {
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": d}),
            )
        };
        match ty.as_str() {
            "thinking" => {
                for p in pieces(block["thinking"].as_str().unwrap_or("")) {
                    out.push(delta(json!({"type": "thinking_delta", "thinking": p})));
                }
                out.push(delta(
                    json!({"type": "signature_delta", "signature": block["signature"]}),
                ));
            }
            "text" => {
                for p in pieces(block["text"].as_str().unwrap_or("")) {
                    out.push(delta(json!({"type": "text_delta", "text": p})));
                }
            }
            _ => {
                // Real streams split the input JSON anywhere, even inside a string.
                let args: Vec<char> = block["input"].to_string().chars().collect();
                let mid = args.len() / 2;
                for part in [&args[..mid], &args[mid..]] {
                    if !part.is_empty() {
                        let s: String = part.iter().collect();
                        out.push(delta(
                            json!({"type": "input_json_delta", "partial_json": s}),
                        ));
                    }
                }
            }
        }
        out.push(ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    let u = usage(r);
    out.push(ev(
        "message_delta",
        json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason(r), "stop_sequence": null},
            "usage": {"output_tokens": u.get("output_tokens").cloned().unwrap_or(json!(5))}}),
    ));
    out.push(ev("message_stop", json!({"type": "message_stop"})));
    out
}

/// The `type` of an API error for an HTTP status, as the API names them.
pub fn error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// An error body: `{"type":"error","error":{"type":…,"message":…},"request_id":…}`.
pub fn error_body(ty: &str, message: &str, number: usize) -> Value {
    json!({"type": "error", "error": {"type": ty, "message": message},
        "request_id": format!("req_scripted{number:06}")})
}

/// The `error` event a stream ends with when the API fails mid-response.
pub fn error_event(ty: &str, message: &str, number: usize) -> SseEvent {
    ev("error", error_body(ty, message, number))
}
