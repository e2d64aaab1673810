//! The API error rule: whether an `assistant` line with `isApiErrorMessage` ended the turn
//! for a reason that may go away on retry.

use crate::lines::{is_context_overflow, is_transient_error};

/// Whether an API error ended the turn for a reason that may go away on retry. Decided from
/// the record's own fields (`apiErrorStatus`, `apiErrorType`, `error`); the text is only a
/// fallback, and a context overflow is never transient.
pub fn api_error_is_transient(
    status: Option<u16>,
    api_type: Option<&str>,
    error: Option<&str>,
    text: &str,
) -> bool {
    if is_context_overflow(text) {
        return false;
    }
    if let Some(s) = status {
        return matches!(s, 408 | 409 | 429 | 500..=599);
    }
    match api_type {
        Some(
            "overloaded_error" | "rate_limit_error" | "api_error" | "timeout_error"
            | "server_error",
        ) => return true,
        Some(
            "invalid_request_error"
            | "authentication_error"
            | "permission_error"
            | "billing_error"
            | "not_found_error"
            | "request_too_large",
        ) => return false,
        _ => {}
    }
    match error {
        Some("rate_limit" | "server_error" | "overloaded") => true,
        Some(
            "invalid_request"
            | "authentication_failed"
            | "billing_error"
            | "max_output_tokens"
            | "permission_error",
        ) => false,
        _ => is_transient_error(text),
    }
}
