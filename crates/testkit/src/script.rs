//! The script a [`crate::ScriptedServer`] plays: steps, their matching rules and replies.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A list of steps. For each request the server takes the first step, in order, that is not
/// used up and whose `when` (and predicate) matches the request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Script {
    pub steps: Vec<Step>,
}

impl Script {
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        Script {
            steps: steps.into_iter().collect(),
        }
    }

    /// Steps played strictly in order, each once.
    pub fn in_order(replies: impl IntoIterator<Item = Reply>) -> Self {
        Script::new(replies.into_iter().map(Step::reply))
    }

    /// Reads a script from JSON (as used by the `scripted-model-server` binary).
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// A predicate on the request body.
pub type RequestPredicate = dyn Fn(&Value) -> bool + Send + Sync;

/// A request predicate given in code (not serialisable).
#[derive(Clone, Default)]
pub struct Predicate(pub Option<Arc<RequestPredicate>>);

impl fmt::Debug for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Predicate(fn)"
        } else {
            "Predicate(none)"
        })
    }
}

/// One step of a script.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Step {
    /// When this step applies (default: any request).
    #[serde(default)]
    pub when: When,
    /// Extra predicate on the request body, in code.
    #[serde(skip)]
    pub predicate: Predicate,
    /// May be used any number of times (default: once).
    #[serde(default)]
    pub repeat: bool,
    /// Wait this long before answering.
    #[serde(default)]
    pub delay_ms: u64,
    pub reply: Reply,
}

impl Step {
    /// A once-only step matching any request.
    pub fn reply(reply: impl Into<Reply>) -> Self {
        Step {
            when: When::Always,
            predicate: Predicate::default(),
            repeat: false,
            delay_ms: 0,
            reply: reply.into(),
        }
    }

    /// A step for the request whose last message is the result of tool call `call_id`.
    pub fn after_tool_result(call_id: impl Into<String>, reply: impl Into<Reply>) -> Self {
        Step::reply(reply).when(When::LastToolResult {
            call_id: Some(call_id.into()),
            contains: None,
        })
    }

    pub fn when(mut self, when: When) -> Self {
        self.when = when;
        self
    }

    pub fn matching(mut self, f: impl Fn(&Value) -> bool + Send + Sync + 'static) -> Self {
        self.predicate = Predicate(Some(Arc::new(f)));
        self
    }

    pub fn repeat(mut self) -> Self {
        self.repeat = true;
        self
    }

    pub fn delay_ms(mut self, ms: u64) -> Self {
        self.delay_ms = ms;
        self
    }

    pub(crate) fn matches(&self, request: &Value, number: usize) -> bool {
        self.when.matches(request, number) && self.predicate.0.as_ref().is_none_or(|f| f(request))
    }
}

/// Matching rules on the request body (OpenAI chat-completions JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum When {
    #[default]
    Always,
    /// The n-th request the server receives (1-based).
    RequestNumber {
        n: usize,
    },
    /// The last message is a tool result (optionally for `call_id`, optionally containing
    /// `contains`).
    LastToolResult {
        #[serde(default)]
        call_id: Option<String>,
        #[serde(default)]
        contains: Option<String>,
    },
    /// Some message is the result of tool call `call_id` (wherever it is: agents append
    /// context messages after tool results).
    AnyToolResult {
        call_id: String,
    },
    /// The last message is a user message containing `text`.
    LastUserContains {
        text: String,
    },
    /// Some message's content contains `text`.
    AnyMessageContains {
        text: String,
    },
    /// The request offers no tools / offers tools.
    HasTools {
        yes: bool,
    },
    All {
        of: Vec<When>,
    },
    Any {
        of: Vec<When>,
    },
    Not {
        when: Box<When>,
    },
}

