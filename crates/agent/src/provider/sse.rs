//! Server-sent events: a byte-level line parser with a line-length limit, and the assembler
//! that turns chat-completions chunks into one [`ModelResponse`].

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::ProviderError;
use super::parse::usage_from;
use crate::model::{ModelResponse, OutputItem, ToolCall, Usage};

/// Splits a byte stream into SSE events (the joined `data:` lines of each event).
#[derive(Debug)]
pub struct SseParser {
    max_line_bytes: usize,
    line: Vec<u8>,
    data: Option<String>,
    last_was_cr: bool,
}

impl SseParser {
    pub fn new(max_line_bytes: usize) -> Self {
        SseParser {
            max_line_bytes,
            line: Vec::new(),
            data: None,
            last_was_cr: false,
        }
    }

    /// Feeds bytes; returns the data of every event completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, ProviderError> {
        let mut events = Vec::new();
        for &b in bytes {
            if b == b'\n' && self.last_was_cr {
                // "\r\n": the line already ended at '\r'.
                self.last_was_cr = false;
                continue;
            }
            self.last_was_cr = b == b'\r';
            if b == b'\n' || b == b'\r' {
                self.end_line(&mut events);
            } else {
                if self.line.len() >= self.max_line_bytes {
                    return Err(ProviderError::SseLineTooLong {
                        limit_bytes: self.max_line_bytes,
                    });
                }
                self.line.push(b);
            }
        }
        Ok(events)
    }

    /// Ends the stream: a last event without its blank line is still delivered.
    pub fn finish(&mut self) -> Option<String> {
        if !self.line.is_empty() {
            let mut events = Vec::new();
            self.end_line(&mut events);
            if let Some(e) = events.pop() {
                return Some(e);
            }
        }
        self.data.take()
    }

    fn end_line(&mut self, events: &mut Vec<String>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if let Some(d) = self.data.take() {
                events.push(d);
            }
            return;
        }
        if line[0] == b':' {
            return; // comment / keep-alive
        }
        let text = String::from_utf8_lossy(&line);
        let (field, value) = match text.find(':') {
            Some(i) => {
                let v = &text[i + 1..];
                (&text[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&text[..], ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        }
        // event:, id:, retry: and unknown fields are ignored.
    }
}

/// Something new that arrived in a chunk, for live output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    Text(String),
    Reasoning(String),
    ToolCallStart { index: u64, name: String },
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

pub(crate) fn snippet(s: &str) -> String {
    const MAX: usize = 300;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}
