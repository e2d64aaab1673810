//! Process-group helpers.
//!
//! A shell tool call runs in its own process group whose leader is the `sh` the tool spawned.
//! The runner records a [`ProcessGroupRef`] (the group id plus the leader's start time) before
//! the command runs, so that after a crash it can find the group again and terminate it —
//! without ever signalling an unrelated process that happens to have reused the pid: the
//! leader's start time (field 22 of `/proc/<pid>/stat`, in clock ticks since boot) must still
//! match, and while any member of our group is alive Linux does not hand its id out again.

use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use serde::{Deserialize, Serialize};

/// Identifies one process group across time: `pgid` is the leader's pid, `start_time_ticks`
/// its start time so a reused pid is never mistaken for ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcessGroupRef {
    pub pgid: i32,
    pub start_time_ticks: u64,
}

/// Errors reading process information.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("cannot read /proc/{pid}/stat: {source} (is the process gone, or /proc not mounted?)")]
    ReadStat {
        pid: i32,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse /proc/{pid}/stat: {what}")]
    ParseStat { pid: i32, what: &'static str },
}

/// Start time (clock ticks after boot) of process `pid`, from field 22 of `/proc/<pid>/stat`.
pub fn process_start_time(pid: i32) -> Result<u64, ProcessError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|source| ProcessError::ReadStat { pid, source })?;
    parse_start_time(&stat).ok_or(ProcessError::ParseStat {
        pid,
        what: "field 22 (starttime) missing or not a number",
    })
}

pub use lazarus_ledger::holder::parse_start_time;

impl ProcessGroupRef {
    /// Reference to the group led by `pid` (which must be a group leader, e.g. spawned with
    /// [`detach_from_caller`] or `process_group(0)`), reading the leader's start time now.
    pub fn of_leader(pid: i32) -> Result<Self, ProcessError> {
        Ok(ProcessGroupRef {
            pgid: pid,
            start_time_ticks: process_start_time(pid)?,
        })
    }
}

/// What a child started by lazarus (a shell call, an MCP server) does between `fork` and
/// `exec`, before anything else: it leaves the caller's session (`setsid`: a new session and
/// process group led by itself, with no controlling terminal, so `/dev/tty` opens nothing and
/// the terminal's keyboard signals never reach it), and marks every descriptor above stderr
/// close-on-exec (`close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`), so only 0, 1 and 2 cross into
/// the program whatever the caller inherited (a CI runner's log, a supervisor's socket, a
/// directory). Marked rather than closed: the exec-error pipe `std` uses stays open until the
/// exec itself.
///
/// The group it leads is the one the runner records (pgid = the child's pid), as with
/// `process_group(0)`, which must not be set on the same command (`setsid` fails for a group
/// leader).
///
/// # Safety
/// For `pre_exec` only: async-signal-safe system calls, no allocation.
pub unsafe fn detach_from_caller() -> std::io::Result<()> {
    // SAFETY: plain system calls on this (forked, single-threaded) process.
    unsafe {
        if libc::setsid() < 0 {
            return Err(std::io::Error::last_os_error());
        }
        cloexec_from(3);
    }
    Ok(())
}

/// Marks every descriptor from `first` on close-on-exec (raw calls; for `pre_exec`).
///
/// # Safety
/// Async-signal-safe; for the code between fork and exec.
pub(crate) unsafe fn cloexec_from(first: u32) {
    const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;
    // SAFETY: system calls on this process's own descriptor table.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, u32::MAX, CLOSE_RANGE_CLOEXEC) == 0 {
            return;
        }
        // before Linux 5.11: one by one, up to the descriptor limit
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur.min(1 << 20) as libc::c_int
        } else {
            65_536
        };
        for fd in first as libc::c_int..max {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// What [`group_state`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// The leader (same start time) or other members of the group are alive.
    Alive,
    /// No process of the group exists.
    Gone,
    /// The pid now belongs to a different process (start time differs): our group is gone.
    PidReused,
}

fn pid_of(raw: i32) -> Option<Pid> {
    Pid::from_raw(raw)
}

/// Whether the group still has members, without being fooled by pid reuse.
pub fn group_state(group: &ProcessGroupRef) -> GroupState {
    if group.pgid <= 1 {
        return GroupState::Gone;
    }
    match process_start_time(group.pgid) {
        Ok(t) if t != group.start_time_ticks => return GroupState::PidReused,
        _ => {}
    }
    // The leader is ours or gone. While any member of the group exists its id cannot be
    // reused, so live members with this group id are members of *our* group. Zombies do not
    // count: they are dead and only wait to be reaped (orphans reparented to a pid 1 that does
    // not reap them stay zombies for ever).
    if group_has_running_members(group.pgid) {
        GroupState::Alive
    } else {
        GroupState::Gone
    }
}

/// True when any process of the group is still alive (zombies do not count).
pub fn is_alive(group: &ProcessGroupRef) -> bool {
    group_state(group) == GroupState::Alive
}

