//! The HTTP client: one request per attempt, retries on the policy's schedule, the
//! response read as SSE or as a whole body within the limits, cancellation throughout. What
//! differs between the wire protocols is asked of the [`Dialect`](super::Dialect).

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::config::ProviderConfig;
use super::dialect::{Dialect, StreamAssembly};
use super::error::{Attempt, Completion, CompletionFailure, ProviderError};
use super::sse::SseParser;
use super::textcalls::apply_text_tool_calls;
use super::wire::{Delta, snippet};
use crate::model::{ModelRequest, ModelResponse};

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

    fn dialect(&self) -> &'static dyn Dialect {
        self.config.api.dialect()
    }

    /// The JSON body sent for `req` in this client's protocol.
    pub fn body(&self, req: &ModelRequest) -> Value {
        self.dialect().request_body(req, &self.config.extra_body)
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
        let mut rb = self.dialect().authorize(
            self.http.post(&self.url).json(body),
            self.config.api_key.as_deref(),
        );
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
            let r = self.dialect().parse_body(&bytes).map_err(with_status)?;
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
        snippet(String::from_utf8_lossy(&out).trim())
    }

    async fn read_stream(
        &self,
        resp: reqwest::Response,
        cancel: &CancellationToken,
        observer: &mut Observer<'_>,
    ) -> Result<ModelResponse, ProviderError> {
        let limit = self.config.limits.max_response_bytes;
        let mut parser = SseParser::new(self.config.limits.max_sse_line_bytes);
        let mut asm = self.dialect().assembler();
        let mut total = 0usize;
        let mut stream = resp.bytes_stream();
        let mut handle = |asm: &mut Box<dyn StreamAssembly>,
                          data: &str|
         -> Result<(), ProviderError> {
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
                    self.dialect().missing_end()
                ),
            });
        }
        asm.finish()
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
pub(super) fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_millis((s * 1000.0) as u64))
}
