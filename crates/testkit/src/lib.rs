//! A scripted OpenAI-compatible chat-completions server for tests: real HTTP on
//! 127.0.0.1, real SSE for `stream: true` requests, plain JSON otherwise.
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

mod script;

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::watch;

pub use script::{
    Predicate, Reply, RequestPredicate, Script, ScriptedCall, ScriptedResponse, Step, When,
};

struct Inner {
    steps: Vec<(Step, bool)>,
    requests: Vec<Value>,
    unmatched: usize,
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
                unmatched: 0,
                log,
            }),
            shutdown: shutdown.clone(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/chat/completions", post(handle))
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

fn error_json(status: StatusCode, message: String) -> Response {
    let body = json!({"error": {"message": message, "type": "scripted_server"}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn handle(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error_json(
                StatusCode::BAD_REQUEST,
                format!("request body is not JSON: {e}"),
            );
        }
    };
    let stream = request
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let include_usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let (number, step) = {
        let mut inner = shared.lock();
        inner.requests.push(request.clone());
        let number = inner.requests.len();
        if let Some(log) = inner.log.as_mut() {
            let line = format!("{request}\n");
            if let Err(e) = log.write_all(line.as_bytes()).and_then(|()| log.flush()) {
                tracing::warn!(error = %e, "cannot append to the request log");
            }
        }
        let found = inner
            .steps
            .iter_mut()
            .find(|(s, used)| !*used && s.matches(&request, number));
        let step = found.map(|(s, used)| {
            if !s.repeat {
                *used = true;
            }
            s.clone()
        });
        if step.is_none() {
            inner.unmatched += 1;
        }
        (number, step)
    };
    let Some(step) = step else {
        tracing::warn!(number, "no scripted step matches the request");
        return error_json(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("scripted server: no step matches request {number}"),
        );
    };
    let mut shutdown = shared.shutdown.clone();
    if step.delay_ms > 0 {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(step.delay_ms)) => {}
            _ = shutdown.wait_for(|s| *s) => {
                return error_json(StatusCode::SERVICE_UNAVAILABLE, "shutting down".into());
            }
        }
    }
    match step.reply {
        Reply::Status {
            status,
            retry_after,
            body,
        } => {
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut resp = error_json(
                code,
                body.unwrap_or_else(|| format!("scripted failure {status}")),
            );
            if let Some(ra) = retry_after
                && let Ok(v) = HeaderValue::from_str(&ra)
            {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
            resp
        }
        Reply::PlainJson(r) => json_response(&r, number),
        Reply::Response(r) if !stream => json_response(&r, number),
        Reply::Response(r) => {
            let delay = r.chunk_delay_ms;
            sse_response(
                r.to_sse_events(number, include_usage),
                None,
                delay,
                shutdown,
                false,
            )
        }
        Reply::StreamThenHang {
            response,
            after_chunks,
        } => sse_response(
            response.to_sse_events(number, include_usage),
            Some(after_chunks),
            response.chunk_delay_ms,
            shutdown,
            false,
        ),
        Reply::StreamThenDrop {
            response,
            after_chunks,
        } => sse_response(
            response.to_sse_events(number, include_usage),
            Some(after_chunks),
            response.chunk_delay_ms,
            shutdown,
            true,
        ),
    }
}

fn json_response(r: &ScriptedResponse, number: usize) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        r.to_json(number).to_string(),
    )
        .into_response()
}

enum Then {
    Finish,
    Hang,
    Drop,
}

fn sse_response(
    events: Vec<String>,
    cut_after: Option<usize>,
    delay_ms: u64,
    shutdown: watch::Receiver<bool>,
    drop: bool,
) -> Response {
    let (events, then) = match cut_after {
        None => (events, Then::Finish),
        Some(n) => (
            events.into_iter().take(n).collect(),
            if drop { Then::Drop } else { Then::Hang },
        ),
    };
    struct St {
        events: std::vec::IntoIter<String>,
        then: Option<Then>,
        first: bool,
        delay_ms: u64,
        shutdown: watch::Receiver<bool>,
    }
    let st = St {
        events: events.into_iter(),
        then: Some(then),
        first: true,
        delay_ms,
        shutdown,
    };
    let stream = futures_util::stream::unfold(st, |mut st| async move {
        if let Some(ev) = st.events.next() {
            if !st.first && st.delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(st.delay_ms)).await;
            }
            st.first = false;
            let item: Result<Bytes, std::io::Error> = Ok(Bytes::from(format!("data: {ev}\n\n")));
            return Some((item, st));
        }
        match st.then.take()? {
            Then::Finish => None,
            Then::Hang => {
                let _ = st.shutdown.wait_for(|s| *s).await;
                let item: Result<Bytes, std::io::Error> =
                    Err(std::io::Error::other("server shut down"));
                Some((item, st))
            }
            Then::Drop => {
                let item: Result<Bytes, std::io::Error> =
                    Err(std::io::Error::other("scripted connection drop"));
                Some((item, st))
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|e| error_json(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}
