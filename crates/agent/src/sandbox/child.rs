//! Between `fork` and `exec` of a confined shell: the three processes of a call.
//!
//! 1. The **leader** (the process `spawn` made, the group leader the runner records): leads a
//!    session of its own (no controlling terminal), marks every descriptor above stderr
//!    close-on-exec, enters the call's cgroup, unshares the namespaces (user first when not root; PID, mount, UTS,
//!    IPC, cgroup, and network unless allowed), sets `RLIMIT_NPROC` when that is the bound,
//!    forks the init and waits for it, exiting with its status.
//! 2. The **init** (PID 1 of the new PID namespace): makes every mount private, mounts a
//!    fresh `/proc`, a new `devpts` instance and the call's `/dev/shm`, binds the workspace's
//!    version-control metadata read-only, restricts itself with
//!    Landlock, drops every capability (bounding, ambient, inheritable, permitted, effective;
//!    securebits locked) with `no_new_privs`, makes itself non-dumpable, and forks the shell.
//!    Then it reaps orphans and answers the connect gate ([`super::gate`]) until the shell
//!    exits; it exits with the shell's status and the kernel kills whatever is left in the
//!    namespace.
//! 3. The **shell**: installs the seccomp filters (the last one with a listener it passes to
//!    the init over a socket pair), restores the signal mask and returns to `exec`.
//!
//! Everything here is async-signal-safe: raw system calls on data built before the fork.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use super::gate::{self, GatePlan};
use super::raw::{itoa, write_all};
use super::seccomp::{self, Filters};

/// What the child does between fork and exec; built before the fork.
#[derive(Debug)]
pub(crate) struct ChildPlan {
    pub(crate) unshare_flags: libc::c_int,
    /// An empty network namespace to join instead of making one (see `shared_netns`).
    pub(crate) netns: Option<libc::c_int>,
    pub(crate) user_ns: bool,
    pub(crate) uid_map: CString,
    pub(crate) gid_map: CString,
    /// `RLIMIT_NPROC` set in the user namespace (the bound when no cgroup enforces it).
    pub(crate) nproc: Option<u64>,
    /// Written to the PID namespace's `pid_max` (the bound + 1), when that is the bound.
    pub(crate) pid_max: Option<CString>,
    /// `cgroup.procs` of the call's cgroup (owned by the `CallCgroup` of the call).
    pub(crate) cgroup_procs: Option<libc::c_int>,
    pub(crate) ruleset: OwnedFd,
    /// Mounted on `/dev/shm` (the call's private directory), when the host has `/dev/shm`.
    pub(crate) shm: Option<CString>,
    /// Files hidden under `/dev/null` (the system's credential files).
    pub(crate) hide: Vec<CString>,
    /// Bound read-only onto themselves (the workspace's version-control metadata).
    pub(crate) read_only: Vec<CString>,
    /// Mount a new `devpts` instance on `/dev/pts` (and its `ptmx` on `/dev/ptmx`).
    pub(crate) devpts: bool,
    /// Landlock rights for what the init mounts (`/proc`, `/dev/pts`): rules for them can
    /// only be added once they are mounted, in the init. Raw `allowed_access` bits.
    pub(crate) proc_access: u64,
    pub(crate) pts_access: u64,
    pub(crate) ptmx_access: u64,
    /// The highest capability number of this kernel (`/proc/sys/kernel/cap_last_cap`).
    pub(crate) cap_last: u32,
    pub(crate) filters: Arc<Filters>,
    pub(crate) gate: GatePlan,
}

/// Exit status of the init when it could not set the sandbox up (it says why on stderr).
pub const SETUP_FAILED_EXIT: i32 = 126;

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

fn errno() -> libc::c_int {
    // SAFETY: reading this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// The init could not set up the sandbox: say what on stderr and exit.
fn fail(what: &[u8]) -> ! {
    let e = errno();
    let mut digits = [0u8; 20];
    write_all(2, b"lazarus sandbox: cannot ");
    write_all(2, what);
    write_all(2, b" (errno ");
    write_all(2, itoa(e as u64, &mut digits));
    write_all(2, b"); the command did not run\n");
    // SAFETY: leaving the process.
    unsafe { libc::_exit(SETUP_FAILED_EXIT) }
}

/// Writes `data` to the file `path` (raw calls only).
fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: plain system calls on valid pointers.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(last_err());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = last_err();
        libc::close(fd);
        if n != data.len() as isize {
            return Err(err);
        }
    }
    Ok(())
}

/// The exit code a parent reports for a child's wait status (128 + signal, like a shell).
fn code_of(status: libc::c_int) -> libc::c_int {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        126
    }
}

