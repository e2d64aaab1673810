//! Forking a session after a turn (`POST /v1/sessions/{id}/fork`).

use lazarus_session::SessionId;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::helpers::{blocking, body_json, path_id};
use crate::error::ApiResult;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkBody {
    at_turn: u64,
    id: Option<String>,
}

pub(super) async fn fork(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let b: ForkBody = body_json(body, st.hub.cfg.limits.max_body_bytes, false)?;
    let child = b.id.as_deref().map(SessionId::parse).transpose()?;
    let hub = st.hub.clone();
    let at = b.at_turn;
    let s = blocking(move || Ok(hub.store.fork(&id, at, child.as_ref())?)).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "id": s.id,
            "parent": s.parent,
            "at_turn": at,
            "status": s.status,
            "records": s.records,
            "created_at": s.created_at,
        })),
    )
        .into_response())
}
