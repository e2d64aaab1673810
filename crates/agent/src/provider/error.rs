//! What a completion returns: the errors, and the account of every HTTP attempt.

use serde::{Deserialize, Serialize};

use crate::model::ModelResponse;

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
