//! How the client is set up: the wire protocol ([`Api`]), the server and key
//! ([`ProviderConfig`]), and the explicit limits and retry policy.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::anthropic::Anthropic;
use super::chat::Chat;
use super::dialect::Dialect;
use super::responses::Responses;

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

impl Api {
    /// How this protocol writes requests and reads answers.
    pub fn dialect(self) -> &'static dyn Dialect {
        match self {
            Api::Chat => &Chat,
            Api::Responses => &Responses,
            Api::Anthropic => &Anthropic,
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
