//! The model client: one HTTP client for three wire protocols ([`Api`]) — OpenAI-compatible
//! chat completions (`POST {base_url}/chat/completions`), the OpenAI Responses API
//! (`POST {base_url}/responses`, [`responses`]) and the Anthropic Messages API
//! (`POST {base_url}/v1/messages`, [`anthropic`]) — with reqwest + rustls.
//!
//! Streams with SSE when the request asks for it (chat: assembling `delta.content`,
//! `delta.reasoning_content` and `delta.tool_calls` by index; the others: their typed
//! events) and falls back to the plain JSON body when a server answers a stream request
//! without SSE. Reasoning the provider needs back (Responses `encrypted_content`, Anthropic
//! thinking `signature`) is kept verbatim as [`crate::model::OutputItem::ProviderReasoning`]. Bounded retries with exponential backoff and jitter on 429 (honouring
//! `Retry-After`), 5xx and connection failures; every attempt is reported. Explicit limits on
//! response size, SSE line length, connect/request time and stream idle time. Cancellation
//! through a [`CancellationToken`].

pub mod anthropic;
mod parse;
pub mod responses;
mod sse;
mod textcalls;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
pub use tokio_util::sync::CancellationToken;

pub use parse::{parse_completion, request_body};
pub use sse::{Delta, SseParser, StreamAssembler};
pub use textcalls::{
    apply_text_tool_calls, dedup_consecutive_tool_calls, drop_truncated_tool_calls,
    recognise_text_tool_calls,
};

use crate::model::{ModelRequest, ModelResponse};

/// Size and time limits of the client. Every limit names its unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderLimits {
    /// Maximum bytes of one response body (streamed or not).
    pub max_response_bytes: usize,
    /// Maximum bytes of one SSE line.
    pub max_sse_line_bytes: usize,
    /// Maximum bytes of an error body kept for the error message.
    pub max_error_body_bytes: usize,
    /// Time to establish the TCP (+TLS) connection.
    pub connect_timeout_ms: u64,
    /// Time for one whole attempt, from sending the request to the end of the body.
    pub request_timeout_ms: u64,
    /// Longest silence allowed between two pieces of a streamed body.
    pub stream_idle_timeout_ms: u64,
}

impl Default for ProviderLimits {
    fn default() -> Self {
        ProviderLimits {
            max_response_bytes: 32 * 1024 * 1024,
            max_sse_line_bytes: 1024 * 1024,
            max_error_body_bytes: 16 * 1024,
            connect_timeout_ms: 10_000,
            request_timeout_ms: 600_000,
            stream_idle_timeout_ms: 120_000,
        }
    }
}

/// Retry policy: attempts are bounded; waits grow exponentially with jitter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Total attempts including the first (1 = no retry).
    pub max_attempts: u32,
    /// Wait before the second attempt; doubles each time.
    pub initial_backoff_ms: u64,
    /// Upper bound of one computed wait.
    pub max_backoff_ms: u64,
    /// Upper bound of a server's `Retry-After` that is honoured (longer ones are capped).
    pub max_retry_after_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            initial_backoff_ms: 500,
            max_backoff_ms: 20_000,
            max_retry_after_ms: 60_000,
        }
    }
}

impl RetryPolicy {
    /// The waits before the second, third, … attempt: `initial * 2^(n-2)`, capped at
    /// `max_backoff_ms`, times a random factor in [0.5, 1.0) — backon's exponential backoff
    /// (the one retry mechanism of the workspace) from half the bounds, with its jitter of
    /// up to as much again.
    pub fn schedule(&self) -> impl Iterator<Item = Duration> + use<> {
        use backon::BackoffBuilder;
        backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(self.initial_backoff_ms / 2))
            .with_max_delay(Duration::from_millis(self.max_backoff_ms / 2))
            .with_factor(2.0)
            .with_jitter()
            .with_max_times(self.max_attempts.saturating_sub(1) as usize)
            .build()
    }
}

/// The wire protocol spoken to the model server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// OpenAI-compatible chat completions (OpenAI, llama.cpp, vLLM, Ollama, LM Studio, …).
    #[default]
    Chat,
    /// The OpenAI Responses API.
    Responses,
    /// The Anthropic Messages API.
    Anthropic,
}

