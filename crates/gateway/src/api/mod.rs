//! HTTP routes (axum).
//!
//! The router, the state its handlers share and the middleware (request counting, the bearer
//! token) live here; the handlers are grouped by what they serve: `sessions` (list, create,
//! show, records), `inputs` (messages and system events), `approvals` (calls waiting for a
//! person, and decisions on them), `compact`, `fork`, `live` (the SSE
//! tail) and `health` (health, readiness, metrics). `helpers` holds what several of them use.

pub mod approvals;
mod compact;
mod fork;
mod health;
mod helpers;
mod inputs;
mod live;
mod sessions;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio_util::sync::CancellationToken;

use crate::auth;
use crate::error::ApiError;
use crate::hub::Hub;
use compact::compact;
use fork::fork;
use health::{metrics, readyz};
use inputs::{post_event, post_message};
use live::stream;
use sessions::{create_session, list_sessions, records, show_session};

pub(crate) use health::healthz;

/// Shared by the handlers.
#[derive(Clone)]
pub struct AppState {
    pub hub: Arc<Hub>,
    pub token: Arc<str>,
    /// Cancelled when the server stops accepting: live tails end.
    pub stop: CancellationToken,
}

/// The whole application.
pub fn router(state: AppState) -> Router {
    let limit = state.hub.cfg.limits.max_body_bytes;
    let v1 = Router::new()
        .route("/sessions", get(list_sessions).post(create_session))
        .route("/sessions/{id}", get(show_session))
        .route("/sessions/{id}/records", get(records))
        .route("/sessions/{id}/stream", get(stream))
        .route("/sessions/{id}/messages", post(post_message))
        .route("/sessions/{id}/events", post(post_event))
        .route("/sessions/{id}/fork", post(fork))
        .route("/sessions/{id}/compact", post(compact))
        .route("/sessions/{id}/approvals", get(approvals::list_approvals))
        .route(
            "/sessions/{id}/approvals/{call_id}",
            post(approvals::post_approval),
        )
        .layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .nest("/v1", v1)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed("method not allowed on this route")
}

async fn count_requests(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let resp = next.run(req).await;
    st.hub.metrics.http_request(&route, resp.status().as_u16());
    resp
}

async fn require_token(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let h = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if !auth::check_bearer(h, &st.token) {
        let mut r = ApiError::unauthorized("missing or wrong bearer token (Authorization: Bearer <token from the token file or LAZARUS_TOKEN>)",
        )
        .into_response();
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    next.run(req).await
}