fn content_text(m: &Value) -> String {
    match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

impl When {
    pub fn matches(&self, req: &Value, number: usize) -> bool {
        let messages = req
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let last = messages.last();
        let role = |m: &Value| {
            m.get("role")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match self {
            When::Always => true,
            When::RequestNumber { n } => *n == number,
            When::LastToolResult { call_id, contains } => last.is_some_and(|m| {
                role(m) == "tool"
                    && call_id.as_ref().is_none_or(|id| {
                        m.get("tool_call_id").and_then(Value::as_str) == Some(id.as_str())
                    })
                    && contains
                        .as_ref()
                        .is_none_or(|t| content_text(m).contains(t.as_str()))
            }),
            When::AnyToolResult { call_id } => messages.iter().any(|m| {
                role(m) == "tool"
                    && m.get("tool_call_id").and_then(Value::as_str) == Some(call_id.as_str())
            }),
            When::LastUserContains { text } => {
                last.is_some_and(|m| role(m) == "user" && content_text(m).contains(text.as_str()))
            }
            When::AnyMessageContains { text } => messages
                .iter()
                .any(|m| content_text(m).contains(text.as_str())),
            When::HasTools { yes } => {
                let has = req
                    .get("tools")
                    .and_then(Value::as_array)
                    .is_some_and(|t| !t.is_empty());
                has == *yes
            }
            When::All { of } => of.iter().all(|w| w.matches(req, number)),
            When::Any { of } => of.iter().any(|w| w.matches(req, number)),
            When::Not { when } => !when.matches(req, number),
        }
    }
}

/// What the server answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    /// A normal response: SSE when the request has `stream: true`, JSON otherwise.
    Response(ScriptedResponse),
    /// An HTTP error status, optionally with `Retry-After`. The body is shaped as the
    /// protocol's API sends errors; `body` is the error message and `error_type` its type
    /// (default: the API's name for the status, e.g. `overloaded_error` for 529 on the
    /// Anthropic route).
    Status {
        status: u16,
        #[serde(default)]
        retry_after: Option<String>,
        #[serde(default)]
        body: Option<String>,
        #[serde(default)]
        error_type: Option<String>,
    },
    /// Streams the first `after_chunks` SSE events, then sends nothing more until the
    /// server shuts down.
    StreamThenHang {
        response: ScriptedResponse,
        after_chunks: usize,
    },
    /// Streams the first `after_chunks` SSE events, then breaks the connection.
    StreamThenDrop {
        response: ScriptedResponse,
        after_chunks: usize,
    },
    /// Answers with a plain JSON body even when the request asked for a stream.
    PlainJson(ScriptedResponse),
    /// Streams the first `after_chunks` SSE events, then an API error event (Anthropic:
    /// `error`; Responses: `response.failed`; chat completions: an `{"error":…}` chunk) and
    /// ends the response.
    StreamThenError {
        response: ScriptedResponse,
        after_chunks: usize,
        /// Default `overloaded_error`.
        #[serde(default)]
        error_type: Option<String>,
        /// Default `Overloaded`.
        #[serde(default)]
        message: Option<String>,
    },
}

impl From<ScriptedResponse> for Reply {
    fn from(r: ScriptedResponse) -> Self {
        Reply::Response(r)
    }
}

impl Reply {
    /// The response this reply plays (fully or in part), if any.
    pub fn response(&self) -> Option<&ScriptedResponse> {
        match self {
            Reply::Response(r) | Reply::PlainJson(r) => Some(r),
            Reply::StreamThenHang { response, .. }
            | Reply::StreamThenDrop { response, .. }
            | Reply::StreamThenError { response, .. } => Some(response),
            Reply::Status { .. } => None,
        }
    }

    pub fn status(status: u16) -> Self {
        Reply::Status {
            status,
            retry_after: None,
            body: None,
            error_type: None,
        }
    }

    /// An HTTP error with a message and an API error type (e.g. 529, `overloaded_error`).
    pub fn api_error(status: u16, error_type: &str, message: &str) -> Self {
        Reply::Status {
            status,
            retry_after: None,
            body: Some(message.into()),
            error_type: Some(error_type.into()),
        }
    }

    pub fn rate_limited(retry_after_secs: u64) -> Self {
        Reply::Status {
            status: 429,
            retry_after: Some(retry_after_secs.to_string()),
            body: None,
            error_type: None,
        }
    }
}

/// A tool call the scripted model makes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedCall {
    pub id: String,
    pub name: String,
    /// A JSON string is sent as is; any other value is serialised.
    pub arguments: Value,
    /// The Responses API's tool namespace the call names (`mcp__side` for Codex's MCP server
    /// `side`, whose tools it sends in a `namespace` tool); the other protocols have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl ScriptedCall {
    pub fn arguments_text(&self) -> String {
        match &self.arguments {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// A model response to play.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScriptedResponse {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
    /// Default: `tool_calls` when there are calls, else `stop`.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Default: a small synthetic usage object.
    #[serde(default)]
    pub usage: Option<Value>,
    #[serde(default)]
    pub model: Option<String>,
    /// Extra top-level fields added to the response (and to every stream chunk).
    #[serde(default)]
    pub extra: Map<String, Value>,
    /// Characters of text per stream chunk (default 4).
    #[serde(default)]
    pub text_chunk_chars: Option<usize>,
    /// Pause between stream chunks, in milliseconds.
    #[serde(default)]
    pub chunk_delay_ms: u64,
    /// The opaque value issued with `reasoning`: the thinking block's `signature`
    /// (Anthropic) or the reasoning item's `encrypted_content` (Responses). Default: a
    /// value unique to the request number, so a later request can be checked for it.
    #[serde(default)]
    pub opaque: Option<String>,
}

impl ScriptedResponse {
    pub fn text(text: impl Into<String>) -> Self {
        ScriptedResponse {
            text: Some(text.into()),
            ..Default::default()
        }
    }

    /// A response with one tool call; `arguments` is JSON (a `json!` value or a string).
    pub fn tool_call(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<Value>,
    ) -> Self {
        ScriptedResponse::default().with_call(id, name, arguments)
    }

    pub fn with_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<Value>,
    ) -> Self {
        self.tool_calls.push(ScriptedCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            namespace: None,
        });
        self
    }

    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    pub fn with_reasoning(mut self, text: impl Into<String>) -> Self {
        self.reasoning = Some(text.into());
        self
    }

    pub fn finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }

    pub fn with_extra(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }

    pub fn chunk_delay_ms(mut self, ms: u64) -> Self {
        self.chunk_delay_ms = ms;
        self
    }

    /// The opaque reasoning value sent in reply to request `number`.
    pub fn opaque(&self, number: usize) -> String {
        self.opaque
            .clone()
            .unwrap_or_else(|| format!("RXNjcmlwdGVk{number:06}/c2lnbmF0dXJl+Zw=="))
    }

    pub fn with_opaque(mut self, value: impl Into<String>) -> Self {
        self.opaque = Some(value.into());
        self
    }

    fn finish(&self) -> String {
        self.finish_reason.clone().unwrap_or_else(|| {
            if self.tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }
            .to_string()
        })
    }

    fn usage_value(&self) -> Value {
        self.usage.clone().unwrap_or_else(
            || json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}),
        )
    }

    fn base(&self, object: &str, number: usize) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("id".into(), json!(format!("chatcmpl-scripted-{number}")));
        m.insert("object".into(), json!(object));
        m.insert("created".into(), json!(1_700_000_000u64));
        m.insert(
            "model".into(),
            json!(
                self.model
                    .clone()
                    .unwrap_or_else(|| "scripted-model".into())
            ),
        );
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        m
    }

    /// The non-streaming JSON body.
    pub fn to_json(&self, number: usize) -> Value {
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        message.insert("content".into(), json!(self.text));
        if let Some(r) = &self.reasoning {
            message.insert("reasoning_content".into(), json!(r));
        }
        if !self.tool_calls.is_empty() {
            let calls: Vec<Value> = self
                .tool_calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments_text()}})
                })
                .collect();
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        let mut m = self.base("chat.completion", number);
        m.insert(
            "choices".into(),
            json!([{"index": 0, "message": message, "finish_reason": self.finish()}]),
        );
        m.insert("usage".into(), self.usage_value());
        Value::Object(m)
    }

    /// The SSE events (each the text after `data: `), `[DONE]` last.
    pub fn to_sse_events(&self, number: usize, include_usage: bool) -> Vec<String> {
        let chunk = |delta: Value, finish: Value| {
            let mut m = self.base("chat.completion.chunk", number);
            m.insert(
                "choices".into(),
                json!([{"index": 0, "delta": delta, "finish_reason": finish}]),
            );
            Value::Object(m).to_string()
        };
        let mut events = vec![chunk(
            json!({"role": "assistant", "content": null}),
            Value::Null,
        )];
        let per = self.text_chunk_chars.unwrap_or(4).max(1);
        let pieces = |s: &str| -> Vec<String> {
            let chars: Vec<char> = s.chars().collect();
            chars.chunks(per).map(|c| c.iter().collect()).collect()
        };
        if let Some(r) = &self.reasoning {
            for p in pieces(r) {
                events.push(chunk(json!({"reasoning_content": p}), Value::Null));
            }
        }
        if let Some(t) = &self.text {
            for p in pieces(t) {
                events.push(chunk(json!({"content": p}), Value::Null));
            }
        }
        for (i, c) in self.tool_calls.iter().enumerate() {
            events.push(chunk(
                json!({"tool_calls": [{"index": i, "id": c.id, "type": "function",
                    "function": {"name": c.name, "arguments": ""}}]}),
                Value::Null,
            ));
            let args: Vec<char> = c.arguments_text().chars().collect();
            let mid = args.len() / 2;
            for part in [&args[..mid], &args[mid..]] {
                if part.is_empty() {
                    continue;
                }
                let s: String = part.iter().collect();
                events.push(chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": s}}]}),
                    Value::Null,
                ));
            }
        }
        events.push(chunk(json!({}), json!(self.finish())));
        if include_usage {
            let mut m = self.base("chat.completion.chunk", number);
            m.insert("choices".into(), json!([]));
            m.insert("usage".into(), self.usage_value());
            events.push(Value::Object(m).to_string());
        }
        events.push("[DONE]".into());
        events
    }
}