impl Api {
    pub const ALL: [Api; 3] = [Api::Chat, Api::Responses, Api::Anthropic];

    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Anthropic => "anthropic",
        }
    }

    /// The endpoint for a base URL. OpenAI's base URLs end in `/v1`
    /// (`https://api.openai.com/v1`); Anthropic's usually do not
    /// (`https://api.anthropic.com`, as `ANTHROPIC_BASE_URL` is set), so `/v1` is added
    /// unless it is there.
    pub fn endpoint(self, base: &str) -> String {
        let base = base.trim_end_matches('/');
        match self {
            Api::Chat => format!("{base}/chat/completions"),
            Api::Responses => format!("{base}/responses"),
            Api::Anthropic if base.ends_with("/v1") => format!("{base}/messages"),
            Api::Anthropic => format!("{base}/v1/messages"),
        }
    }
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Api {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Api::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| format!("unknown API {s:?}; choose chat, responses or anthropic"))
    }
}

/// Configuration of [`OpenAiClient`]. `Debug` and `Serialize` never show the API key.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderConfig {
    /// The wire protocol.
    #[serde(default)]
    pub api: Api,
    /// e.g. `http://127.0.0.1:8080/v1`, `https://api.openai.com/v1` or
    /// `https://api.anthropic.com`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` (Anthropic: `x-api-key`) when set.
    #[serde(skip_serializing)]
    pub api_key: Option<String>,
    pub limits: ProviderLimits,
    pub retry: RetryPolicy,
    /// Recognise tool calls written as text when a response has none natively.
    pub recognise_text_tool_calls: bool,
    /// Extra top-level request fields (e.g. `{"top_k": 1}`); never override the ones the
    /// client sets.
    pub extra_body: Map<String, Value>,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("limits", &self.limits)
            .field("retry", &self.retry)
            .field("recognise_text_tool_calls", &self.recognise_text_tool_calls)
            .field("extra_body", &self.extra_body)
            .finish()
    }
}

impl ProviderConfig {
    pub fn new(base_url: impl Into<String>) -> Self {
        ProviderConfig {
            api: Api::Chat,
            base_url: base_url.into(),
            api_key: None,
            limits: ProviderLimits::default(),
            retry: RetryPolicy::default(),
            recognise_text_tool_calls: true,
            extra_body: Map::new(),
        }
    }
}

/// What went wrong talking to the model server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("invalid provider configuration: {detail}")]
    InvalidConfig { detail: String },
    #[error(
        "cannot connect to {url}: {detail} (is the model server running, and is the base URL right?)"
    )]
    Connect { url: String, detail: String },
    #[error(
        "no complete answer from {url} within {limit_ms} ms ({what}); the server may be overloaded — retry later or raise the limit"
    )]
    Timeout {
        url: String,
        limit_ms: u64,
        what: &'static str,
    },
    #[error("the connection broke while reading the response: {detail}")]
    Transport { detail: String },
    #[error("model server answered HTTP {status}: {body} ({hint})")]
    Http {
        status: u16,
        body: String,
        hint: &'static str,
    },
    #[error(
        "the response stream ended before it was complete ({detail}); the request can be retried"
    )]
    IncompleteStream { detail: String },
    #[error(
        "the response body exceeds the limit of {limit_bytes} bytes; raise max_response_bytes (lazarus: --max-response-bytes) or lower max_tokens"
    )]
    ResponseTooLarge { limit_bytes: usize },
    #[error(
        "an SSE line exceeds the limit of {limit_bytes} bytes; raise max_sse_line_bytes (lazarus: --max-sse-line-bytes)"
    )]
    SseLineTooLong { limit_bytes: usize },
    #[error("the model server sent an unexpected response: {detail}")]
    InvalidResponse { detail: String },
    #[error("the model server reported an error: {message}")]
    StreamError { message: String },
    /// An error the API reported inside a response (an Anthropic `error` event, a Responses
    /// `response.failed`), with the API's own type or code.
    #[error("the model API reported {kind}: {message}")]
    ApiError { kind: String, message: String },
    #[error("the model request was cancelled")]
    Cancelled,
}

