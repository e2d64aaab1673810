//! Inputs to a session: messages and system events (`resume`, `compact`), recorded once per
//! id, or left in the session's inbox when another writer holds it.

use lazarus_session::state::COMPACT_ACTION;
use lazarus_session::{InboxMessage, Status};

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::helpers::{body_json, path_id, who_runs};
use crate::error::{ApiError, ApiResult};
use crate::hub::Hub;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    message_id: Option<String>,
    text: String,
}

fn check_input_id(id: &str, what: &str) -> ApiResult<()> {
    if id.is_empty() || id.len() > 256 || id.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "bad_input_id",
            format!("{what} must be 1 to 256 bytes without control characters"),
        ));
    }
    Ok(())
}

pub(super) async fn post_message(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let limits = &st.hub.cfg.limits;
    let b: MessageBody = body_json(body, limits.max_body_bytes, false)?;
    if b.text.len() > limits.max_text_bytes {
        return Err(ApiError::too_large(
            "text_too_large",
            format!(
                "text is {} bytes; the limit is {} (--max-text-bytes)",
                b.text.len(),
                limits.max_text_bytes
            ),
        ));
    }
    if b.text.trim().is_empty() {
        return Err(ApiError::bad_request("empty_text", "text is empty"));
    }
    let message_id = match b.message_id {
        Some(m) => {
            check_input_id(&m, "message_id")?;
            m
        }
        None => uuid::Uuid::now_v7().to_string(),
    };
    if st.hub.is_draining() {
        return Err(ApiError::unavailable("the gateway is shutting down"));
    }
    let actor = match st.hub.session(&id).await {
        Ok(a) => a,
        // Another writer (a gateway, a `lazarus run`) holds the session, or this gateway has
        // all the sessions open it may: the session's inbox takes the message, durably, and
        // its writer (that one, or this gateway once a session closes) records and answers it.
        Err(e) if e.waits_in_inbox() => {
            let msg = InboxMessage::input(&message_id, "user", &b.text);
            let duplicate = st.hub.deliver(&id, msg).await?;
            return Ok((
                StatusCode::ACCEPTED,
                Json(json!({"queued": true, "duplicate": duplicate, "message_id": message_id})),
            )
                .into_response());
        }
        Err(e) => return Err(e),
    };
    st.hub.admit(&actor)?;
    let (seq, duplicate) = st
        .hub
        .append_input(&actor, message_id.clone(), b.text)
        .await?;
    if duplicate {
        return Ok((
            StatusCode::OK,
            Json(json!({"seq": seq, "duplicate": true, "message_id": message_id})),
        )
            .into_response());
    }
    st.hub.schedule(&actor, "message");
    Ok((
        StatusCode::ACCEPTED,
        Json(who_runs(
            json!({"seq": seq, "duplicate": false, "message_id": message_id}),
            &actor,
        )),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventBody {
    #[serde(rename = "type")]
    kind: String,
    reason: Option<String>,
    idempotency_key: Option<String>,
}

pub(super) async fn post_event(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let b: EventBody = body_json(body, st.hub.cfg.limits.max_body_bytes, false)?;
    // `resume`: continue a cut-off session (answered by a receipt); `compact`: summarise
    // its history before the next turn (answered by a `compaction` record)
    let action = match b.kind.as_str() {
        "resume" => "resume",
        "compact" => COMPACT_ACTION,
        other => {
            return Err(ApiError::bad_request(
                "unsupported_event",
                format!("event type {other:?} is not supported (known: resume, compact)"),
            ));
        }
    };
    if let Some(k) = &b.idempotency_key {
        check_input_id(k, "idempotency_key")?;
    }
    if b.reason.as_ref().map_or(0, String::len) > 4096 {
        return Err(ApiError::too_large(
            "text_too_large",
            "reason is longer than 4096 bytes",
        ));
    }
    if st.hub.is_draining() {
        return Err(ApiError::unavailable("the gateway is shutting down"));
    }
    let actor = match st.hub.session(&id).await {
        Ok(a) => a,
        // Another writer holds the session: the resume event waits in its inbox, once per
        // idempotency key, and that writer acts on it (its receipt says trigger `event`).
        Err(e) if e.waits_in_inbox() => {
            let key = b
                .idempotency_key
                .clone()
                .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
            let msg = InboxMessage::control(&key, action, b.reason.as_deref());
            let duplicate = st.hub.deliver(&id, msg).await?;
            return Ok((
                StatusCode::ACCEPTED,
                Json(json!({"result": "queued", "duplicate": duplicate, "idempotency_key": key})),
            )
                .into_response());
        }
        Err(e) => return Err(e),
    };
    let _g = actor.event_lock.lock().await;
    let (dup_seq, status, owed) = Hub::with_state(&actor, |s| {
        (
            b.idempotency_key
                .as_ref()
                .and_then(|k| s.input_ids.get(k).copied()),
            s.status(),
            s.owes_work(),
        )
    });
    let answer = |code: StatusCode, v: Value| Ok((code, Json(v)).into_response());
    if let Some(seq) = dup_seq {
        return answer(
            StatusCode::OK,
            json!({"result": "duplicate", "seq": seq, "status": if actor.is_running() { Status::Running } else { status }}),
        );
    }
    if action == COMPACT_ACTION {
        // recorded, then compacted by this run (or the one it starts) before its next turn
        st.hub.admit(&actor)?;
        let key = b
            .idempotency_key
            .unwrap_or_else(|| format!("compact-{}", uuid::Uuid::now_v7()));
        let (seq, duplicate) = st.hub.append_control(&actor, key, action, b.reason).await?;
        if duplicate {
            return answer(
                StatusCode::OK,
                json!({"result": "duplicate", "seq": seq, "status": status}),
            );
        }
        let scheduled = st.hub.schedule(&actor, "event");
        return answer(
            StatusCode::ACCEPTED,
            who_runs(
                json!({"result": "compacting", "seq": seq, "scheduled": scheduled}),
                &actor,
            ),
        );
    }
    if actor.is_running() {
        return answer(
            StatusCode::OK,
            json!({"result": "already_running", "status": Status::Running}),
        );
    }
    if !owed {
        return answer(
            StatusCode::OK,
            json!({"result": "finished", "status": status}),
        );
    }
    st.hub.admit(&actor)?;
    let key = b
        .idempotency_key
        .unwrap_or_else(|| format!("resume-{}", uuid::Uuid::now_v7()));
    let (seq, duplicate) = st
        .hub
        .append_control(&actor, key, "resume", b.reason)
        .await?;
    if duplicate {
        return answer(
            StatusCode::OK,
            json!({"result": "duplicate", "seq": seq, "status": status}),
        );
    }
    let scheduled = st.hub.schedule(&actor, "event");
    answer(
        StatusCode::ACCEPTED,
        who_runs(
            json!({"result": "resumed", "seq": seq, "status_before": status, "scheduled": scheduled}),
            &actor,
        ),
    )
}
