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
    /// For `locked` on a lease: milliseconds until it runs out unless renewed (not sent).
    pub lease_ends_ms: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
            lease_ends_ms: None,
        }
    }
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    /// A query string that does not parse or names an impossible value.
    pub fn bad_query(message: impl Into<String>) -> Self {
        Self::bad_request("bad_query", message)
    }
    /// A cursor (`after`, `Last-Event-ID`) past the session's last record.
    pub fn bad_cursor(message: impl Into<String>) -> Self {
        Self::bad_request("bad_cursor", message)
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
    /// The session cannot be opened here now — another writer holds it, or no open slot is
    /// free — so an input for it is delivered to its inbox instead (202 queued).
    pub fn waits_in_inbox(&self) -> bool {
        self.code == "locked" || self.code == "too_many_open_sessions"
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
    /// The gateway is out of file descriptors (`EMFILE`/`ENFILE`): overload, answered like a
    /// full queue (`429` + `Retry-After`), never as a fault of the request.
    pub fn overloaded(message: impl Into<String>) -> Self {
        Self::busy("overloaded", message, 1)
    }
    /// An I/O failure while doing `what`: overload when descriptors ran out, else a 500 that
    /// names the cause.
    pub fn io(what: impl std::fmt::Display, e: &std::io::Error) -> Self {
        if out_of_descriptors(e) {
            Self::overloaded(format!("{what}: {e}; {OUT_OF_DESCRIPTORS_HINT}"))
        } else {
            Self::internal(format!("{what}: {e}"))
        }
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError {
            retry_after: Some(1),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
        }
    }
}

/// What an operator can do about `EMFILE`; the client just retries.
const OUT_OF_DESCRIPTORS_HINT: &str = "the gateway is out of file descriptors; retry later (operator: raise `ulimit -n` / LimitNOFILE, or lower --max-connections / --max-open-sessions)";

/// `EMFILE` (this process's limit) or `ENFILE` (the system's).
pub fn out_of_descriptors(e: &std::io::Error) -> bool {
    let code = e.raw_os_error();
    code == Some(rustix::io::Errno::MFILE.raw_os_error())
        || code == Some(rustix::io::Errno::NFILE.raw_os_error())
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
            // a lease says when it runs out unless renewed
            SessionError::Locked { expires_in_ms, .. } => ApiError {
                lease_ends_ms: expires_in_ms.map(u64::from),
                ..ApiError::new(StatusCode::CONFLICT, "locked", msg)
            },
            SessionError::Conflict { .. } => ApiError::new(StatusCode::CONFLICT, "conflict", msg),
            // another writer took the session over: retrying reopens it (inputs are deduplicated)
            SessionError::WriterLost { .. } => ApiError {
                retry_after: Some(1),
                ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "writer_lost", msg)
            },
            // its writer records what waits, then there is room again
            SessionError::InboxFull { .. } => ApiError::busy("inbox_full", msg, 5),
            SessionError::Ledger(l) => l.into(),
            SessionError::Unavailable { .. } => {
                tracing::warn!(error = %msg, "the store is unavailable; answering 503");
                ApiError {
                    retry_after: Some(2),
                    ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", msg)
                }
            }
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
            LedgerError::Io { ref source, .. } if out_of_descriptors(source) => {
                ApiError::overloaded(format!("{msg}; {OUT_OF_DESCRIPTORS_HINT}"))
            }
            LedgerError::RecordTooLarge { .. } => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", msg)
            }
            LedgerError::Corrupt(_)
            | LedgerError::NoHeader { .. }
            | LedgerError::UnsupportedVersion { .. }
            | LedgerError::WrongFormat { .. }
            | LedgerError::NotRegularFile { .. } => {
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
