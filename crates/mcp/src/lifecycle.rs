//! How a server is started: MCP 2026-07-28 first, the older `initialize` for a server that
//! does not know it, and what to say when both fail.

use rmcp::ClientLifecycleMode;
use rmcp::model::ProtocolVersion;

/// The lifecycle every server is started with: `server/discover` at 2026-07-28 first, and
/// `initialize` at 2025-11-25 when the server is older (it answers the probe with an error,
/// or not within 10 s).
pub(crate) fn mode() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// A start's error in words: both phases when the 2026-07-28 probe and the `initialize`
/// after it failed (the SDK's own message names neither).
pub(crate) fn start_error(e: &rmcp::service::ClientInitializeError) -> String {
    match e {
        rmcp::service::ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
            format!("{fallback} (after server/discover: {discover})")
        }
        e => e.to_string(),
    }
}
