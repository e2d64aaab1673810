//! Default locations.

use std::path::PathBuf;

pub use lazarus_session::local::{default_session_dir, state_dir};

/// Where sessions live — a directory or a PostgreSQL URL — once flags, environment and the
/// configuration file are weighed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    Local(PathBuf),
    Postgres(String),
}
