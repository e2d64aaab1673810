//! An in-process gateway for the property tests and the fuzz target (`crates/gateway/fuzz`):
//! the real router and hub over a local session directory (no syncs, sessions never run),
//! requests decoded from bytes, and the rule every answer must keep. Not an API.
//!
//! The byte format of a request: the first byte's low bit says whether to send the bearer
//! token; then `METHOD TARGET` up to the first newline, then `Name: value` lines up to an
//! empty line, then the body. Requests that could not be sent over HTTP/1.1 at all (a
//! method or target hyper would not parse) decode to `None`.

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Method, Request, Uri, header};
use axum::response::Response;
use lazarus_agent::provider::ProviderConfig;
use lazarus_agent::runner::RunnerConfig;
use lazarus_agent::tools::Toolbox;
use lazarus_ledger::Durability;
use lazarus_session::LocalStore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::api::{AppState, router};
use crate::hub::{Hub, HubConfig, Limits};

/// The bearer token of the in-process gateway.
pub const TOKEN: &str = "harness-token-0123456789abcdef";

/// Every status the API documents (docs/gateway.md, "Errors" and the routes). 500 is not
/// among them: over a healthy store no request, however malformed, may get one.
pub const DOCUMENTED_STATUSES: [u16; 12] =
    [200, 201, 202, 400, 401, 404, 405, 409, 413, 422, 429, 503];

/// Largest answer body read by [`check`].
const ANSWER_BYTES_MAX: usize = 8 << 20;

/// The gateway, in process.
pub struct InProcess {
    pub router: Router,
    pub hub: Arc<Hub>,
}

impl InProcess {
    /// A gateway over `dir/sessions` with workspaces in `dir/workspaces`, recovered and ready.
    /// Call inside a tokio runtime (its handle drives the hub).
    pub async fn start(dir: &Path) -> anyhow::Result<Self> {
        let store = LocalStore::with_durability(&dir.join("sessions"), Durability::None)?;
        let ws = dir.join("workspaces");
        std::fs::create_dir_all(&ws)?;
        let ws = ws.canonicalize()?;
        let runner = RunnerConfig::new(
            ProviderConfig::new("http://127.0.0.1:9/v1"),
            "none",
            ws.clone(),
        );
        let toolbox = Toolbox::default();
        let world = runner.world(
            &toolbox,
            Vec::new(),
            Vec::new(),
            "serve",
            lazarus_session::record::WorldReason::Created,
        );
        let hub = Hub::new(
            Arc::new(store),
            HubConfig {
                workspace_root: ws,
                allowed_workspaces: Vec::new(),
                world,
                store_flag: None,
                limits: Limits {
                    max_body_bytes: 64 * 1024,
                    max_text_bytes: 16 * 1024,
                    ..Limits::default()
                },
                runner,
                toolbox,
                no_run: true,
            },
            tokio::runtime::Handle::current(),
        );
        hub.recover().await?;
        let router = router(AppState {
            hub: hub.clone(),
            token: Arc::from(TOKEN),
            stop: CancellationToken::new(),
        });
        Ok(InProcess { router, hub })
    }

    /// Sends `req` and checks the answer ([`check`]); returns its status.
    pub async fn send(&self, req: Request<Body>) -> Result<u16, String> {
        let what = format!("{} {}", req.method(), req.uri());
        let head = req.method() == Method::HEAD;
        let resp = match self.router.clone().oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        check(resp, head).await.map_err(|e| format!("{what}: {e}"))
    }
}

/// Decodes a request from bytes (see the module documentation).
pub fn request_from_bytes(data: &[u8]) -> Option<Request<Body>> {
    let (&flags, rest) = data.split_first()?;
    let nl = rest.iter().position(|&b| b == b'\n')?;
    let (line, rest) = (&rest[..nl], &rest[nl + 1..]);
    let sp = line.iter().position(|&b| b == b' ')?;
    let method = Method::from_bytes(&line[..sp]).ok()?;
    let uri = Uri::try_from(&line[sp + 1..]).ok()?;
    // what hyper hands a server: a path, with its query, starting with `/`
    if !uri.path().starts_with('/') || uri.scheme().is_some() || uri.authority().is_some() {
        return None;
    }
    let mut req = Request::builder().method(method).uri(uri);
    if flags & 1 == 1 {
        req = req.header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    }
    let mut body = rest;
    loop {
        let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
        let h = &body[..end];
        body = body.get(end + 1..).unwrap_or_default();
        if h.is_empty() {
            break;
        }
        let Some(colon) = h.iter().position(|&b| b == b':') else {
            continue;
        };
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&h[..colon]),
            HeaderValue::from_bytes(h[colon + 1..].trim_ascii()),
        ) else {
            continue;
        };
        req = req.header(name, value);
    }
    req.body(Body::from(body.to_vec())).ok()
}

/// The rule every answer keeps: a documented status (never 500 over a healthy store); an
/// error is `{"error":{"code","message"}}`; 429 and 503 carry `Retry-After`; a JSON answer
/// parses. A live tail (event stream), and the answer to `HEAD` (which has no body), are
/// checked by their head only.
pub async fn check(resp: Response, head: bool) -> Result<u16, String> {
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let retry_after = resp.headers().contains_key(header::RETRY_AFTER);
    if content_type.starts_with("text/event-stream") {
        return if status == 200 {
            Ok(status)
        } else {
            Err(format!("an event stream with status {status}"))
        };
    }
    let body = axum::body::to_bytes(resp.into_body(), ANSWER_BYTES_MAX)
        .await
        .map_err(|e| format!("status {status}: reading the answer: {e}"))?;
    let text = String::from_utf8_lossy(&body);
    if !DOCUMENTED_STATUSES.contains(&status) {
        return Err(format!("undocumented status {status}: {text}"));
    }
    if matches!(status, 429 | 503) && !retry_after {
        return Err(format!("{status} without Retry-After: {text}"));
    }
    if head {
        return Ok(status);
    }
    if content_type.starts_with("application/json") || status >= 400 {
        let v: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| format!("status {status}: the answer is not JSON ({e}): {text}"))?;
        if status >= 400 {
            let e = &v["error"];
            if !e["code"].is_string() || !e["message"].is_string() {
                return Err(format!(
                    "status {status}: not an error object {{\"error\":{{\"code\",\"message\"}}}}: {text}"
                ));
            }
        }
    }
    Ok(status)
}
