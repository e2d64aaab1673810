//! Who holds (or held) a session's writer: the text the lock file carries, and what error
//! messages say. Kept apart from the lock itself so errors can name a holder without
//! depending on how the lock is taken.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Who holds (or held) a writer lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub host: String,
    pub since: String,
}

impl Holder {
    /// The current process.
    pub fn current() -> Self {
        Holder {
            pid: std::process::id(),
            host: hostname(),
            since: crate::clock::format_ts(jiff::Timestamp::now()),
        }
    }

    /// True when the holder runs on this host and its pid is alive.
    pub fn is_alive_here(&self) -> bool {
        if self.host != hostname() {
            return false;
        }
        let Some(pid) = rustix::process::Pid::from_raw(self.pid as i32) else {
            return false;
        };
        // Signal 0 checks existence; EPERM still means "exists".
        match rustix::process::test_kill_process(pid) {
            Ok(()) => true,
            Err(e) => e == rustix::io::Errno::PERM,
        }
    }
}

/// This machine's host name.
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid {} on host {} since {}",
            self.pid, self.host, self.since
        )
    }
}

/// "pid … on host … since …", or a plain phrase when the holder is unknown.
pub fn describe(holder: &Option<Holder>) -> String {
    match holder {
        Some(h) => h.to_string(),
        None => "another process (holder details unavailable)".to_string(),
    }
}
