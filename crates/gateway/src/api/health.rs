//! Health, readiness and metrics: `/healthz`, `/readyz`, `/metrics` (no token).

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::AppState;
use super::helpers::blocking;
use crate::error::{ApiError, ApiResult};
use crate::metrics::{self, Snapshot};

pub(crate) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

pub(super) async fn readyz(State(st): State<AppState>) -> Response {
    if st.hub.is_ready() {
        Json(json!({"ready": true})).into_response()
    } else {
        ApiError::unavailable("startup recovery scan still running").into_response()
    }
}

pub(super) async fn metrics(State(st): State<AppState>) -> ApiResult<Response> {
    let hub = st.hub.clone();
    let sessions = blocking(move || Ok(hub.store.list()?)).await?;
    let mut by_status = std::collections::BTreeMap::<String, i64>::new();
    for s in [
        "new",
        "idle",
        "pending",
        "running",
        "interrupted",
        "in_doubt",
        "stopped",
        "failed",
        "corrupt",
    ] {
        by_status.insert(s.to_string(), 0);
    }
    for s in &sessions {
        let status = st.hub.live_status(&s.id).unwrap_or(s.status);
        *by_status.entry(status.to_string()).or_default() += 1;
    }
    let hub = &st.hub;
    let text = hub.metrics.render(&Snapshot {
        sessions_by_status: by_status.into_iter().collect(),
        sessions_open: hub.open_count() as i64,
        runs_active: hub.running_count() as i64,
        runs_queued: hub.queued_count() as i64,
        ready: hub.is_ready(),
    });
    Ok(([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response())
}