impl ProviderError {
    /// Whether another attempt may succeed (429, 5xx, connection and timeout failures, a
    /// stream cut short).
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Connect { .. }
            | ProviderError::Timeout { .. }
            | ProviderError::Transport { .. }
            | ProviderError::IncompleteStream { .. } => true,
            ProviderError::Http { status, .. } => *status == 429 || *status >= 500,
            ProviderError::ApiError { kind, .. } => matches!(
                kind.as_str(),
                "overloaded_error"
                    | "api_error"
                    | "rate_limit_error"
                    | "timeout_error"
                    | "server_error"
                    | "rate_limit_exceeded"
            ),
            _ => false,
        }
    }
}

/// One HTTP attempt, for the caller to record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1-based.
    pub number: u32,
    /// Milliseconds waited (backoff or Retry-After) before this attempt.
    pub waited_ms: u64,
    /// How long the attempt took, in milliseconds.
    pub duration_ms: u64,
    /// HTTP status, when one was received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The failure, when the attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `Retry-After` the server asked for, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// Whether the response was read as an SSE stream.
    pub streamed: bool,
}

/// A successful completion with the attempts it took.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub response: ModelResponse,
    pub attempts: Vec<Attempt>,
    /// How many tool calls were recognised in text (0 when the calls were native).
    pub text_tool_calls: usize,
}

/// A failed completion: the last error and every attempt.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error} (after {} attempt(s))", attempts.len())]
pub struct CompletionFailure {
    #[source]
    pub error: ProviderError,
    pub attempts: Vec<Attempt>,
}

/// Live events while a response arrives (for the runner's live output). Text from an attempt
/// that later fails may have been shown already; a `Retry` event says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEvent<'a> {
    Text(&'a str),
    Reasoning(&'a str),
    ToolCallStart {
        index: u64,
        name: &'a str,
    },
    /// The attempt failed; the next one starts after `wait`.
    Retry {
        failed: &'a Attempt,
        wait: Duration,
    },
}

/// Receives [`StreamEvent`]s.
pub type Observer<'o> = dyn FnMut(StreamEvent<'_>) + Send + 'o;

/// Client for one OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    config: ProviderConfig,
    url: String,
}

struct AttemptError {
    error: ProviderError,
    status: Option<u16>,
    retry_after: Option<Duration>,
}

impl From<ProviderError> for AttemptError {
    fn from(error: ProviderError) -> Self {
        AttemptError {
            error,
            status: None,
            retry_after: None,
        }
    }
}