/// Closes every descriptor above stderr except `keep` (sorted ascending).
fn close_all_except(keep: &[libc::c_int]) {
    let mut from: u32 = 3;
    for &k in keep {
        let k = k as u32;
        if k >= from {
            if k > from {
                close_range(from, k - 1);
            }
            from = k + 1;
        }
    }
    close_range(from, u32::MAX);
}

fn close_range(first: u32, last: u32) {
    // SAFETY: closing descriptors this process owns.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, last, 0u32) != 0 {
            for fd in first..last.min(4096).saturating_add(1) {
                libc::close(fd as libc::c_int);
            }
        }
    }
}

/// The leader: cgroup, namespaces, limits; forks the init and waits for it. Returns only in
/// the shell (the process that goes on to exec).
pub(crate) fn enter(plan: &ChildPlan) -> io::Result<()> {
    // SAFETY: async-signal-safe system calls only, on data prepared before the fork.
    unsafe {
        // Never the caller's terminal: a session of its own (the caller's `pre_exec` may have
        // made it already; a process-group leader cannot, and is refused), and only 0, 1, 2
        // past the exec.
        if libc::getsid(0) != libc::getpid() && libc::setsid() < 0 {
            return Err(last_err());
        }
        crate::process::cloexec_from(3);
        if let Some(fd) = plan.cgroup_procs
            && libc::write(fd, b"0\n".as_ptr().cast(), 2) != 2
        {
            return Err(last_err());
        }
        if let Some(fd) = plan.netns
            && libc::setns(fd, libc::CLONE_NEWNET) != 0
        {
            return Err(last_err());
        }
        if libc::unshare(plan.unshare_flags) != 0 {
            return Err(last_err());
        }
        if plan.user_ns {
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", plan.uid_map.as_bytes())?;
            write_file(c"/proc/self/gid_map", plan.gid_map.as_bytes())?;
        }
        if let Some(n) = plan.nproc {
            let lim = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            if libc::setrlimit(libc::RLIMIT_NPROC, &lim) != 0 {
                return Err(last_err());
            }
        }
        // The leader stays outside the new PID namespace; its first child is the namespace's
        // PID 1.
        let init = libc::fork();
        if init < 0 {
            return Err(last_err());
        }
        if init > 0 {
            close_all_except(&[]);
            let mut st = 0;
            loop {
                let r = libc::waitpid(init, &mut st, 0);
                if r == init {
                    libc::_exit(code_of(st));
                }
                if r < 0 && errno() != libc::EINTR {
                    libc::_exit(126);
                }
            }
        }
    }
    init_main(plan)
}

fn mount(
    src: &std::ffi::CStr,
    target: &std::ffi::CStr,
    fstype: Option<&std::ffi::CStr>,
    flags: libc::c_ulong,
    data: Option<&std::ffi::CStr>,
) -> bool {
    // SAFETY: valid C strings or null.
    unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.map_or(std::ptr::null(), |f| f.as_ptr()),
            flags,
            data.map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        ) == 0
    }
}

/// Makes `path` read-only in the call's mount namespace: a bind mount of itself, remounted
/// read-only with the flags the kernel may have locked (`nosuid`, `nodev`, `noexec`, atime:
/// a user namespace may not clear them). A path gone since the call was prepared is skipped.
fn bind_read_only(path: &std::ffi::CStr) {
    if !mount(path, path, None, libc::MS_BIND | libc::MS_REC, None) {
        if errno() == libc::ENOENT {
            return;
        }
        fail(b"bind version-control metadata read-only");
    }
    const KEPT: libc::c_ulong = libc::ST_NOSUID
        | libc::ST_NODEV
        | libc::ST_NOEXEC
        | libc::ST_NOATIME
        | libc::ST_NODIRATIME
        | libc::ST_RELATIME;
    // SAFETY: statvfs fills the struct on this stack frame.
    let kept = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &mut st) == 0 {
            st.f_flag & KEPT
        } else {
            0
        }
    };
    if !mount(
        c"none",
        path,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | kept,
        None,
    ) {
        fail(b"remount version-control metadata read-only");
    }
}

