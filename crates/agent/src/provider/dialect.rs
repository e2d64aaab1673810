//! The one seam between the client and a wire protocol. The client does HTTP, retries,
//! limits and cancellation; a [`Dialect`] says how a request body is written, how a whole
//! response body is read, how a stream is assembled, and which headers authenticate.
//!
//! Adding a protocol is adding one module that implements these two traits, and one arm in
//! [`Api::dialect`](super::Api::dialect).

use serde_json::{Map, Value};

use super::error::ProviderError;
use super::wire::Delta;
use crate::model::{ModelRequest, ModelResponse};

/// One model wire protocol.
pub trait Dialect: Sync {
    /// The JSON body for `req`. `extra` fields are added at top level without overriding the
    /// ones the dialect sets.
    fn request_body(&self, req: &ModelRequest, extra: &Map<String, Value>) -> Value;

    /// Parses a whole (non-streamed) response body.
    fn parse_body(&self, body: &[u8]) -> Result<ModelResponse, ProviderError>;

    /// A fresh assembler for one streamed attempt.
    fn assembler(&self) -> Box<dyn StreamAssembly>;

    /// Adds the authentication (and version) headers.
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        api_key: Option<&str>,
    ) -> reqwest::RequestBuilder {
        match api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// What a stream that ended early lacked, for the error ("no response.completed").
    fn missing_end(&self) -> &'static str;
}

/// Turns the events of one streamed response into a [`ModelResponse`].
pub trait StreamAssembly: Send {
    /// Applies the data of one SSE event; returns what is new, for live output.
    fn push_event(&mut self, data: &str) -> Result<Vec<Delta>, ProviderError>;

    /// The protocol's last event arrived: stop reading.
    fn is_done(&self) -> bool;

    /// The response is whole (a connection broken after this point is not a failure).
    fn is_complete(&self) -> bool;

    /// Events received so far.
    fn events(&self) -> u64;

    /// The assembled response.
    fn finish(self: Box<Self>) -> Result<ModelResponse, ProviderError>;
}