impl OpenAiClient {
    pub fn new(config: ProviderConfig) -> Result<Self, ProviderError> {
        let base = config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ProviderError::InvalidConfig {
                detail: format!("base URL {base:?} must start with http:// or https://"),
            });
        }
        let url = config.api.endpoint(base);
        reqwest::Url::parse(&url).map_err(|e| ProviderError::InvalidConfig {
            detail: format!("base URL {base:?} is not a valid URL: {e}"),
        })?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(config.limits.connect_timeout_ms))
            .timeout(Duration::from_millis(config.limits.request_timeout_ms))
            .build()
            .map_err(|e| ProviderError::InvalidConfig {
                detail: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(OpenAiClient { http, config, url })
    }

    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The JSON body sent for `req` in this client's protocol.
    pub fn body(&self, req: &ModelRequest) -> Value {
        match self.config.api {
            Api::Chat => request_body(req, &self.config.extra_body),
            Api::Responses => responses::request_body(req, &self.config.extra_body),
            Api::Anthropic => anthropic::request_body(req, &self.config.extra_body),
        }
    }

    /// Estimated input tokens of `req`: the bytes of its body over 4, rounded up (the
    /// usual rule of thumb for English text and JSON; no tokenizer is shipped).
    pub fn estimate_tokens(&self, req: &ModelRequest) -> u64 {
        estimate_tokens(&self.body(req))
    }

    /// The endpoint URL (e.g. `{base_url}/chat/completions`; see [`Api::endpoint`]).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends `req` (streaming when `req.stream`), retrying per the policy. Text tool calls are
    /// recognised when enabled and the request offered tools. Repeated and truncated calls
    /// are kept; see [`dedup_consecutive_tool_calls`] and [`drop_truncated_tool_calls`].
    pub async fn complete(
        &self,
        req: &ModelRequest,
        cancel: &CancellationToken,
        observer: &mut Observer<'_>,
    ) -> Result<Completion, CompletionFailure> {
        let body = self.body(req);
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut waited = Duration::ZERO;
        let max = self.config.retry.max_attempts.max(1);
        let mut schedule = self.config.retry.schedule();
        for number in 1..=max {
            if cancel.is_cancelled() {
                return Err(CompletionFailure {
                    error: ProviderError::Cancelled,
                    attempts,
                });
            }
            let started = Instant::now();
            let result = self.attempt(&body, req.stream, cancel, observer).await;
            let duration_ms = started.elapsed().as_millis() as u64;
            match result {
                Ok((mut response, status, streamed)) => {
                    attempts.push(Attempt {
                        number,
                        waited_ms: waited.as_millis() as u64,
                        duration_ms,
                        status: Some(status),
                        error: None,
                        retry_after_ms: None,
                        streamed,
                    });
                    let text_tool_calls =
                        if self.config.recognise_text_tool_calls && !req.tools.is_empty() {
                            apply_text_tool_calls(&mut response)
                        } else {
                            0
                        };
                    return Ok(Completion {
                        response,
                        attempts,
                        text_tool_calls,
                    });
                }
                Err(AttemptError {
                    error,
                    status,
                    retry_after,
                }) => {
                    let attempt = Attempt {
                        number,
                        waited_ms: waited.as_millis() as u64,
                        duration_ms,
                        status,
                        error: Some(error.to_string()),
                        retry_after_ms: retry_after.map(|d| d.as_millis() as u64),
                        streamed: req.stream,
                    };
                    tracing::warn!(attempt = number, error = %error, "model request attempt failed");
                    attempts.push(attempt);
                    if !error.is_retryable() || number == max {
                        return Err(CompletionFailure { error, attempts });
                    }
                    let cap = Duration::from_millis(self.config.retry.max_retry_after_ms);
                    // The schedule advances on every retry, so it keeps growing when a
                    // server's Retry-After is honoured in between.
                    let backoff = schedule.next().unwrap_or_default();
                    waited = match retry_after {
                        Some(ra) => ra.min(cap),
                        None => backoff,
                    };
                    if let Some(last) = attempts.last() {
                        observer(StreamEvent::Retry {
                            failed: last,
                            wait: waited,
                        });
                    }
                    tokio::select! {
                        _ = cancel.cancelled() => {
                            return Err(CompletionFailure { error: ProviderError::Cancelled, attempts });
                        }
                        _ = tokio::time::sleep(waited) => {}
                    }
                }
            }
        }
        // The loop always returns; this is for the type checker.
        Err(CompletionFailure {
            error: ProviderError::Cancelled,
            attempts,
        })
    }

    async fn attempt(
        &self,
        body: &Value,
        stream: bool,
        cancel: &CancellationToken,
        observer: &mut Observer<'_>,
    ) -> Result<(ModelResponse, u16, bool), AttemptError> {
        let mut rb = self.http.post(&self.url).json(body);
        match (self.config.api, &self.config.api_key) {
            (Api::Anthropic, key) => {
                rb = rb.header("anthropic-version", anthropic::VERSION);
                if let Some(key) = key {
                    rb = rb.header("x-api-key", key);
                }
            }
            (_, Some(key)) => rb = rb.bearer_auth(key),
            (_, None) => {}
        }
        if stream {
            rb = rb.header(reqwest::header::ACCEPT, "text/event-stream");
        }
        let resp = tokio::select! {
            _ = cancel.cancelled() => return Err(ProviderError::Cancelled.into()),
            r = rb.send() => r.map_err(|e| self.send_error(e))?,
        };
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let retry_after = parse_retry_after(resp.headers());
            let body = self.read_error_body(resp, cancel).await;
            let hint = match status {
                401 | 403 => "check the API key",
                404 => "check the base URL and the model name",
                400 | 422 => "the server rejected the request; check model, tools and parameters",
                429 => "rate limited",
                s if s >= 500 => "server-side failure",
                _ => "unexpected status",
            };
            return Err(AttemptError {
                error: ProviderError::Http { status, body, hint },
                status: Some(status),
                retry_after,
            });
        }
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"));
        let with_status = |error: ProviderError| AttemptError {
            error,
            status: Some(status),
            retry_after: None,
        };
        if stream && is_sse {
            let r = self
                .read_stream(resp, cancel, observer)
                .await
                .map_err(with_status)?;
            Ok((r, status, true))
        } else {
            if stream {
                tracing::info!(
                    "server answered a stream request with a plain body; reading it as JSON"
                );
            }
            let bytes = self.read_body(resp, cancel).await.map_err(with_status)?;
            let r = match self.config.api {
                Api::Chat => parse_completion(&bytes),
                Api::Responses => responses::parse_response(&bytes),
                Api::Anthropic => anthropic::parse_message(&bytes),
            }
            .map_err(with_status)?;
            for item in &r.items {
                if let crate::model::OutputItem::Text { text } = item {
                    observer(StreamEvent::Text(text));
                }
            }
            Ok((r, status, false))
        }
    }

    fn send_error(&self, e: reqwest::Error) -> AttemptError {
        let detail = error_chain(&e);
        let error = if e.is_timeout() {
            ProviderError::Timeout {
                url: self.url.clone(),
                limit_ms: self.config.limits.request_timeout_ms,
                what: "request timeout",
            }
        } else if e.is_connect() {
            // The URL is in the message already; the innermost cause says what happened
            // ("Connection refused (os error 111)") without reqwest's layers repeating it.
            ProviderError::Connect {
                url: self.url.clone(),
                detail: root_cause(&e),
            }
        } else {
            ProviderError::Transport { detail }
        };
        error.into()
    }

    fn body_error(&self, e: reqwest::Error) -> ProviderError {
        if e.is_timeout() {
            ProviderError::Timeout {
                url: self.url.clone(),
                limit_ms: self.config.limits.request_timeout_ms,
                what: "request timeout",
            }
        } else {
            ProviderError::Transport {
                detail: error_chain(&e),
            }
        }
    }

    /// Next piece of the body, with cancellation and the idle timeout.
    async fn next_chunk(
        &self,
        stream: &mut (impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
        cancel: &CancellationToken,
    ) -> Result<Option<bytes::Bytes>, ProviderError> {
        let idle = Duration::from_millis(self.config.limits.stream_idle_timeout_ms);
        tokio::select! {
            _ = cancel.cancelled() => Err(ProviderError::Cancelled),
            r = tokio::time::timeout(idle, stream.next()) => match r {
                Err(_) => Err(ProviderError::Timeout {
                    url: self.url.clone(),
                    limit_ms: self.config.limits.stream_idle_timeout_ms,
                    what: "no data within the stream idle timeout",
                }),
                Ok(None) => Ok(None),
                Ok(Some(Ok(b))) => Ok(Some(b)),
                Ok(Some(Err(e))) => Err(self.body_error(e)),
            }
        }
    }

    async fn read_body(
        &self,
        resp: reqwest::Response,
        cancel: &CancellationToken,
    ) -> Result<Vec<u8>, ProviderError> {
        let limit = self.config.limits.max_response_bytes;
        if resp.content_length().is_some_and(|n| n > limit as u64) {
            return Err(ProviderError::ResponseTooLarge { limit_bytes: limit });
        }
        let mut stream = resp.bytes_stream();
        let mut out = Vec::new();
        while let Some(chunk) = self.next_chunk(&mut stream, cancel).await? {
            if out.len() + chunk.len() > limit {
                return Err(ProviderError::ResponseTooLarge { limit_bytes: limit });
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    async fn read_error_body(&self, resp: reqwest::Response, cancel: &CancellationToken) -> String {
        let limit = self.config.limits.max_error_body_bytes;
        let mut stream = resp.bytes_stream();
        let mut out = Vec::new();
        while let Ok(Some(chunk)) = self.next_chunk(&mut stream, cancel).await {
            let room = limit.saturating_sub(out.len());
            out.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if out.len() >= limit {
                break;
            }
        }
        sse::snippet(String::from_utf8_lossy(&out).trim())
    }

    async fn read_stream(
        &self,
        resp: reqwest::Response,
        cancel: &CancellationToken,
        observer: &mut Observer<'_>,
    ) -> Result<ModelResponse, ProviderError> {
        let limit = self.config.limits.max_response_bytes;
        let mut parser = SseParser::new(self.config.limits.max_sse_line_bytes);
        let mut asm = Assembler::new(self.config.api);
        let mut total = 0usize;
        let mut stream = resp.bytes_stream();
        let mut handle = |asm: &mut Assembler, data: &str| -> Result<(), ProviderError> {
            for d in asm.push_event(data)? {
                match &d {
                    Delta::Text(t) => observer(StreamEvent::Text(t)),
                    Delta::Reasoning(t) => observer(StreamEvent::Reasoning(t)),
                    Delta::ToolCallStart { index, name } => observer(StreamEvent::ToolCallStart {
                        index: *index,
                        name,
                    }),
                }
            }
            Ok(())
        };
        loop {
            let chunk = match self.next_chunk(&mut stream, cancel).await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                // A broken connection after the final chunk is not a failure.
                Err(ProviderError::Transport { .. }) if asm.is_complete() => {
                    break;
                }
                Err(e) => return Err(e),
            };
            total += chunk.len();
            if total > limit {
                return Err(ProviderError::ResponseTooLarge { limit_bytes: limit });
            }
            for data in parser.feed(&chunk)? {
                handle(&mut asm, &data)?;
            }
            if asm.is_done() {
                break;
            }
        }
        if let Some(data) = parser.finish() {
            handle(&mut asm, &data)?;
        }
        if !asm.is_complete() {
            return Err(ProviderError::IncompleteStream {
                detail: format!(
                    "{} event(s) received, {}",
                    asm.events(),
                    match self.config.api {
                        Api::Chat => "no finish_reason and no [DONE]",
                        Api::Responses => "no response.completed",
                        Api::Anthropic => "no stop_reason and no message_stop",
                    }
                ),
            });
        }
        asm.finish()
    }
}

/// The stream assembler of each protocol (one per attempt; sizes do not matter).
#[allow(clippy::large_enum_variant)]
enum Assembler {
    Chat(StreamAssembler),
    Responses(responses::ResponsesAssembler),
    Anthropic(anthropic::AnthropicAssembler),
}

impl Assembler {
    fn new(api: Api) -> Self {
        match api {
            Api::Chat => Assembler::Chat(StreamAssembler::new()),
            Api::Responses => Assembler::Responses(responses::ResponsesAssembler::new()),
            Api::Anthropic => Assembler::Anthropic(anthropic::AnthropicAssembler::new()),
        }
    }

    fn push_event(&mut self, data: &str) -> Result<Vec<Delta>, ProviderError> {
        match self {
            Assembler::Chat(a) => a.push_event(data),
            Assembler::Responses(a) => a.push_event(data),
            Assembler::Anthropic(a) => a.push_event(data),
        }
    }

    /// The protocol's last event arrived: stop reading.
    fn is_done(&self) -> bool {
        match self {
            Assembler::Chat(a) => a.is_done(),
            Assembler::Responses(a) => a.is_done(),
            Assembler::Anthropic(a) => a.is_done(),
        }
    }

    /// The response is whole (a connection broken after this point is not a failure).
    fn is_complete(&self) -> bool {
        match self {
            Assembler::Chat(a) => a.is_done() || a.has_finish_reason() && a.chunks() > 0,
            Assembler::Responses(a) => a.is_complete(),
            Assembler::Anthropic(a) => a.is_complete(),
        }
    }

    fn events(&self) -> u64 {
        match self {
            Assembler::Chat(a) => a.chunks(),
            Assembler::Responses(a) => a.events(),
            Assembler::Anthropic(a) => a.events(),
        }
    }

    fn finish(self) -> Result<ModelResponse, ProviderError> {
        match self {
            Assembler::Chat(a) => Ok(a.finish()),
            Assembler::Responses(a) => a.finish(),
            Assembler::Anthropic(a) => a.finish(),
        }
    }
}

/// Estimated tokens of a request body: its JSON bytes over 4, rounded up.
pub fn estimate_tokens(body: &Value) -> u64 {
    (body.to_string().len() as u64).div_ceil(4)
}

fn root_cause(e: &dyn std::error::Error) -> String {
    let mut last = e;
    while let Some(c) = last.source() {
        last = c;
    }
    last.to_string()
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// `Retry-After` in seconds (HTTP dates are not honoured; the backoff applies instead).
fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_millis((s * 1000.0) as u64))
}

#[cfg(test)]
mod tests;