/// Overwrites this process's copy of its command line and environment with zeros: the area
/// `/proc/PID/cmdline` and `/proc/PID/environ` show (from `/proc/self/stat`, fields 48–51),
/// and every string `environ` points to (some live on the heap). The shell gets its own
/// arguments and environment from `execve`, built before the fork.
fn scrub_environ() {
    // SAFETY: raw reads of this process's stat into a stack buffer, then writes of zeros to
    // the argument and environment areas the kernel reports for this very process (its own
    // writable stack).
    unsafe {
        let fd = libc::open(
            c"/proc/self/stat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd >= 0 {
            let mut buf = [0u8; 1024];
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            libc::close(fd);
            if n > 0
                && let Some([arg_start, arg_end, env_start, env_end]) =
                    stat_areas(&buf[..n as usize])
            {
                for (a, b) in [(arg_start, arg_end), (env_start, env_end)] {
                    if b > a && b - a < (1 << 24) {
                        std::ptr::write_bytes(a as *mut u8, 0, (b - a) as usize);
                    }
                }
            }
        }
    }
    unsafe extern "C" {
        static mut environ: *mut *mut libc::c_char;
    }
    // SAFETY: the strings `environ` points to are this (single-threaded, forked) process's
    // own writable copies; each is NUL-terminated.
    unsafe {
        let mut p = environ;
        if p.is_null() {
            return;
        }
        while !(*p).is_null() {
            let s = *p;
            std::ptr::write_bytes(s, 0, libc::strlen(s));
            p = p.add(1);
        }
    }
}

/// Fields 48–51 of `/proc/self/stat` (arg_start, arg_end, env_start, env_end).
fn stat_areas(stat: &[u8]) -> Option<[u64; 4]> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let mut out = [0u64; 4];
    // after ")", field 3 (state) is the first; 48 is the 46th after it
    for (i, field) in stat[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty())
        .enumerate()
    {
        if (45..49).contains(&i) {
            let mut v: u64 = 0;
            for d in field.iter().take_while(|d| d.is_ascii_digit()) {
                v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            }
            out[i - 45] = v;
        }
    }
    Some(out)
}

/// Adds a Landlock rule granting `access` beneath `path` to `ruleset` (raw calls).
fn add_rule(ruleset: &OwnedFd, path: &std::ffi::CStr, access: u64) -> bool {
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    // SAFETY: an O_PATH open and the documented rule struct on this stack frame.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let attr = PathBeneath {
            allowed_access: access,
            parent_fd: fd,
        };
        let r = libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneath,
            0u32,
        );
        libc::close(fd);
        r == 0
    }
}

/// Drops every capability for good: the bounding set, ambient, securebits locked so that
/// running as root or exec'ing a file gives none back, then inheritable, permitted and
/// effective.
fn drop_caps(cap_last: u32) -> Result<(), &'static [u8]> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl and capset on this process.
    unsafe {
        for cap in 0..=cap_last {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0
                && errno() != libc::EINVAL
            {
                return Err(b"drop the capability bounding set");
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(b"clear the ambient capabilities");
        }
        let bits = libc::SECBIT_NOROOT
            | libc::SECBIT_NOROOT_LOCKED
            | libc::SECBIT_NO_SETUID_FIXUP
            | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
            | libc::SECBIT_KEEP_CAPS_LOCKED
            | libc::SECBIT_NO_CAP_AMBIENT_RAISE
            | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        if libc::prctl(libc::PR_SET_SECUREBITS, bits as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(b"lock the securebits");
        }
        let hdr = Header {
            version: VERSION_3,
            pid: 0,
        };
        let data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &hdr as *const Header, data.as_ptr()) != 0 {
            return Err(b"drop the capabilities");
        }
    }
    Ok(())
}

