//! Where Lazarus keeps sessions when nothing names a place: the one answer for the `lazarus`
//! binary and the Python package, so that each finds what the other wrote.

use std::path::PathBuf;

/// `$XDG_STATE_HOME/lazarus`, or `~/.local/state/lazarus`.
pub fn state_dir() -> PathBuf {
    let nonempty = |name: &str| std::env::var_os(name).filter(|d| !d.is_empty());
    if let Some(d) = nonempty("XDG_STATE_HOME") {
        return PathBuf::from(d).join("lazarus");
    }
    let home = nonempty("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/state/lazarus")
}

/// The default session directory: `state_dir()/sessions`.
pub fn default_session_dir() -> PathBuf {
    state_dir().join("sessions")
}
