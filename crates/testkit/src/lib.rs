//! A scripted model server for tests: real HTTP on 127.0.0.1 speaking three protocols —
//! OpenAI chat completions (`/v1/chat/completions`), the Anthropic Messages API
//! (`/v1/messages`, plus `/v1/messages/count_tokens`) and the OpenAI Responses API
//! (`/v1/responses`) — with real SSE for `stream: true` requests and plain JSON otherwise.
//!
//! One [`Script`] serves all three: each request is first viewed in chat-completions shape
//! (system / user / assistant with `tool_calls` / `tool` messages), so the same [`When`]
//! rules match it, and the chosen [`ScriptedResponse`] is rendered in the request's own
//! protocol (`reasoning` becomes a `thinking` block with a `signature`, or a `reasoning`
//! item with `encrypted_content`; see [`ScriptedServer::opaque_round_trips`]). Faults:
//! [`Reply::Status`] (e.g. 529 `overloaded_error`), [`Reply::StreamThenError`],
//! [`Reply::StreamThenHang`], [`Reply::StreamThenDrop`].
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use lazarus_testkit::{Reply, Script, ScriptedResponse, ScriptedServer, Step};
//! use serde_json::json;
//! let server = ScriptedServer::start(Script::new([
//!     // turn 1 → a tool call
//!     Step::reply(ScriptedResponse::tool_call("call_a", "shell", json!({"command": "ls"})))
//!         .when(lazarus_testkit::When::LastUserContains { text: "list".into() }),
//!     // after the result of call_a → final text
//!     Step::after_tool_result("call_a", ScriptedResponse::text("done")),
//! ]))
//! .await?;
//! let base_url = server.base_url(); // http://127.0.0.1:PORT/v1
//! // ... run the client against base_url ...
//! assert_eq!(server.request_count(), 2);
//! # Ok(()) }
//! ```

pub mod acp_clients;
pub mod anthropic;
pub mod mcp_servers;
pub mod pg;
pub mod pty;
pub mod responses;
mod script;
pub mod sse;
pub mod tmux;

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::watch;

pub use script::{
    Predicate, Reply, RequestPredicate, Script, ScriptedCall, ScriptedResponse, Step, When,
};
use sse::{SseEvent, Then};

/// The API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// OpenAI chat completions.
    Chat,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    Responses,
}

/// Where an opaque reasoning value (thinking signature, encrypted reasoning content) was
/// issued, and the later requests that sent it back byte-identical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpaqueRoundTrip {
    /// The value as issued.
    pub value: String,
    /// The request number whose reply carried it.
    pub issued_in: usize,
    /// Later requests that carried it back unchanged.
    pub echoed_in: Vec<usize>,
}

struct Inner {
    steps: Vec<(Step, bool)>,
    requests: Vec<Value>,
    headers: Vec<Vec<(String, String)>>,
    protocols: Vec<Protocol>,
    unmatched: usize,
    other: Vec<String>,
    issued: Vec<OpaqueRoundTrip>,
    foreign_opaque: Vec<(usize, String)>,
    log: Option<std::fs::File>,
}

struct Shared {
    inner: Mutex<Inner>,
    shutdown: watch::Receiver<bool>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking test thread must not hide what the server recorded.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running scripted server. Dropping it stops the server (hanging streams end).
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Options for [`ScriptedServer::start_with`].
#[derive(Debug, Default, Clone)]
pub struct ServerOptions {
    /// Port to bind on 127.0.0.1 (0 = any free port).
    pub port: u16,
    /// Append every request body to this file, one JSON line each (flushed per request).
    pub request_log: Option<std::path::PathBuf>,
}

impl ScriptedServer {
    /// Starts the server on 127.0.0.1 with a free port.
    pub async fn start(script: Script) -> std::io::Result<Self> {
        Self::start_with(script, ServerOptions::default()).await
    }

