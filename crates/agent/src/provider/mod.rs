//! The model client: one HTTP client for three wire protocols ([`Api`]) — OpenAI-compatible
//! chat completions (`POST {base_url}/chat/completions`, [`chat`]), the OpenAI Responses API
//! (`POST {base_url}/responses`, [`responses`]) and the Anthropic Messages API
//! (`POST {base_url}/v1/messages`, [`anthropic`]) — with reqwest + rustls.
//!
//! Streams with SSE when the request asks for it (each protocol's assembler turns its events
//! into one response) and falls back to the plain JSON body when a server answers a stream
//! request without SSE. Reasoning the provider needs back (Responses `encrypted_content`,
//! Anthropic thinking `signature`) is kept verbatim as
//! [`crate::model::OutputItem::ProviderReasoning`]. Bounded retries with exponential backoff
//! and jitter on 429 (honouring `Retry-After`), 5xx and connection failures; every attempt is
//! reported. Explicit limits on response size, SSE line length, connect/request time and
//! stream idle time. Cancellation through a [`CancellationToken`].
//!
//! Rooms: [`config`](ProviderConfig) (protocol, server, limits, retries), the errors and
//! attempts, the [`OpenAiClient`] (HTTP, retries, reading), the [`Dialect`] trait every
//! protocol implements, the protocols themselves, SSE framing, the parsing helpers they
//! share, and tool calls written as text (`textcalls`).

pub mod anthropic;
pub mod chat;
mod client;
mod config;
mod dialect;
mod error;
pub mod responses;
mod sse;
mod textcalls;
mod wire;

pub use tokio_util::sync::CancellationToken;

pub use chat::{StreamAssembler, parse_completion, request_body};
pub use client::{Observer, OpenAiClient, StreamEvent, estimate_tokens};
pub use config::{Api, ProviderConfig, ProviderLimits, RetryPolicy};
pub use dialect::{Dialect, StreamAssembly};
pub use error::{Attempt, Completion, CompletionFailure, ProviderError};
pub use sse::SseParser;
pub use textcalls::{
    apply_text_tool_calls, dedup_consecutive_tool_calls, drop_truncated_tool_calls,
    merge_repeated_calls, recognise_text_tool_calls,
};
pub use wire::Delta;

#[cfg(test)]
mod tests;
