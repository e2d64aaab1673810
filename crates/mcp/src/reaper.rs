//! MCP servers die with their runner. A stdio server is often a program that starts others
//! (`npx` starts `node`, `sh -c` its command, `uvx` a Python): `PR_SET_PDEATHSIG` on the
//! program Lazarus starts kills only that one, and what it started goes on (until it next
//! writes to the pipe whose reader is gone, if ever) — a silent tool finished its work after
//! the runner was killed.
//!
//! So every stdio server starts under a small **reaper**: the process Lazarus spawns forks
//! the server and stays behind as its parent, a *child subreaper* (`PR_SET_CHILD_SUBREAPER`:
//! whatever the server starts and leaves becomes the reaper's child, not init's), holding
//! the read end of a pipe whose only writer is the Lazarus process. When that writer goes —
//! Lazarus exits, is killed with SIGKILL, or drops the server ([`Reaper`]) — the read end sees
//! end-of-file at once and the reaper kills every process below it (the server's process
//! group, then each child it holds, again and again until none is left, since each one killed
//! hands its own children to the reaper), then exits. The server itself dies with the reaper
//! too (`PR_SET_PDEATHSIG`, the reaper being single-threaded). When the server exits by
//! itself, the reaper kills what it left and exits with its status.
//!
//! Not covered: the reaper itself killed with SIGKILL (an OOM kill, `kill -9` of its pid):
//! then the server dies with it, and anything the server started that outlived it is left.
//! A sandboxed server (`sandbox = true`) is the reaper's child too; its own PID namespace goes
//! with its init.
//!
//! Everything in the reaper runs between `fork` and `exec` (it never execs): raw system calls
//! on data prepared before the fork, no allocation.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// How often the reaper looks whether its server exited by itself, in milliseconds.
const POLL_MS: libc::c_int = 200;

/// The Lazarus end of a server's reaper: dropping it (or the process ending) tells the
/// reaper to kill the server and everything it started.
#[derive(Debug)]
pub struct Reaper {
    _writer: OwnedFd,
}

/// What the `pre_exec` step of a server's command needs: the pipe's read end (kept by the
/// reaper).
#[derive(Debug, Clone, Copy)]
pub struct ReaperFd(RawFd);

/// A pipe for a new server: the [`Reaper`] Lazarus keeps, and the read end the command's
/// `pre_exec` step ([`enter`]) hands to the reaper. Both ends are close-on-exec: no program
/// Lazarus starts holds the writer, so only this process's end keeps the reaper waiting.
pub fn pipe() -> io::Result<(Reaper, OwnedFd)> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    Ok((Reaper { _writer: w }, r))
}

impl ReaperFd {
    pub fn of(fd: &OwnedFd) -> Self {
        ReaperFd(fd.as_raw_fd())
    }
}

/// The `pre_exec` step of a stdio server: this process becomes the reaper and forks the
/// server, which returns (to `exec`); the reaper never returns.
///
/// # Safety
/// Call only between `fork` and `exec` (a `pre_exec` closure): it forks, and the reaper
/// makes raw system calls only.
pub unsafe fn enter(fd: ReaperFd) -> io::Result<()> {
    // SAFETY: async-signal-safe system calls, in the forked child.
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        let reaper = libc::getpid();
        let server = libc::fork();
        if server < 0 {
            return Err(io::Error::last_os_error());
        }
        if server == 0 {
            // the server: dies with the reaper, whatever happens to it
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != reaper {
                libc::_exit(1);
            }
            libc::close(fd.0);
            return Ok(());
        }
        reap(server, fd.0)
    }
}

/// The reaper: waits for the end of the pipe (or of its server), kills everything below it,
/// exits.
unsafe fn reap(server: libc::pid_t, fd: RawFd) -> ! {
    // SAFETY: raw system calls on this process's own descriptors and children.
    unsafe {
        // nothing but the pipe: the server's stdio must close when the server goes, and the
        // spawning side's exec-error pipe must see its end when the server execs
        if fd > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (fd - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (fd + 1) as u32, u32::MAX, 0u32);
        let mut status: libc::c_int = 0;
        let mut server_status: Option<libc::c_int> = None;
        loop {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let n = libc::poll(&mut p, 1, POLL_MS);
            if n > 0 && p.revents != 0 {
                let mut b = [0u8; 16];
                if libc::read(fd, b.as_mut_ptr().cast(), b.len()) <= 0 {
                    break; // Lazarus let go, or died
                }
            }
            // reap what exited; the server's end ends the reaper too
            loop {
                let pid = libc::waitpid(-1, &mut status, libc::WNOHANG);
                if pid <= 0 {
                    break;
                }
                if pid == server {
                    server_status = Some(status);
                }
            }
            if server_status.is_some() {
                break;
            }
        }
        kill_below(server);
        let code = match server_status {
            Some(s) if libc::WIFEXITED(s) => libc::WEXITSTATUS(s),
            Some(s) if libc::WIFSIGNALED(s) => 128 + libc::WTERMSIG(s),
            _ => 0,
        };
        libc::_exit(code)
    }
}

/// Kills the server's process group and every child of this process, until none is left
/// (each one killed hands its children to this subreaper).
unsafe fn kill_below(server: libc::pid_t) {
    // SAFETY: raw system calls; the buffer lives on this stack.
    unsafe {
        libc::kill(-server, libc::SIGKILL);
        libc::kill(server, libc::SIGKILL);
        let mut buf = [0u8; 4096];
        loop {
            let fd = libc::open(
                c"/proc/thread-self/children".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            );
            if fd < 0 {
                // no list of children (a kernel without CONFIG_PROC_CHILDREN): the group is
                // all that can be killed; reap what died and go
                while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {}
                return;
            }
            {
                let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                libc::close(fd);
                let mut pid: libc::pid_t = 0;
                for &b in &buf[..n.max(0) as usize] {
                    if b.is_ascii_digit() {
                        pid = pid
                            .saturating_mul(10)
                            .saturating_add(libc::pid_t::from(b - b'0'));
                    } else {
                        if pid > 0 {
                            libc::kill(pid, libc::SIGKILL);
                        }
                        pid = 0;
                    }
                }
                if pid > 0 {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            let mut status = 0;
            // one child at a time: its children are ours next round
            if libc::waitpid(-1, &mut status, 0) < 0 {
                return; // ECHILD: nothing is left below
            }
        }
    }
}