    pub async fn start_with(script: Script, options: ServerOptions) -> std::io::Result<Self> {
        let log = match &options.request_log {
            Some(p) => Some(open_log(p)?),
            None => None,
        };
        let (stop, shutdown) = watch::channel(false);
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                steps: script.steps.into_iter().map(|s| (s, false)).collect(),
                requests: Vec::new(),
                headers: Vec::new(),
                protocols: Vec::new(),
                unmatched: 0,
                other: Vec::new(),
                issued: Vec::new(),
                foreign_opaque: Vec::new(),
                log,
            }),
            shutdown: shutdown.clone(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(handle_chat))
            .route("/chat/completions", post(handle_chat))
            .route("/v1/messages", post(handle_anthropic))
            .route("/messages", post(handle_anthropic))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route("/v1/responses", post(handle_responses))
            .route("/responses", post(handle_responses))
            .route("/v1/models", axum::routing::get(list_models))
            .route("/models", axum::routing::get(list_models))
            .fallback(not_scripted)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port)).await?;
        let addr = listener.local_addr()?;
        let mut rx = shutdown;
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.wait_for(|s| *s).await;
                })
                .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "scripted server stopped with an error");
            }
        });
        Ok(ScriptedServer {
            addr,
            shared,
            stop,
            task: Some(task),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/v1`, the base URL for an OpenAI-compatible client.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request body received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.lock().requests.clone()
    }

    /// The headers of each request (lower-case names, values as text), in the order of
    /// [`ScriptedServer::requests`]: e.g. to check `x-api-key` and `anthropic-version`, or
    /// `authorization`.
    pub fn request_headers(&self) -> Vec<Vec<(String, String)>> {
        self.shared.lock().headers.clone()
    }

    /// The protocol of each request, in the order of [`ScriptedServer::requests`].
    pub fn protocols(&self) -> Vec<Protocol> {
        self.shared.lock().protocols.clone()
    }

    /// Requests to paths the server does not script (`METHOD /path`), answered 404.
    pub fn other_requests(&self) -> Vec<String> {
        self.shared.lock().other.clone()
    }

    /// Every opaque reasoning value issued so far, with the later requests that sent it back
    /// byte-identical. A client that drops or alters a signature shows up here as a value
    /// never echoed, and in [`ScriptedServer::unknown_opaque`].
    pub fn opaque_round_trips(&self) -> Vec<OpaqueRoundTrip> {
        self.shared.lock().issued.clone()
    }

    /// Opaque values found in requests that the server never issued (request number, value):
    /// altered signatures or encrypted content end up here.
    pub fn unknown_opaque(&self) -> Vec<(usize, String)> {
        self.shared.lock().foreign_opaque.clone()
    }

    pub fn request_count(&self) -> usize {
        self.shared.lock().requests.len()
    }

    /// Requests no step matched (answered with HTTP 422).
    pub fn unmatched_count(&self) -> usize {
        self.shared.lock().unmatched
    }

    /// Steps not used yet (repeatable steps never count as used).
    pub fn remaining_steps(&self) -> usize {
        self.shared
            .lock()
            .steps
            .iter()
            .filter(|(_, used)| !used)
            .count()
    }

    /// Adds a step at the end of the script.
    pub fn push_step(&self, step: Step) {
        self.shared.lock().steps.push((step, false));
    }

    /// Stops accepting, ends hanging streams and waits for the server task.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// An error body in the protocol's own shape.
fn error_response(
    protocol: Protocol,
    status: StatusCode,
    error_type: Option<&str>,
    message: String,
    number: usize,
) -> Response {
    let body = match protocol {
        Protocol::Anthropic => anthropic::error_body(
            error_type.unwrap_or(anthropic::error_type(status.as_u16())),
            &message,
            number,
        ),
        Protocol::Responses => {
            responses::error_body(error_type.unwrap_or("server_error"), &message)
        }
        Protocol::Chat => {
            json!({"error": {"message": message, "type": error_type.unwrap_or("scripted_server")}})
        }
    };
    let mut resp = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response();
    if protocol == Protocol::Anthropic
        && let Ok(v) = HeaderValue::from_str(&format!("req_scripted{number:06}"))
    {
        resp.headers_mut().insert("request-id", v);
    }
    resp
}

async fn handle_chat(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    handle(shared, Protocol::Chat, headers, body).await
}

async fn handle_anthropic(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    handle(shared, Protocol::Anthropic, headers, body).await
}

async fn handle_responses(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    handle(shared, Protocol::Responses, headers, body).await
}

/// `POST /v1/messages/count_tokens`: a rough count (4 bytes a token); not a scripted step.
async fn count_tokens(body: Bytes) -> Response {
    let n = body.len() / 4;
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        json!({"input_tokens": n}).to_string(),
    )
        .into_response()
}

async fn not_scripted(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    let what = format!("{method} {uri}");
    tracing::warn!(request = %what, "scripted server: path not scripted");
    shared.lock().other.push(what.clone());
    error_response(
        Protocol::Chat,
        StatusCode::NOT_FOUND,
        Some("not_found_error"),
        format!("scripted server: no route for {what}"),
        0,
    )
}

/// One request to a protocol endpoint: parse it, record it and pick its step, wait the
/// step's delay, then answer as the step says.
async fn handle(
    shared: Arc<Shared>,
    protocol: Protocol,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error_response(
                protocol,
                StatusCode::BAD_REQUEST,
                Some("invalid_request_error"),
                format!("request body is not JSON: {e}"),
                0,
            );
        }
    };
    let headers = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let (number, step) = shared.lock().record(protocol, &request, headers);
    let Some(step) = step else {
        tracing::warn!(number, "no scripted step matches the request");
        return error_response(
            protocol,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("invalid_request_error"),
            format!("scripted server: no step matches request {number}"),
            number,
        );
    };
    let mut shutdown = shared.shutdown.clone();
    if step.delay_ms > 0 {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(step.delay_ms)) => {}
            _ = shutdown.wait_for(|s| *s) => {
                return error_response(protocol, StatusCode::SERVICE_UNAVAILABLE, None, "shutting down".into(), number);
            }
        }
    }
    let call = Call {
        protocol,
        number,
        request,
    };
    call.reply(numbered_call_ids(step.reply, number), shutdown)
}

/// `{n}` in a scripted tool call id becomes the request number, so one repeated step can
/// give every request its own call ids (a session's call ids must be unique).
fn numbered_call_ids(mut reply: Reply, number: usize) -> Reply {
    let n = number.to_string();
    let fix = |r: &mut ScriptedResponse| {
        for c in &mut r.tool_calls {
            if c.id.contains("{n}") {
                c.id = c.id.replace("{n}", &n);
            }
        }
    };
    match &mut reply {
        Reply::Response(r) | Reply::PlainJson(r) => fix(r),
        Reply::StreamThenHang { response, .. } => fix(response),
        _ => {}
    }
    reply
}

impl Inner {
    /// Records a request (its number, protocol, the opaque values it echoes, the log line)
    /// and picks the first unused step that matches it.
    fn record(
        &mut self,
        protocol: Protocol,
        request: &Value,
        headers: Vec<(String, String)>,
    ) -> (usize, Option<Step>) {
        let view = match protocol {
            Protocol::Chat => None,
            Protocol::Anthropic => Some(anthropic::normalize(request)),
            Protocol::Responses => Some(responses::normalize(request)),
        };
        let echoed = match protocol {
            Protocol::Chat => Vec::new(),
            Protocol::Anthropic => anthropic::opaque_in_request(request),
            Protocol::Responses => responses::opaque_in_request(request),
        };
        self.requests.push(request.clone());
        self.headers.push(headers);
        self.protocols.push(protocol);
        let number = self.requests.len();
        for v in echoed {
            match self.issued.iter_mut().find(|t| t.value == v) {
                Some(t) => t.echoed_in.push(number),
                None => self.foreign_opaque.push((number, v)),
            }
        }
        if let Some(log) = self.log.as_mut() {
            let line = format!("{request}\n");
            if let Err(e) = log.write_all(line.as_bytes()).and_then(|()| log.flush()) {
                tracing::warn!(error = %e, "cannot append to the request log");
            }
        }
        let seen = view.as_ref().unwrap_or(request);
        let step = self
            .steps
            .iter_mut()
            .find(|(s, used)| !*used && s.matches(seen, number))
            .map(|(s, used)| {
                if !s.repeat {
                    *used = true;
                }
                s.clone()
            });
        if step.is_none() {
            self.unmatched += 1;
        }
        if let Some(r) = step.as_ref().and_then(|s| s.reply.response())
            && r.reasoning.is_some()
            && protocol != Protocol::Chat
        {
            self.issued.push(OpaqueRoundTrip {
                value: r.opaque(number),
                issued_in: number,
                echoed_in: Vec::new(),
            });
        }
        (number, step)
    }
}

/// A matched request, answered in its protocol's shape.
struct Call {
    protocol: Protocol,
    number: usize,
    request: Value,
}

impl Call {
    fn wants_stream(&self) -> bool {
        self.request
            .get("stream")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The whole response as the protocol's stream events.
    fn events(&self, r: &ScriptedResponse) -> Vec<SseEvent> {
        let (number, request) = (self.number, &self.request);
        match self.protocol {
            Protocol::Chat => {
                let include_usage = request
                    .pointer("/stream_options/include_usage")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                r.to_sse_events(number, include_usage)
                    .into_iter()
                    .map(SseEvent::data)
                    .collect()
            }
            Protocol::Anthropic => anthropic::to_sse(r, number, request),
            Protocol::Responses => responses::to_sse(r, number, request),
        }
    }

    /// The first `n` stream events.
    fn cut(&self, r: &ScriptedResponse, n: usize) -> Vec<SseEvent> {
        let mut e = self.events(r);
        e.truncate(n);
        e
    }

    /// The whole response as one JSON body.
    fn json_body(&self, r: &ScriptedResponse) -> Response {
        let v = match self.protocol {
            Protocol::Chat => r.to_json(self.number),
            Protocol::Anthropic => anthropic::to_json(r, self.number, &self.request),
            Protocol::Responses => responses::to_json(r, self.number, &self.request),
        };
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            v.to_string(),
        )
            .into_response()
    }

    /// The protocol's in-stream error event that ends a stream cut after `after_chunks`.
    fn error_event(
        &self,
        r: &ScriptedResponse,
        after_chunks: usize,
        ty: &str,
        msg: &str,
    ) -> SseEvent {
        match self.protocol {
            Protocol::Anthropic => anthropic::error_event(ty, msg, self.number),
            Protocol::Responses => {
                responses::failed_event(r, self.number, &self.request, ty, msg, after_chunks)
            }
            Protocol::Chat => {
                SseEvent::data(json!({"error": {"message": msg, "type": ty}}).to_string())
            }
        }
    }

    fn reply(&self, reply: Reply, shutdown: watch::Receiver<bool>) -> Response {
        match reply {
            Reply::Status {
                status,
                retry_after,
                body,
                error_type,
            } => {
                let code =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let mut resp = error_response(
                    self.protocol,
                    code,
                    error_type.as_deref(),
                    body.unwrap_or_else(|| format!("scripted failure {status}")),
                    self.number,
                );
                if let Some(ra) = retry_after
                    && let Ok(v) = HeaderValue::from_str(&ra)
                {
                    resp.headers_mut().insert(header::RETRY_AFTER, v);
                }
                resp
            }
            Reply::PlainJson(r) => self.json_body(&r),
            Reply::Response(r) if !self.wants_stream() => self.json_body(&r),
            Reply::Response(r) => {
                sse::stream(self.events(&r), Then::Finish, r.chunk_delay_ms, shutdown)
            }
            Reply::StreamThenHang {
                response,
                after_chunks,
            } => sse::stream(
                self.cut(&response, after_chunks),
                Then::Hang,
                response.chunk_delay_ms,
                shutdown,
            ),
            Reply::StreamThenDrop {
                response,
                after_chunks,
            } => sse::stream(
                self.cut(&response, after_chunks),
                Then::Drop,
                response.chunk_delay_ms,
                shutdown,
            ),
            Reply::StreamThenError {
                response,
                after_chunks,
                error_type,
                message,
            } => {
                let ty = error_type.unwrap_or_else(|| "overloaded_error".into());
                let msg = message.unwrap_or_else(|| "Overloaded".into());
                let last = self.error_event(&response, after_chunks, &ty, &msg);
                sse::stream(
                    self.cut(&response, after_chunks),
                    Then::Error(last),
                    response.chunk_delay_ms,
                    shutdown,
                )
            }
        }
    }
}

/// `GET /v1/models`: one model, as a server with one model loaded (llama.cpp, vLLM) answers;
/// clients that take "the server's only model" need no `--model`.
async fn list_models() -> Response {
    axum::Json(serde_json::json!({
        "object": "list",
        "data": [{"id": SCRIPTED_MODEL, "object": "model", "owned_by": "lazarus-testkit"}],
    }))
    .into_response()
}

/// The name `GET /v1/models` lists.
pub const SCRIPTED_MODEL: &str = "scripted";
