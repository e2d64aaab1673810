//! What several handler groups share: the JSON body of a request, the session id of its path,
//! the cursor check, and store calls run on the blocking pool.

use axum::body::Bytes;
use axum::extract::Path;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::http::StatusCode;
use lazarus_session::SessionId;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ApiResult};

pub(super) fn body_json<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    limit: usize,
    empty_ok: bool,
) -> ApiResult<T> {
    let b = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(
                "body_too_large",
                format!("request body larger than {limit} bytes (limit --max-body-bytes)"),
            )
        } else {
            ApiError::new(r.status(), "bad_body", r.body_text())
        }
    })?;
    let b: &[u8] = if b.iter().all(u8::is_ascii_whitespace) && empty_ok {
        b"{}"
    } else {
        &b
    };
    serde_json::from_slice(b)
        .map_err(|e| ApiError::bad_request("malformed_json", format!("request body: {e}")))
}

/// The session id of a request path: where an id enters the gateway, checked once.
pub(super) fn path_id(p: Result<Path<String>, PathRejection>) -> ApiResult<SessionId> {
    let Path(id) = p.map_err(|e| ApiError::bad_request("invalid_id", e.body_text()))?;
    Ok(SessionId::parse(&id)?)
}

pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    crate::memory::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
}

/// A cursor (`after`, `Last-Event-ID`) must name a record the session has, or 0: anything
/// beyond its last record (u64::MAX included) is a client's mistake, answered `400
/// bad_cursor`, never an empty page or a stream that waits forever.
pub(super) fn check_cursor(after: u64, last: u64, what: &str) -> ApiResult<()> {
    if after > last {
        return Err(ApiError::bad_cursor(format!(
            "{what} {after} is beyond the session's last record ({last}); resume from a seq this server sent, or 0 for the beginning"
        )));
    }
    Ok(())
}

/// `v` with, for a session this gateway leaves to its owner (its world is not this
/// gateway's), who will run what was just recorded: `"needs_owner": {"reason", "resume_with"}`
/// and `"runs_here": false`. Otherwise `"runs_here": true`.
pub(super) fn who_runs(
    mut v: serde_json::Value,
    actor: &crate::registry::OpenSession,
) -> serde_json::Value {
    if let Some(o) = v.as_object_mut() {
        match actor.verdict.leaves() {
            Some(n) => {
                o.insert("runs_here".into(), false.into());
                o.insert(
                    "needs_owner".into(),
                    serde_json::json!({"reason": n.reason, "resume_with": n.resume_with}),
                );
            }
            None => {
                o.insert("runs_here".into(), true.into());
            }
        }
    }
    v
}
