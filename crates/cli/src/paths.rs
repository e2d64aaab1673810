//! Default locations.

use std::path::PathBuf;

/// `$XDG_STATE_HOME/lazarus`, or `~/.local/state/lazarus`.
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("lazarus");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/state/lazarus")
}

/// The default session directory.
pub fn default_session_dir() -> PathBuf {
    state_dir().join("sessions")
}

/// Where sessions live — a directory or a PostgreSQL URL — once flags, environment and the
/// configuration file are weighed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    Local(PathBuf),
    Postgres(String),
}
