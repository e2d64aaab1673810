//! Approvals over HTTP: the calls of a session waiting for a person
//! (`GET /v1/sessions/{id}/approvals`) and a decision on one
//! (`POST /v1/sessions/{id}/approvals/{call_id}` with `{"decision","scope","reason"}`).
//!
//! A decision is checked against the session first (an unknown call is `404 no_such_call`, a
//! call that was not asked for `409 not_awaiting_approval`, a different decision taken already
//! `409 conflicting_decision` naming it), then recorded once per call: by this gateway when it
//! holds the session (and the session goes on at once), or through the session's inbox when
//! another writer holds it (that writer records it and goes on).

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use lazarus_session::approval::{DecisionError, Existing, check_decision, check_in_store, pending};
use lazarus_session::inbox::INBOX_MESSAGES_MAX;
use lazarus_session::record::{Approval, Decision, Scope, approval_input_id};
use lazarus_session::{InboxMessage, SessionId};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::helpers::{blocking, body_json, path_id};
use crate::error::{ApiError, ApiResult};
use crate::hub::Hub;

/// Who a decision over the API is recorded as: the gateway has one bearer token, named so.
pub const API_DECIDER: &str = "token:gateway";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    pub decision: Decision,
    pub scope: Option<Scope>,
    pub reason: Option<String>,
}

pub(super) async fn list_approvals(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let hub = st.hub.clone();
    let list = blocking(move || {
        let state = hub.store.load(&id)?;
        let inbox = hub.store.inbox(&id, INBOX_MESSAGES_MAX as usize)?;
        Ok(pending(&state, &inbox))
    })
    .await?;
    Ok(Json(json!({ "approvals": list })).into_response())
}

/// Who a decision made with the web view's buttons is recorded as (the page says so with the
/// `X-Lazarus-Via: web` header; it needs the same token as any API call).
pub const WEB_DECIDER: &str = "web";

pub(super) async fn post_approval(
    State(st): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let Path((id, call_id)) =
        path.map_err(|e| ApiError::bad_request("invalid_id", e.body_text()))?;
    let id = SessionId::parse(&id)?;
    let b: DecisionBody = body_json(body, st.hub.cfg.limits.max_body_bytes, false)?;
    let via_web = headers
        .get("x-lazarus-via")
        .is_some_and(|v| v.as_bytes() == b"web");
    let by = if via_web { WEB_DECIDER } else { API_DECIDER };
    decide(&st.hub, &id, &call_id, b, by).await
}

/// Checks and records one decision (`by`: who decided). Shared with the web view's buttons.
pub async fn decide(
    hub: &std::sync::Arc<Hub>,
    id: &SessionId,
    call_id: &str,
    b: DecisionBody,
    by: &str,
) -> ApiResult<Response> {
    let scope = b.scope.unwrap_or(Scope::Once);
    if hub.is_draining() {
        return Err(ApiError::unavailable("the gateway is shutting down"));
    }
    let approval = Approval {
        input_id: approval_input_id(call_id),
        call_id: call_id.to_string(),
        decision: b.decision,
        scope,
        reason: b.reason,
        by: by.to_string(),
        decided_at: lazarus_ledger::clock::now_ts(),
    };
    let answer = |code: StatusCode, v: serde_json::Value| Ok((code, Json(v)).into_response());
    match hub.session(id).await {
        Ok(actor) => {
            let _g = actor.event_lock.lock().await;
            let h = hub.clone();
            let sid = id.clone();
            let inbox =
                blocking(move || Ok(h.store.inbox(&sid, INBOX_MESSAGES_MAX as usize)?)).await?;
            let existing = Hub::with_state(&actor, |s| check_decision(s, &inbox, &approval));
            let tool = match existing.map_err(decision_error)? {
                Existing::Recorded(seq) => {
                    return answer(
                        StatusCode::OK,
                        json!({"result": "duplicate", "seq": seq, "decision": approval.decision, "scope": scope}),
                    );
                }
                Existing::Waiting => {
                    return answer(
                        StatusCode::OK,
                        json!({"result": "duplicate", "queued": true, "decision": approval.decision, "scope": scope}),
                    );
                }
                Existing::New { tool } => tool,
            };
            keep_always_grant(hub, &approval, &tool, id)?;
            hub.admit(&actor)?;
            let (seq, duplicate) = hub.append_approval(&actor, approval.clone()).await?;
            if duplicate {
                return answer(
                    StatusCode::OK,
                    json!({"result": "duplicate", "seq": seq, "decision": approval.decision, "scope": scope}),
                );
            }
            let scheduled = hub.schedule(&actor, "approval");
            answer(
                StatusCode::ACCEPTED,
                super::helpers::who_runs(
                    json!({"result": "recorded", "seq": seq, "decision": approval.decision, "scope": scope, "scheduled": scheduled}),
                    &actor,
                ),
            )
        }
        // Another writer holds the session: its inbox takes the decision, and that writer
        // records it before anything of its own.
        Err(e) if e.waits_in_inbox() => {
            let h = hub.clone();
            let sid = id.clone();
            let a = approval.clone();
            let existing = blocking(move || Ok(check_in_store(&*h.store, &sid, &a)?)).await?;
            let Existing::New { tool } = existing.map_err(decision_error)? else {
                return answer(
                    StatusCode::OK,
                    json!({"result": "duplicate", "decision": approval.decision, "scope": scope}),
                );
            };
            keep_always_grant(hub, &approval, &tool, id)?;
            let duplicate = hub
                .deliver(id, InboxMessage::approval(approval.clone()))
                .await?;
            answer(
                StatusCode::ACCEPTED,
                json!({"result": "queued", "duplicate": duplicate, "decision": approval.decision, "scope": scope}),
            )
        }
        Err(e) => Err(e),
    }
}

/// An `always` decision keeps its grant (the policy file) before it is recorded.
fn keep_always_grant(hub: &Hub, approval: &Approval, tool: &str, id: &SessionId) -> ApiResult<()> {
    if approval.scope != Scope::Always || approval.decision != Decision::Allow {
        return Ok(());
    }
    let Some(grants) = hub.cfg.runner.approval.always.as_ref() else {
        return Err(ApiError::bad_request(
            "no_policy",
            "this gateway keeps no `always` grants; use scope \"session\"",
        ));
    };
    grants
        .grant(tool, &approval.by, id, &approval.call_id)
        .map_err(|e| ApiError::internal(format!("keeping the `always` grant: {e}")))
}

fn decision_error(e: DecisionError) -> ApiError {
    let message = e.to_string();
    match e {
        DecisionError::BadCallId { .. } => ApiError::bad_request("bad_call_id", message),
        DecisionError::ReasonTooLong { .. } => ApiError::too_large("text_too_large", message),
        DecisionError::DenialScope { .. } => ApiError::bad_request("bad_scope", message),
        DecisionError::UnknownCall { .. } => {
            ApiError::new(StatusCode::NOT_FOUND, "no_such_call", message)
        }
        DecisionError::NotAsked { .. } => ApiError::conflict("not_awaiting_approval", message),
        DecisionError::Conflicts { .. } => ApiError::conflict("conflicting_decision", message),
    }
}
