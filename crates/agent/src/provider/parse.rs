//! Request body building and non-streaming response parsing.

use serde_json::{Map, Value, json};

use super::ProviderError;
use super::sse::snippet;
use crate::model::{Message, ModelRequest, ModelResponse, OutputItem, ToolCall, Usage};

/// The OpenAI chat-completions JSON body for `req`. `extra` fields are added at top level
/// (without overriding the ones set here).
pub fn request_body(req: &ModelRequest, extra: &Map<String, Value>) -> Value {
    let messages: Vec<Value> = req.messages.iter().map(message_json).collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(m) = req.max_tokens {
        body.insert("max_tokens".into(), json!(m));
    }
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), json!(t));
    }
    body.insert("stream".into(), json!(req.stream));
    if req.stream {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    for (k, v) in extra {
        body.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(body)
}

fn message_json(m: &Message) -> Value {
    match m {
        Message::System { content } => json!({"role": "system", "content": content}),
        Message::User { content } => json!({"role": "user", "content": content}),
        // Chat completions has no place for provider reasoning items: they are not sent.
        Message::Assistant {
            text, tool_calls, ..
        } => {
            let mut o = Map::new();
            o.insert("role".into(), json!("assistant"));
            o.insert("content".into(), json!(text));
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.call_id, "type": "function",
                               "function": {"name": c.name, "arguments": c.arguments}})
                    })
                    .collect();
                o.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(o)
        }
        Message::Tool { call_id, content } => {
            json!({"role": "tool", "tool_call_id": call_id, "content": content})
        }
    }
}

pub(crate) fn usage_from(u: Value) -> Result<Usage, ProviderError> {
    let mut usage: Usage =
        serde_json::from_value(u).map_err(|e| ProviderError::InvalidResponse {
            detail: format!("`usage` has an unexpected shape: {e}"),
        })?;
    usage.cached_tokens = usage
        .extra
        .get("prompt_tokens_details")
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64);
    Ok(usage)
}

/// Moves the keys of `known` out of `obj`, returning them; `obj` keeps the unknown ones.
pub(crate) fn split_known(obj: &mut Map<String, Value>, known: &[&str]) -> Map<String, Value> {
    let mut out = Map::new();
    for k in known {
        if let Some(v) = obj.remove(*k) {
            out.insert((*k).to_string(), v);
        }
    }
    out
}

/// `data` as a JSON object; `what` names it in the error (a response body, a stream event).
pub(crate) fn parse_object(data: &[u8], what: &str) -> Result<Map<String, Value>, ProviderError> {
    match serde_json::from_slice::<Value>(data) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ProviderError::InvalidResponse {
            detail: format!("{what} is not a JSON object"),
        }),
        Err(e) => Err(ProviderError::InvalidResponse {
            detail: format!(
                "{what} is not JSON ({e}): {}",
                snippet(&String::from_utf8_lossy(data))
            ),
        }),
    }
}

/// Parses a non-streaming chat-completions response body.
pub fn parse_completion(body: &[u8]) -> Result<ModelResponse, ProviderError> {
    let mut top = parse_object(body, "response body")?;
    if let Some(err) = top.get("error") {
        return Err(ProviderError::StreamError {
            message: err.to_string(),
        });
    }
    let mut known = split_known(&mut top, &["choices", "usage", "model"]);
    let model = known
        .remove("model")
        .and_then(|m| m.as_str().map(str::to_string));
    let usage = match known.remove("usage") {
        Some(Value::Null) | None => None,
        Some(u) => Some(usage_from(u)?),
    };
    let mut choices = match known.remove("choices") {
        Some(Value::Array(c)) => c,
        _ => {
            return Err(ProviderError::InvalidResponse {
                detail: "response has no `choices` array".into(),
            });
        }
    };
    if choices.is_empty() {
        return Err(ProviderError::InvalidResponse {
            detail: "response has an empty `choices` array".into(),
        });
    }
    let Value::Object(mut choice) = choices.swap_remove(0) else {
        return Err(ProviderError::InvalidResponse {
            detail: "`choices[0]` is not an object".into(),
        });
    };
    let mut ck = split_known(&mut choice, &["index", "finish_reason", "message"]);
    let stop_reason = ck
        .remove("finish_reason")
        .and_then(|f| f.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut message = match ck.remove("message") {
        Some(Value::Object(m)) => m,
        _ => {
            return Err(ProviderError::InvalidResponse {
                detail: "`choices[0].message` is missing or not an object".into(),
            });
        }
    };
    let mut mk = split_known(
        &mut message,
        &["role", "content", "reasoning_content", "tool_calls"],
    );
    let mut items = Vec::new();
    if let Some(Value::String(r)) = mk.remove("reasoning_content")
        && !r.is_empty()
    {
        items.push(OutputItem::Reasoning { text: r });
    }
    if let Some(Value::String(t)) = mk.remove("content")
        && !t.is_empty()
    {
        items.push(OutputItem::Text { text: t });
    }
    if let Some(Value::Array(calls)) = mk.remove("tool_calls") {
        for (i, c) in calls.into_iter().enumerate() {
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .unwrap_or_else(|| format!("call_{i}"));
            let f = c.get("function");
            let name = f
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let arguments = match f.and_then(|f| f.get("arguments")) {
                Some(Value::String(s)) => s.clone(),
                None | Some(Value::Null) => String::new(),
                // Some servers send an object; keep it as JSON text.
                Some(other) => other.to_string(),
            };
            items.push(OutputItem::ToolCall(ToolCall {
                call_id: id,
                name,
                arguments,
            }));
        }
    }
    let mut provider_extra = top;
    if !choice.is_empty() {
        provider_extra.insert("choice".into(), Value::Object(choice));
    }
    message.retain(|_, v| !v.is_null());
    if !message.is_empty() {
        provider_extra.insert("message".into(), Value::Object(message));
    }
    Ok(ModelResponse {
        items,
        usage,
        stop_reason,
        model,
        provider_extra,
    })
}
