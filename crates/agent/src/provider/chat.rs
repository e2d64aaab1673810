//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`): the request
//! body, the plain JSON response, and the assembler of streamed chunks (`delta.content`,
//! `delta.reasoning_content` and `delta.tool_calls` by index).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::dialect::{Dialect, StreamAssembly};
use super::error::ProviderError;
use super::wire::{Delta, parse_object, snippet, split_known};
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

/// OpenAI-compatible chat completions (`POST {base_url}/chat/completions`).
#[derive(Debug, Clone, Copy)]
pub struct Chat;

impl Dialect for Chat {
    fn request_body(&self, req: &ModelRequest, extra: &Map<String, Value>) -> Value {
        request_body(req, extra)
    }

    fn parse_body(&self, body: &[u8]) -> Result<ModelResponse, ProviderError> {
        parse_completion(body)
    }

    fn assembler(&self) -> Box<dyn StreamAssembly> {
        Box::new(StreamAssembler::new())
    }

    fn missing_end(&self) -> &'static str {
        "no finish_reason and no [DONE]"
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Assembles chat-completions stream chunks into one response.
#[derive(Debug, Default)]
pub struct StreamAssembler {
    text: String,
    reasoning: String,
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
    extra: Map<String, Value>,
    choice_extra: Map<String, Value>,
    message_extra: Map<String, Value>,
    done: bool,
    chunks: u64,
}

impl StreamAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// True once `data: [DONE]` was seen.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// True once a choice carried a `finish_reason`.
    pub fn has_finish_reason(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Number of chunks received so far.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// Applies the data of one SSE event.
    pub fn push_event(&mut self, data: &str) -> Result<Vec<Delta>, ProviderError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let value: Value =
            serde_json::from_str(data).map_err(|e| ProviderError::InvalidResponse {
                detail: format!("stream chunk is not JSON ({e}): {}", snippet(data)),
            })?;
        let Value::Object(mut chunk) = value else {
            return Err(ProviderError::InvalidResponse {
                detail: format!("stream chunk is not a JSON object: {}", snippet(data)),
            });
        };
        if let Some(err) = chunk.get("error") {
            return Err(ProviderError::StreamError {
                message: err.to_string(),
            });
        }
        self.chunks += 1;
        let mut deltas = Vec::new();
        if let Some(m) = chunk
            .remove("model")
            .and_then(|m| m.as_str().map(str::to_string))
        {
            self.model.get_or_insert(m);
        }
        if let Some(u) = chunk.remove("usage")
            && !u.is_null()
        {
            self.usage = Some(usage_from(u)?);
        }
        let choices = chunk.remove("choices");
        for (k, v) in chunk {
            self.extra.entry(k).or_insert(v);
        }
        let Some(choices) = choices else {
            return Ok(deltas);
        };
        let Value::Array(choices) = choices else {
            return Err(ProviderError::InvalidResponse {
                detail: "`choices` in a stream chunk is not an array".into(),
            });
        };
        for choice in choices {
            let Value::Object(mut choice) = choice else {
                continue;
            };
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue; // only the first choice is used (n = 1)
            }
            choice.remove("index");
            if let Some(fr) = choice.remove("finish_reason")
                && let Some(fr) = fr.as_str()
            {
                self.finish_reason = Some(fr.to_string());
            }
            let delta = choice.remove("delta");
            for (k, v) in choice {
                self.choice_extra.entry(k).or_insert(v);
            }
            let Some(Value::Object(mut delta)) = delta else {
                continue;
            };
            delta.remove("role");
            if let Some(Value::String(s)) = delta.remove("content")
                && !s.is_empty()
            {
                self.text.push_str(&s);
                deltas.push(Delta::Text(s));
            }
            for key in ["reasoning_content", "reasoning"] {
                if let Some(Value::String(s)) = delta.remove(key)
                    && !s.is_empty()
                {
                    self.reasoning.push_str(&s);
                    deltas.push(Delta::Reasoning(s));
                }
            }
            if let Some(tcs) = delta.remove("tool_calls") {
                self.push_tool_calls(tcs, &mut deltas)?;
            }
            for (k, v) in delta {
                if !v.is_null() {
                    self.message_extra.entry(k).or_insert(v);
                }
            }
        }
        Ok(deltas)
    }

    fn push_tool_calls(
        &mut self,
        tcs: Value,
        deltas: &mut Vec<Delta>,
    ) -> Result<(), ProviderError> {
        let Value::Array(tcs) = tcs else {
            if tcs.is_null() {
                return Ok(());
            }
            return Err(ProviderError::InvalidResponse {
                detail: "`delta.tool_calls` is not an array".into(),
            });
        };
        for (pos, tc) in tcs.into_iter().enumerate() {
            let Value::Object(tc) = tc else { continue };
            let index = tc
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(pos as u64);
            let is_new = !self.calls.contains_key(&index);
            let call = self.calls.entry(index).or_default();
            if let Some(id) = tc.get("id").and_then(Value::as_str)
                && !id.is_empty()
                && call.id.is_none()
            {
                call.id = Some(id.to_string());
            }
            let function = tc.get("function");
            if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str) {
                call.name.push_str(name);
            }
            if let Some(args) = function
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
            {
                call.arguments.push_str(args);
            }
            if is_new {
                deltas.push(Delta::ToolCallStart {
                    index,
                    name: call.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// The assembled response. Calls without an id get `call_<index>`.
    pub fn finish(self) -> ModelResponse {
        let mut items = Vec::new();
        if !self.reasoning.is_empty() {
            items.push(OutputItem::Reasoning {
                text: self.reasoning,
            });
        }
        if !self.text.is_empty() {
            items.push(OutputItem::Text { text: self.text });
        }
        for (index, c) in self.calls {
            items.push(OutputItem::ToolCall(ToolCall {
                call_id: c.id.unwrap_or_else(|| format!("call_{index}")),
                name: c.name,
                arguments: c.arguments,
            }));
        }
        let mut provider_extra = self.extra;
        if !self.choice_extra.is_empty() {
            provider_extra.insert("choice".into(), Value::Object(self.choice_extra));
        }
        if !self.message_extra.is_empty() {
            provider_extra.insert("message".into(), Value::Object(self.message_extra));
        }
        ModelResponse {
            items,
            usage: self.usage,
            stop_reason: self.finish_reason.unwrap_or_default(),
            model: self.model,
            provider_extra,
        }
    }
}

impl StreamAssembly for StreamAssembler {
    fn push_event(&mut self, data: &str) -> Result<Vec<Delta>, ProviderError> {
        StreamAssembler::push_event(self, data)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    /// `[DONE]`, or a chunk with a `finish_reason` (some servers close without `[DONE]`).
    fn is_complete(&self) -> bool {
        self.done || self.finish_reason.is_some() && self.chunks > 0
    }

    fn events(&self) -> u64 {
        self.chunks
    }

    fn finish(self: Box<Self>) -> Result<ModelResponse, ProviderError> {
        Ok(StreamAssembler::finish(*self))
    }
}
