//! File descriptors, the resource a gateway runs out of first: every connection, every open
//! session (its ledger and its lock file), every read of a session's records holds one. The
//! process limit (`RLIMIT_NOFILE`) sets the default connection cap, and work that creates
//! files first checks that a few descriptors are spare, so running out is answered as
//! overload (`429 overloaded`) before anything is created rather than half-way through.

use std::os::fd::OwnedFd;

use rustix::fs::{Mode, OFlags};

use crate::error::{ApiError, ApiResult};

/// Descriptors that must be free before a session is created or opened: its lock file, the
/// ledger (and its temporary name), the directory synced, the workspace walk, with room to
/// spare for whatever else runs at the same moment.
pub const HEADROOM: usize = 16;

/// The soft `RLIMIT_NOFILE` of this process; `None` when unlimited or unknown.
pub fn limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// Most connections served at once when `--max-connections` is not given: half the
/// descriptor limit (the other half is for sessions, record reads, model requests and tools),
/// between 16 and 1024.
pub fn default_max_connections() -> usize {
    default_max_connections_for(limit())
}

fn default_max_connections_for(nofile: Option<u64>) -> usize {
    let half = nofile.map_or(u64::MAX, |n| n / 2);
    usize::try_from(half.clamp(16, 1024)).unwrap_or(1024)
}

/// Most sessions open at once when `--max-open-sessions` is not given. A local session holds
/// two descriptors (its ledger and its lock file) while open: a third of what the connections
/// leave (the rest is for reads, model requests and tools), at least 16, at most 10,000. A
/// PostgreSQL session holds none: 10,000.
pub fn default_max_open_sessions(local_files: bool, max_connections: usize) -> usize {
    default_max_open_sessions_for(limit(), local_files, max_connections)
}

fn default_max_open_sessions_for(
    nofile: Option<u64>,
    local_files: bool,
    max_connections: usize,
) -> usize {
    const MAX: usize = 10_000;
    match nofile {
        Some(n) if local_files => {
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            let spare = n.saturating_sub(max_connections + overflow_for(max_connections) + 64);
            (spare / 3).clamp(16, MAX)
        }
        _ => MAX,
    }
}

/// Connections beyond the cap that are still read, so that `/healthz` answers and everything
/// else gets `429 too_many_connections` rather than a silently closed socket; beyond these,
/// new connections are closed at once.
pub fn overflow_for(max_connections: usize) -> usize {
    (max_connections / 8).clamp(4, 64)
}

/// Fails with `429 overloaded` (nothing done) unless [`HEADROOM`] descriptors can be opened
/// right now. `what` names the work, for the message.
pub fn check_headroom(what: &str) -> ApiResult<()> {
    let io = |e: rustix::io::Errno| {
        ApiError::io(
            format_args!("{what}: checking for spare file descriptors"),
            &std::io::Error::from_raw_os_error(e.raw_os_error()),
        )
    };
    let first = rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io)?;
    let mut held: Vec<OwnedFd> = Vec::with_capacity(HEADROOM);
    for _ in 1..HEADROOM {
        held.push(rustix::io::fcntl_dupfd_cloexec(&first, 0).map_err(io)?);
    }
    held.push(first);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_connection_cap_follows_the_descriptor_limit() {
        assert_eq!(default_max_connections_for(Some(64)), 32);
        assert_eq!(default_max_connections_for(Some(1024)), 512);
        assert_eq!(default_max_connections_for(Some(20)), 16);
        assert_eq!(default_max_connections_for(Some(1 << 20)), 1024);
        assert_eq!(default_max_connections_for(None), 1024);
        assert_eq!(overflow_for(32), 4);
        assert_eq!(overflow_for(1024), 64);
    }

    #[test]
    fn the_default_open_session_cap_follows_the_descriptor_limit() {
        // systemd's default soft limit, with the default connection cap (half of it)
        let open = default_max_open_sessions_for(Some(1024), true, 512);
        assert_eq!(open, (1024 - 512 - 64 - 64) / 3);
        assert!(2 * open + 512 + 64 < 1024, "sessions and connections fit");
        assert_eq!(
            default_max_open_sessions_for(Some(1 << 20), true, 1024),
            10_000
        );
        assert_eq!(default_max_open_sessions_for(Some(64), true, 32), 16);
        assert_eq!(
            default_max_open_sessions_for(Some(1024), false, 512),
            10_000
        );
        assert_eq!(default_max_open_sessions_for(None, true, 512), 10_000);
    }

    #[test]
    fn headroom_is_there_in_a_normal_process() {
        check_headroom("a test").unwrap();
    }
}
