//! How many processes and threads a call may have at once.
//!
//! On Linux 6.14 and later each PID namespace has its own `pid_max`: the call's init sets
//! it to the bound + 1, so the namespace has no more PIDs to give (every process and thread
//! takes one). It costs nothing per call; the kernel's floor for it is 301, so a smaller
//! bound uses one of the two ways below.
//!
//! Where this process may create a child cgroup under its own in a `pids` hierarchy (cgroup
//! v1 `pids`, or cgroup v2 with `pids` in the parent's `cgroup.subtree_control`), each call
//! gets one, `lazarus-shell-PID-N` with `pids.max`, entered before anything else happens; it
//! is removed after the call. Otherwise, for a user other than root, `RLIMIT_NPROC` is set
//! inside the call's own user namespace, where the kernel counts that user's tasks in that
//! namespace only. Root is exempt from `RLIMIT_NPROC`, so root without a usable `pids` cgroup
//! cannot be bounded: the sandbox is then unavailable.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Default bound on a call's processes and threads (the sandbox's own init included).
pub const DEFAULT_MAX_PROCESSES: u32 = 1024;

/// The kernel's floor for a PID namespace's `pid_max` (`RESERVED_PIDS + 1`).
pub const PID_MAX_MIN: u32 = 301;

/// What enforces the bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PidsLimit {
    /// `pid_max` of the call's PID namespace.
    PidMax,
    /// A child cgroup per call beneath this directory (cgroup `version` 1 or 2).
    Cgroup { dir: PathBuf, version: u8 },
    /// `RLIMIT_NPROC` in the call's user namespace.
    Rlimit,
}

impl PidsLimit {
    pub(crate) fn describe(&self, max: u32) -> String {
        match self {
            PidsLimit::PidMax => format!("pids≤{max} (pid_max of the PID namespace)"),
            PidsLimit::Cgroup { version, .. } => format!("pids≤{max} (cgroup v{version})"),
            PidsLimit::Rlimit => format!("pids≤{max} (RLIMIT_NPROC)"),
        }
    }
}

/// Where this process's cgroup of the `pids` controller is, if it may make children there.
pub(crate) fn find_cgroup() -> Option<(PathBuf, u8)> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // cgroup v1: a hierarchy with the pids controller
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        if ctrls.split(',').any(|c| c == "pids")
            && let Some(dir) = mount_dir(&mounts, "cgroup", Some("pids"), path)
            && writable(&dir)
        {
            return Some((dir, 1));
        }
    }
    // cgroup v2: pids delegated to our children
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = mount_dir(&mounts, "cgroup2", None, path)?;
    let enabled = |d: &Path| {
        std::fs::read_to_string(d.join("cgroup.subtree_control"))
            .is_ok_and(|s| s.split_whitespace().any(|c| c == "pids"))
    };
    (enabled(&dir) && writable(&dir)).then_some((dir, 2))
}

/// The directory of cgroup `path` in the mounted hierarchy of type `fstype` (with the
/// `controller` among its super options, for v1), from `/proc/self/mountinfo`.
fn mount_dir(
    mountinfo: &str,
    fstype: &str,
    controller: Option<&str>,
    path: &str,
) -> Option<PathBuf> {
    for line in mountinfo.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let f: Vec<&str> = pre.split(' ').collect();
        let p: Vec<&str> = post.split(' ').collect();
        if f.len() < 5 || p.len() < 3 || p[0] != fstype {
            continue;
        }
        if let Some(c) = controller
            && !p[2].split(',').any(|o| o == c)
        {
            continue;
        }
        let (root, mountpoint) = (f[3], f[4]);
        if let Ok(rel) = Path::new(path).strip_prefix(root) {
            return Some(Path::new(mountpoint).join(rel));
        }
    }
    None
}

fn writable(dir: &Path) -> bool {
    rustix::fs::access(
        dir,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    )
    .is_ok()
}

/// A call's cgroup: created with `pids.max`, entered by the call's first process through
/// `procs` (a descriptor of its `cgroup.procs`), removed when dropped.
#[derive(Debug)]
pub(crate) struct CallCgroup {
    pub(crate) path: PathBuf,
    pub(crate) procs: OwnedFd,
}

/// Cgroups that could not be removed yet (a process of the call was still exiting).
static LEFT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

impl CallCgroup {
    pub(crate) fn create(parent: &Path, max: u32) -> Result<Self, String> {
        static N: AtomicU64 = AtomicU64::new(0);
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep(parent));
        retry_left();
        let path = parent.join(format!(
            "lazarus-shell-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let fail = |what: &str, e: std::io::Error| {
            format!(
                "cannot {what} {} for the call's process limit: {e}",
                path.display()
            )
        };
        std::fs::create_dir(&path).map_err(|e| fail("create the cgroup", e))?;
        let cg = CallCgroup {
            procs: std::fs::OpenOptions::new()
                .write(true)
                .open(path.join("cgroup.procs"))
                .map(OwnedFd::from)
                .map_err(|e| {
                    let _ = std::fs::remove_dir(&path);
                    fail("open cgroup.procs of", e)
                })?,
            path: path.clone(),
        };
        std::fs::write(path.join("pids.max"), format!("{max}\n"))
            .map_err(|e| fail("set pids.max of", e))?;
        Ok(cg)
    }
}

impl Drop for CallCgroup {
    fn drop(&mut self) {
        // The call's processes are gone once its leader was reaped; a few may still be
        // exiting. Try briefly, then leave it for the next call.
        for _ in 0..20 {
            match std::fs::remove_dir(&self.path) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
        if let Ok(mut l) = LEFT.lock() {
            l.push(self.path.clone());
        }
    }
}

fn retry_left() {
    if let Ok(mut l) = LEFT.lock() {
        l.retain(|p| std::fs::remove_dir(p).is_err() && p.exists());
    }
}

/// Removes the empty cgroups of runners that are gone (`lazarus-shell-PID-*` whose PID no
/// longer exists).
fn sweep(parent: &Path) {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("lazarus-shell-"))
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}