/// PID 1 of the call: mounts, Landlock, capabilities; forks the shell (which returns) and
/// supervises it (never returns).
fn init_main(plan: &ChildPlan) -> io::Result<()> {
    const NOSUID: libc::c_ulong = libc::MS_NOSUID;
    // The init is a copy of lazarus: its /proc/1/environ would show lazarus's environment
    // (the model's API key among it) to anything that could read it.
    scrub_environ();
    if !mount(c"none", c"/", None, libc::MS_REC | libc::MS_PRIVATE, None) {
        fail(b"make the mounts private");
    }
    if !mount(
        c"proc",
        c"/proc",
        Some(c"proc"),
        NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    ) {
        fail(b"mount a new /proc");
    }
    if let Some(n) = &plan.pid_max {
        // Only ever the call's own namespace: written from anywhere else, pid_max would
        // bound the whole machine.
        // SAFETY: getpid has no preconditions.
        if unsafe { libc::getpid() } != 1 {
            fail(b"set pid_max: the init is not PID 1 of a new PID namespace");
        }
        if write_file(c"/proc/sys/kernel/pid_max", n.as_bytes()).is_err() {
            fail(b"set pid_max of the PID namespace (Linux 6.14+)");
        }
    }
    if plan.devpts {
        if !mount(
            c"devpts",
            c"/dev/pts",
            Some(c"devpts"),
            NOSUID | libc::MS_NOEXEC,
            Some(c"newinstance,ptmxmode=0666,mode=0620"),
        ) {
            fail(b"mount a new devpts on /dev/pts");
        }
        if !mount(c"/dev/pts/ptmx", c"/dev/ptmx", None, libc::MS_BIND, None) {
            fail(b"bind /dev/pts/ptmx on /dev/ptmx");
        }
    }
    if let Some(shm) = &plan.shm
        && !mount(shm, c"/dev/shm", None, libc::MS_BIND, None)
    {
        fail(b"bind the private /dev/shm");
    }
    for f in &plan.hide {
        if !mount(c"/dev/null", f, None, libc::MS_BIND, None) {
            fail(b"hide a system credential file under /dev/null");
        }
    }
    for p in &plan.read_only {
        bind_read_only(p);
    }
    // The new mounts hide the host's /proc and devpts, whose rules the ruleset holds:
    // Landlock skips hidden mount points, so the new ones get their own rules.
    if !add_rule(&plan.ruleset, c"/proc", plan.proc_access) {
        fail(b"grant the new /proc in the Landlock ruleset");
    }
    if plan.devpts
        && !(add_rule(&plan.ruleset, c"/dev/pts", plan.pts_access)
            && add_rule(&plan.ruleset, c"/dev/ptmx", plan.ptmx_access))
    {
        fail(b"grant the new /dev/pts in the Landlock ruleset");
    }
    // SAFETY: async-signal-safe system calls on data prepared before the fork.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            fail(b"set no_new_privs");
        }
        if libc::syscall(
            libc::SYS_landlock_restrict_self,
            plan.ruleset.as_raw_fd(),
            0u32,
        ) != 0
        {
            fail(b"enforce the Landlock ruleset");
        }
        if let Err(what) = drop_caps(plan.cap_last) {
            fail(what);
        }
        if libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 {
            fail(b"make the init non-dumpable");
        }
        let mut chld: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        if libc::sigprocmask(libc::SIG_BLOCK, &chld, &mut old) != 0 {
            fail(b"block SIGCHLD");
        }
        let sfd = libc::signalfd(-1, &chld, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if sfd < 0 {
            fail(b"create a signalfd");
        }
        let mut sp = [-1; 2];
        if libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            sp.as_mut_ptr(),
        ) != 0
        {
            fail(b"create the gate's socket pair");
        }
        let shell = libc::fork();
        if shell < 0 {
            fail(b"fork the shell");
        }
        if shell == 0 {
            libc::close(sp[0]);
            libc::close(sfd);
            if libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) != 0 {
                return Err(last_err());
            }
            seccomp::install(&plan.filters.refused, 0)?;
            seccomp::install(&plan.filters.nosys, 0)?;
            let listener =
                seccomp::install(&plan.filters.notify, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER)?;
            gate::send_fd(sp[1], listener)?;
            libc::close(listener);
            libc::close(sp[1]);
            return Ok(());
        }
        libc::close(sp[1]);
        let mut keep = [sfd, sp[0]];
        keep.sort_unstable();
        close_all_except(&keep);
        let listener = gate::recv_fd(sp[0]).unwrap_or(-1);
        libc::close(sp[0]);
        supervise(shell, sfd, listener, &plan.gate)
    }
}

/// The init's loop: reap children, answer the connect gate; exit with the shell's status.
fn supervise(
    shell: libc::pid_t,
    sfd: libc::c_int,
    mut listener: libc::c_int,
    plan: &GatePlan,
) -> ! {
    // SAFETY: raw system calls on descriptors this process owns.
    unsafe {
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: sfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: listener,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let r = libc::poll(fds.as_mut_ptr(), 2, -1);
            if r < 0 {
                if errno() == libc::EINTR {
                    continue;
                }
                libc::_exit(126);
            }
            if fds[0].revents != 0 {
                let mut info = [0u8; 128];
                while libc::read(sfd, info.as_mut_ptr().cast(), info.len()) > 0 {}
                loop {
                    let mut st = 0;
                    let pid = libc::waitpid(-1, &mut st, libc::WNOHANG);
                    if pid <= 0 {
                        break;
                    }
                    if pid == shell {
                        libc::_exit(code_of(st));
                    }
                }
            }
            if listener >= 0 {
                let re = fds[1].revents;
                if re & libc::POLLIN != 0 {
                    gate::serve(listener, plan);
                } else if re & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                    libc::close(listener);
                    listener = -1;
                }
            }
        }
    }
}