/// What [`terminate_group`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminateOutcome {
    /// Nothing of the group was alive.
    AlreadyGone,
    /// The pid belongs to another process now; nothing was signalled.
    PidReused,
    /// The group exited after SIGTERM within the grace period.
    Terminated,
    /// The group did not exit within the grace period and was sent SIGKILL.
    Killed,
    /// Signalling failed (e.g. permission denied); the group may still be alive.
    Failed,
}

/// Terminates the whole group: SIGTERM, wait up to `grace` for it to disappear, then SIGKILL
/// (and wait up to one more second for it to go). Signals nothing if the leader's start time
/// no longer matches. Blocking (polls every 20 ms); call it from `spawn_blocking` in async code.
pub fn terminate_group(group: &ProcessGroupRef, grace: Duration) -> TerminateOutcome {
    let Some(pid) = pid_of(group.pgid).filter(|_| group.pgid > 1) else {
        return TerminateOutcome::AlreadyGone;
    };
    match group_state(group) {
        GroupState::Gone => return TerminateOutcome::AlreadyGone,
        GroupState::PidReused => return TerminateOutcome::PidReused,
        GroupState::Alive => {}
    }
    if let Err(e) = rustix::process::kill_process_group(pid, Signal::TERM) {
        if e == rustix::io::Errno::SRCH {
            return TerminateOutcome::AlreadyGone;
        }
        tracing::warn!(pgid = group.pgid, error = %e, "SIGTERM to process group failed");
        return TerminateOutcome::Failed;
    }
    if wait_gone(group, grace) {
        return TerminateOutcome::Terminated;
    }
    tracing::info!(
        pgid = group.pgid,
        grace_ms = grace.as_millis() as u64,
        "process group survived SIGTERM; sending SIGKILL"
    );
    match rustix::process::kill_process_group(pid, Signal::KILL) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::SRCH => return TerminateOutcome::Terminated,
        Err(e) => {
            tracing::warn!(pgid = group.pgid, error = %e, "SIGKILL to process group failed");
            return TerminateOutcome::Failed;
        }
    }
    wait_gone(group, Duration::from_secs(1));
    TerminateOutcome::Killed
}

/// Polls until no live (non-zombie) process of the group remains or `limit` passes.
fn wait_gone(group: &ProcessGroupRef, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if !group_has_running_members(group.pgid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True when some process in group `pgid` exists and is not a zombie. Zombies count as gone:
/// they are dead, only waiting for their parent (possibly us) to reap them.
pub fn group_has_running_members(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        // No /proc: fall back to the signal probe.
        return pid_of(pgid)
            .map(|p| rustix::process::test_kill_process_group(p).is_ok())
            .unwrap_or(false);
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let mut fields = stat[close + 1..].split_ascii_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|s| s.parse::<i32>().ok());
        if pgrp == Some(pgid) && state != Some("Z") && state != Some("X") {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    #[test]
    fn parses_start_time_with_odd_command_names() {
        let line =
            "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_start_time(line), Some(987654));
        assert_eq!(parse_start_time("garbage"), None);
        assert_eq!(parse_start_time("1 (x) S 1 2"), None);
    }

    #[test]
    fn own_start_time_is_readable() {
        let me = std::process::id() as i32;
        assert!(process_start_time(me).is_ok());
    }

    fn spawn_group(script: &str) -> (std::process::Child, ProcessGroupRef) {
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn sh");
        let r = ProcessGroupRef::of_leader(child.id() as i32).expect("stat");
        (child, r)
    }

    #[test]
    fn terminates_group_including_grandchildren() {
        let (mut child, r) = spawn_group("sleep 30 & sleep 30 & wait");
        std::thread::sleep(Duration::from_millis(100));
        assert!(is_alive(&r));
        let out = terminate_group(&r, Duration::from_secs(2));
        assert_eq!(out, TerminateOutcome::Terminated);
        let _ = child.wait();
        assert!(!group_has_running_members(r.pgid));
        assert!(!is_alive(&r));
        assert_eq!(
            terminate_group(&r, Duration::from_millis(10)),
            TerminateOutcome::AlreadyGone
        );
    }

    #[test]
    fn kills_a_group_that_ignores_sigterm() {
        let (mut child, r) = spawn_group("trap '' TERM; sleep 30 & trap '' TERM; wait; sleep 30");
        std::thread::sleep(Duration::from_millis(150));
        let out = terminate_group(&r, Duration::from_millis(300));
        assert_eq!(out, TerminateOutcome::Killed);
        let _ = child.wait();
        assert!(!group_has_running_members(r.pgid));
    }

    #[test]
    fn never_signals_a_reused_pid() {
        let (mut child, r) = spawn_group("sleep 30");
        let fake = ProcessGroupRef {
            pgid: r.pgid,
            start_time_ticks: r.start_time_ticks + 1,
        };
        assert_eq!(group_state(&fake), GroupState::PidReused);
        assert_eq!(
            terminate_group(&fake, Duration::from_millis(10)),
            TerminateOutcome::PidReused
        );
        assert!(is_alive(&r), "the real group must be untouched");
        assert_eq!(
            terminate_group(&r, Duration::from_secs(2)),
            TerminateOutcome::Terminated
        );
        let _ = child.wait();
    }
}
