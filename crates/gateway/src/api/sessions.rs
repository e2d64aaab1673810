//! The sessions resource: list, create, show one (`describe`), and page through its records.

use lazarus_session::{CallState, SessionId, SessionState, Status};

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::helpers::{blocking, body_json, check_cursor, path_id};
use crate::error::{ApiError, ApiResult};
use crate::hub::Hub;

pub(super) async fn list_sessions(State(st): State<AppState>) -> ApiResult<Json<Value>> {
    let hub = st.hub.clone();
    let list = blocking(move || Ok(hub.store.list()?)).await?;
    let items: Vec<Value> = list
        .into_iter()
        .map(|mut s| {
            // the same fields as `lazarus sessions list --json` (docs/json.md); the status
            // is the live one for a session open here
            if let Some(live) = st.hub.live_status(&s.id) {
                s.status = live;
            }
            s.meta = None;
            serde_json::to_value(s).unwrap_or_default()
        })
        .collect();
    Ok(Json(json!({ "sessions": items })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    id: Option<String>,
    workspace: Option<String>,
    system_prompt: Option<String>,
}

pub(super) async fn create_session(
    State(st): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let b: CreateBody = body_json(body, st.hub.cfg.limits.max_body_bytes, true)?;
    if b.system_prompt.as_ref().map_or(0, String::len) > st.hub.cfg.limits.max_text_bytes {
        return Err(ApiError::too_large(
            "text_too_large",
            "system_prompt is larger than --max-text-bytes",
        ));
    }
    let id = b.id.as_deref().map(SessionId::parse).transpose()?;
    let actor = st.hub.create(id, b.workspace, b.system_prompt).await?;
    let created = Hub::with_state(&actor, |s| s.header.created_at.clone());
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "id": actor.id,
            "status": "new",
            "created_at": created,
            "workspace": actor.workspace,
        })),
    )
        .into_response())
}

fn describe(st: &SessionState, running: bool, workspace: &std::path::Path) -> Value {
    let status = if running {
        Status::Running
    } else {
        st.status()
    };
    let open_calls: Vec<Value> = st
        .unresolved_calls()
        .map(|c| {
            json!({
                "call_id": c.call_id,
                "tool": c.name,
                "turn": c.turn,
                "state": match c.state() {
                    CallState::NotStarted => "not_started",
                    CallState::IntentOnly => "intent_only",
                    CallState::StartedNoOutcome => "started_no_outcome",
                    CallState::Finished => "finished",
                },
            })
        })
        .collect();
    let pending: Vec<Value> = st
        .pending_inputs
        .iter()
        .map(|p| json!({"seq": p.seq, "input_id": p.input_id}))
        .collect();
    json!({
        "id": st.id(),
        "status": status,
        "created_at": st.header.created_at,
        "parent": st.header.parent.as_ref().map(|p| json!({"id": p.id, "seq": p.seq})),
        "records": st.last_seq,
        "turns": st.turn,
        "open_turn": st.open_turn,
        "pending_inputs": pending,
        "open_tool_calls": open_calls,
        "in_doubt_calls": st.in_doubt_count(),
        "last_receipt": st.last_receipt,
        // the workspace in use (the operator's policy decides, not the header)
        "workspace": workspace,
        "work_owed": st.owes_work(),
        // what the session runs with, and the seq that recorded it (0: its header)
        "world": st.world.as_ref().map(|w| json!({"seq": w.seq, "world": w.world})),
        // left alone by a resumer that could not honour its world: why, and what resumes it
        "needs_owner": st.needs_owner.as_ref().map(|(seq, n)| json!({
            "seq": seq, "by": n.by, "reason": n.reason, "resume_with": n.resume_with,
        })),
    })
}

pub(super) async fn show_session(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let id = path_id(id)?;
    let (s, running) = st.hub.state(&id).await?;
    let workspace = match st.hub.session_if_open(&id) {
        Some(open) => open.workspace.clone(),
        None => match s.world.as_ref().and_then(|w| w.world.workspace.as_ref()) {
            Some(w) => w.into(),
            None => st
                .hub
                .workspaces()
                .path_for_existing(s.header.meta.as_ref(), &id),
        },
    };
    Ok(Json(describe(&s, running, &workspace)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RecordsQuery {
    after: Option<u64>,
    limit: Option<usize>,
}

pub(super) async fn records(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    q: Result<Query<RecordsQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let id = path_id(id)?;
    let Query(q) = q.map_err(|e| ApiError::bad_query(e.body_text()))?;
    let max = st.hub.cfg.limits.max_page;
    let limit = match q.limit {
        None => 100.min(max),
        Some(0) => {
            return Err(ApiError::bad_query(format!(
                "limit must be 1 to {max} (records per page)"
            )));
        }
        Some(n) => n.min(max),
    };
    let after = q.after.unwrap_or(0);
    let hub = st.hub.clone();
    let idc = id.clone();
    let recs = blocking(move || Ok(hub.store.records(&idc, after, limit)?)).await?;
    if recs.is_empty() && after > 0 {
        // An empty page: the end of the session, or a cursor past it (which no answer of
        // this server ever gave, so it is refused rather than answered with nothing forever).
        let last = st.hub.summary(&id).await?.records;
        check_cursor(after, last, "after")?;
    }
    let next = recs.last().map(|r| r.seq);
    Ok(Json(json!({"records": recs, "next_after": next})))
}
