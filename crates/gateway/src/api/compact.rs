//! Compacting a session's context now (`POST /v1/sessions/{id}/compact`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::helpers::{body_json, path_id};
use crate::error::{ApiError, ApiResult};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactBody {
    /// Complete turns kept verbatim after the summary (the gateway's setting when absent).
    keep_turns: Option<u64>,
}

/// Compacts a session's context now: summarises the history before its last turns into a
/// `compaction` record (what is sent to the model shrinks; every record stays). 200 with
/// `compacted` true or false (nothing to summarise); 409 while it runs or owes work.
pub(super) async fn compact(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let b: CompactBody = body_json(body, st.hub.cfg.limits.max_body_bytes, true)?;
    if st.hub.is_draining() {
        return Err(ApiError::unavailable("the gateway is shutting down"));
    }
    let actor = st.hub.session(&id).await?;
    let v = match st.hub.compact(&actor, b.keep_turns).await? {
        Some((seq, d)) => json!({
            "id": id, "compacted": true, "seq": seq,
            "from_seq": d["from_seq"], "through_seq": d["through_seq"],
            "tokens_before": d["tokens_before"], "tokens_after": d["tokens_after"],
        }),
        None => json!({"id": id, "compacted": false}),
    };
    Ok(Json(v).into_response())
}
