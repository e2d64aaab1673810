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
    /// The process's start time (clock ticks after boot, field 22 of `/proc/<pid>/stat`), so
    /// a pid the kernel gave to another process since is not mistaken for the holder. Absent
    /// in holders written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ticks: Option<u64>,
}

/// Whether a holder is known to be alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// On this host, and its process (pid and start time) is running.
    Alive,
    /// On this host, and its process is gone (or its pid belongs to another process now).
    Dead,
    /// On another host: only its lease can tell.
    Unknown,
}

impl Holder {
    /// The current process.
    pub fn current() -> Self {
        let pid = std::process::id();
        Holder {
            pid,
            host: hostname(),
            since: crate::clock::format_ts(jiff::Timestamp::now()),
            start_ticks: process_start_ticks(pid),
        }
    }

    /// Whether the holder is alive, as far as this host can tell.
    pub fn liveness(&self) -> Liveness {
        if self.host != hostname() {
            return Liveness::Unknown;
        }
        let Some(pid) = rustix::process::Pid::from_raw(self.pid as i32) else {
            return Liveness::Dead;
        };
        // Signal 0 checks existence; EPERM still means "exists".
        let exists = match rustix::process::test_kill_process(pid) {
            Ok(()) => true,
            Err(e) => e == rustix::io::Errno::PERM,
        };
        if !exists {
            return Liveness::Dead;
        }
        match (self.start_ticks, process_start_ticks(self.pid)) {
            // the pid was given to another process since
            (Some(recorded), Some(now)) if recorded != now => Liveness::Dead,
            _ => Liveness::Alive,
        }
    }

    /// True when the holder runs on this host and its process (pid and start time) is alive.
    pub fn is_alive_here(&self) -> bool {
        self.liveness() == Liveness::Alive
    }
}

/// Start time of process `pid` (clock ticks after boot), from field 22 of `/proc/<pid>/stat`;
/// `None` when it cannot be read.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// Parses field 22 of a `/proc/<pid>/stat` line. The command name (field 2) is in
/// parentheses and may itself contain spaces and parentheses, so fields are counted from the
/// last `)`.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ')' come fields 3.. ; field 22 is the 20th of them.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
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
