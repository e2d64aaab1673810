//! API errors: `{"error":{"code","message"}}` with a proper status code. The one place that
//! decides which HTTP status an error gets: everything else names the error.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use lazarus_ledger::LedgerError;
use lazarus_session::SessionError;
use serde_json::json;

/// An error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds for `Retry-After` (429/503).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    pub fn busy(code: &'static str, message: impl Into<String>, retry_after: u64) -> Self {
        ApiError {
            retry_after: Some(retry_after),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, code, message)
        }
    }
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }
    pub fn too_large(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, code, message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            message,
        )
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError {
            retry_after: Some(1),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
        }
    }
}

impl From<SessionError> for ApiError {
    fn from(e: SessionError) -> Self {
        let msg = e.to_string();
        match e {
            SessionError::NotFound { .. } => ApiError::not_found(msg),
            SessionError::AlreadyExists { .. } => {
                ApiError::new(StatusCode::CONFLICT, "already_exists", msg)
            }
            SessionError::BadForkPoint { .. } => {
                ApiError::new(StatusCode::CONFLICT, "bad_fork_point", msg)
            }
            SessionError::Refused(_) => ApiError::new(StatusCode::CONFLICT, "refused", msg),
            SessionError::Locked { .. } => ApiError::new(StatusCode::CONFLICT, "locked", msg),
            SessionError::Conflict { .. } => ApiError::new(StatusCode::CONFLICT, "conflict", msg),
            SessionError::Ledger(l) => l.into(),
            _ => ApiError::internal(msg),
        }
    }
}

impl From<LedgerError> for ApiError {
    fn from(e: LedgerError) -> Self {
        let msg = e.to_string();
        match e {
            LedgerError::InvalidId { .. } => ApiError::bad_request("invalid_id", msg),
            LedgerError::NotFound { .. } => ApiError::not_found(msg),
            LedgerError::AlreadyExists { .. } => {
                ApiError::new(StatusCode::CONFLICT, "already_exists", msg)
            }
            LedgerError::Locked { .. } => ApiError::new(StatusCode::CONFLICT, "locked", msg),
            LedgerError::RecordTooLarge { .. } => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", msg)
            }
            LedgerError::Corrupt(_)
            | LedgerError::NoHeader { .. }
            | LedgerError::UnsupportedVersion { .. }
            | LedgerError::WrongFormat { .. } => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "bad_session_file", msg)
            }
            _ => ApiError::internal(msg),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        let mut r = (self.status, axum::Json(body)).into_response();
        if let Some(s) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&s.to_string())
        {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        r
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
