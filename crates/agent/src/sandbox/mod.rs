//! The sandbox of the `shell` tool.
//!
//! Modes, as users know them from Codex:
//! - `workspace-write` (the default): read anywhere except what is denied (credential stores,
//!   lazarus's own state), write only beneath the workspace and the call's private directory
//!   (`$TMPDIR` and `/dev/shm`, removed after the call), no network.
//! - `read-only`: the same, but write only in the private directory.
//! - `off`: no confinement at all (explicit; printed and recorded wherever the sandbox is).
//!
//! `--sandbox-network` lets confined commands use the network.
//!
//! How it is enforced (Linux only), all set up between `fork` and `exec` of the shell
//! ([`child`]): a cgroup or `RLIMIT_NPROC` bounding the call's processes ([`pids`]); new user
//! (when not root), PID, mount, UTS, IPC, cgroup and network namespaces; a fresh `/proc`, a
//! private `devpts` and `/dev/shm`; Landlock with every file-system right of the kernel's ABI
//! handled ([`fs`]: denied paths resolved through symbolic links, `/dev` reduced to a few
//! devices, TCP denied, signals and abstract sockets scoped); every capability dropped for
//! good with `no_new_privs`; seccomp filters ([`seccomp`]) refusing what a build or a test
//! never needs and handing every `connect` to the call's init, which lets Unix sockets be
//! reached only inside the workspace or where the operator allowed ([`gate`]); a minimal
//! environment ([`env`]); and a tiny init that reaps orphans and, when the shell exits,
//! exits so that the kernel kills everything left in the namespace. Nothing a call starts
//! outlives it.
//!
//! Where the kernel cannot enforce all of it, [`Sandbox::probe`] says why and `shell` refuses
//! to run (never silently less confined) unless the mode is `off`.
//! `LAZARUS_SANDBOX_TEST_UNSUPPORTED=1` makes the probe answer "unsupported"; it exists only
//! so tests can exercise that refusal on kernels that have Landlock.

mod child;
mod describe;
pub mod env;
pub mod fs;
mod gate;
mod pids;
mod raw;
pub mod seccomp;
mod tmp;

use std::ffi::{CString, OsString};
use std::fmt;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use child::SETUP_FAILED_EXIT;
pub use env::{EnvPolicy, Inherit, ShellEnv};
pub use fs::{DEVICES, HIDDEN_IN_HOME, HIDDEN_SYSTEM, VCS_DIRS, resolve, vcs_metadata};
pub use pids::DEFAULT_MAX_PROCESSES;

use child::ChildPlan;
use gate::GatePlan;
use pids::{CallCgroup, PidsLimit};
use seccomp::Filters;
pub(crate) use tmp::PrivateTmp;

/// Environment variable that makes [`Sandbox::probe`] report Landlock as unsupported. For
/// tests only: it can only make the sandbox refuse more, never less.
pub const TEST_UNSUPPORTED_ENV: &str = "LAZARUS_SANDBOX_TEST_UNSUPPORTED";

/// How `shell` commands are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read anywhere; write only in the workspace and a private temporary directory.
    #[default]
    WorkspaceWrite,
    /// Read anywhere; write only in a private temporary directory.
    ReadOnly,
    /// No confinement.
    Off,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::Off => "off",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "read-only" => Ok(SandboxMode::ReadOnly),
            "off" => Ok(SandboxMode::Off),
            other => Err(format!(
                "unknown sandbox mode {other:?}; use workspace-write, read-only or off"
            )),
        }
    }
}

/// What the operator asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// Whether confined commands may use the network (ignored when the mode is `off`).
    pub network: bool,
    /// The most processes and threads a call may have at once (its init included).
    #[serde(default = "default_max_processes")]
    pub max_processes: u32,
}

fn default_max_processes() -> u32 {
    DEFAULT_MAX_PROCESSES
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        SandboxPolicy {
            mode: SandboxMode::default(),
            network: false,
            max_processes: DEFAULT_MAX_PROCESSES,
        }
    }
}

/// The sandbox in force: the policy plus what this machine can enforce.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub policy: SandboxPolicy,
    /// Landlock ABI of the running kernel (0: none).
    pub landlock_abi: i32,
    /// Namespaces made without a user namespace (running as root).
    privileged: bool,
    /// Why confined shell calls cannot run here, if they cannot.
    pub unavailable: Option<String>,
    /// The home directory whose credential stores ([`HIDDEN_IN_HOME`]) are denied (`$HOME`
    /// at probe time).
    pub home: Option<PathBuf>,
    /// Further denied paths (lazarus's own state: session directory, a gateway's token and
    /// workspaces), resolved when a call's ruleset is built.
    pub denied: Vec<PathBuf>,
    /// Unix sockets (or directories of them) outside the workspace that commands may connect
    /// to (`--sandbox-allow-unix-socket`).
    pub unix_sockets: Vec<PathBuf>,
    /// What environment a call gets (applies in every mode, `off` included).
    pub env: EnvPolicy,
    /// Whether calls may write the workspace's version-control metadata (`.git`, `.hg`,
    /// `.jj`; [`fs::vcs_metadata`]); read-only unless the operator allows it.
    pub vcs_writable: bool,
    pids: Option<PidsLimit>,
    filters: Option<Arc<Filters>>,
    cap_last: u32,
}

/// What is written to the receipt and the session header: the mode, the network, and what
/// enforces it or why `shell` is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxNote {
    pub mode: SandboxMode,
    pub network: bool,
    pub detail: String,
}

fn kernel_landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: the documented way to ask for the ABI version: no attributes, size 0.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 { 0 } else { v as i32 }
}

fn cap_last() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

/// The default sandbox (`workspace-write`, no network), probed once per process.
pub fn default_probed() -> Arc<Sandbox> {
    static DEFAULT: std::sync::OnceLock<Arc<Sandbox>> = std::sync::OnceLock::new();
    DEFAULT
        .get_or_init(|| Arc::new(Sandbox::probe(SandboxPolicy::default())))
        .clone()
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

impl Sandbox {
    /// A sandbox that confines nothing (`--sandbox off`); the environment policy still
    /// applies.
    pub fn off() -> Self {
        Sandbox {
            policy: SandboxPolicy {
                mode: SandboxMode::Off,
                network: true,
                max_processes: DEFAULT_MAX_PROCESSES,
            },
            landlock_abi: 0,
            privileged: false,
            unavailable: None,
            home: None,
            denied: Vec::new(),
            unix_sockets: Vec::new(),
            env: EnvPolicy::default(),
            vcs_writable: false,
            pids: None,
            filters: None,
            cap_last: 0,
        }
    }

    /// Checks what this machine can enforce for `policy`: the kernel's Landlock ABI, seccomp
    /// user notification, a bound on processes, and a trial run of `exit 0` under the full
    /// sandbox.
    pub fn probe(policy: SandboxPolicy) -> Self {
        let forced = std::env::var_os(TEST_UNSUPPORTED_ENV).is_some_and(|v| v == "1");
        Sandbox::probe_with(policy, forced)
    }

    /// [`Sandbox::probe`], with `force_unsupported` answering "no Landlock" (for tests of the
    /// refusal path only).
    pub fn probe_with(policy: SandboxPolicy, force_unsupported: bool) -> Self {
        if policy.mode == SandboxMode::Off {
            return Sandbox::off();
        }
        let forced = force_unsupported;
        let landlock_abi = if forced { 0 } else { kernel_landlock_abi() };
        let mut sb = Sandbox {
            policy,
            landlock_abi,
            privileged: is_root(),
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            cap_last: cap_last(),
            ..Sandbox::off()
        };
        sb.policy = policy;
        if landlock_abi < 1 {
            sb.unavailable = Some(if forced {
                format!("Landlock reported unsupported ({TEST_UNSUPPORTED_ENV}=1, for tests)")
            } else {
                "this kernel has no Landlock (Linux 5.13+ with landlock in the lsm= list)"
                    .to_string()
            });
            return sb;
        }
        if policy.max_processes < 8 {
            sb.unavailable = Some(format!(
                "a process bound of {} is too small to run a shell (the sandbox itself takes 3); give at least 8",
                policy.max_processes
            ));
            return sb;
        }
        match seccomp::build().and_then(|f| seccomp::notif_sizes_match().map(|()| f)) {
            Ok(f) => sb.filters = Some(Arc::new(f)),
            Err(e) => {
                sb.unavailable = Some(e);
                return sb;
            }
        }
        // the cheapest bound first; each is tried for real below
        let mut bounds = Vec::new();
        if policy.max_processes >= pids::PID_MAX_MIN {
            bounds.push(PidsLimit::PidMax);
        }
        if let Some((dir, version)) = pids::find_cgroup() {
            bounds.push(PidsLimit::Cgroup { dir, version });
        }
        if !is_root() {
            bounds.push(PidsLimit::Rlimit);
        }
        if bounds.is_empty() {
            sb.unavailable = Some(ROOT_NEEDS_BOUND.to_string());
            return sb;
        }
        let mut last = String::new();
        for b in bounds {
            sb.pids = Some(b);
            match sb.try_trials() {
                Ok(()) => return sb,
                Err(e) => last = e,
            }
        }
        sb.pids = None;
        sb.unavailable = Some(last);
        sb
    }

    /// The trial, and as root the same through a user namespace (root without
    /// CAP_SYS_ADMIN, in a container, may still make one).
    fn try_trials(&mut self) -> Result<(), String> {
        let Err(e) = self.trial() else {
            return Ok(());
        };
        if self.privileged {
            self.privileged = false;
            if self.trial().is_ok() {
                return Ok(());
            }
            self.privileged = true;
        }
        Err(e)
    }

    /// The denied set as it resolves now (what a shell call is denied; the file tools refuse
    /// the part of it beneath their workspace).
    pub fn denied_resolved(&self) -> Vec<PathBuf> {
        fs::denied_paths(self.home.as_deref(), &self.denied)
    }

    /// Adds denied paths (lazarus's own state); each is resolved when a call is prepared.
    pub fn deny(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.denied.extend(paths);
        self
    }

    /// Lets commands connect to these Unix sockets (files, or directories holding them).
    pub fn allow_unix_sockets(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.unix_sockets.extend(paths);
        self
    }

    /// Sets the environment policy.
    pub fn with_env(mut self, env: EnvPolicy) -> Self {
        self.env = env;
        self
    }

    /// Lets calls write the workspace's version-control metadata (`--sandbox-allow-vcs-write`).
    pub fn allow_vcs_writes(mut self, yes: bool) -> Self {
        self.vcs_writable = yes;
        self
    }

    /// The version-control metadata of `workspace` that calls may not write (existing or
    /// not; empty when allowed, and outside `workspace-write`). The
    /// file tools refuse writes beneath these paths; a shell call gets the existing ones
    /// beneath the workspace bound read-only.
    pub fn vcs_read_only(&self, workspace: &Path) -> Vec<PathBuf> {
        // `off` confines nothing; `read-only` writes nothing of the workspace anyway
        if self.vcs_writable || self.policy.mode != SandboxMode::WorkspaceWrite {
            return Vec::new();
        }
        let mut out = fs::vcs_metadata(workspace);
        // the user's own configuration of those programs, which matters where the
        // workspace holds it (a workspace that is the home directory)
        if let Some(home) = &self.home {
            out.extend(
                fs::VCS_USER_CONFIG
                    .iter()
                    .map(|c| fs::resolve(&home.join(c))),
            );
        }
        out
    }

    /// Whether the file tools may write the workspace at all (not under `read-only`).
    pub fn workspace_writable(&self) -> bool {
        self.policy.mode != SandboxMode::ReadOnly
    }

    /// Whether confined shell calls can run (always true for `off`).
    pub fn usable(&self) -> bool {
        self.unavailable.is_none()
    }

    /// Runs `exit 0` under the sandbox, with the temporary directory as workspace.
    fn trial(&self) -> Result<(), String> {
        let ws = std::env::temp_dir();
        let prepared = self
            .prepare(&ws)
            .map_err(|e| format!("cannot prepare the sandbox: {e}"))?;
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", "exit 0"])
            .current_dir("/")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        prepared.apply_std(&mut cmd);
        let out = cmd.output().map_err(|e| {
            format!(
                "cannot enter the sandbox ({e}); are user namespaces disabled (sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces, or an AppArmor restriction)?"
            )
        })?;
        if !out.status.success() {
            return Err(format!(
                "a trial command in the sandbox failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    /// Builds everything the child needs, before the fork (the child may not allocate).
    pub(crate) fn prepare(&self, workspace: &Path) -> io::Result<Prepared> {
        let env = self.env.compute_current().vars;
        if self.policy.mode == SandboxMode::Off {
            return Ok(Prepared {
                tmp: None,
                _cgroup: None,
                child: None,
                env,
            });
        }
        if let Some(why) = &self.unavailable {
            return Err(io::Error::other(why.clone()));
        }
        let (Some(filters), Some(pids)) = (&self.filters, &self.pids) else {
            return Err(io::Error::other("the sandbox was not probed"));
        };
        let tmp = PrivateTmp::create()?;
        let shm = Path::new("/dev/shm").is_dir().then_some(tmp.shm.as_path());
        let mut writable = vec![tmp.root.clone()];
        if self.policy.mode == SandboxMode::WorkspaceWrite {
            writable.push(workspace.to_path_buf());
        }
        let denied = fs::denied_paths(self.home.as_deref(), &self.denied);
        // the workspace's own version-control metadata that exists: bound read-only (the
        // rest of it lies outside the workspace, read-only by Landlock)
        let read_only: Vec<PathBuf> = if self.policy.mode == SandboxMode::WorkspaceWrite {
            let ws = fs::resolve(workspace);
            self.vcs_read_only(workspace)
                .into_iter()
                .filter(|p| p.starts_with(&ws) && *p != ws && p.exists())
                .collect()
        } else {
            Vec::new()
        };
        let ruleset = fs::plan(self.landlock_abi, &denied, &writable, shm)
            .ruleset(self.landlock_abi, self.policy.network)
            .map_err(io::Error::other)?;
        let cgroup = match pids {
            PidsLimit::Cgroup { dir, .. } => {
                Some(CallCgroup::create(dir, self.policy.max_processes).map_err(io::Error::other)?)
            }
            PidsLimit::Rlimit | PidsLimit::PidMax => None,
        };
        let mut flags = libc::CLONE_NEWPID
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWUTS
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWCGROUP;
        let netns = if self.policy.network {
            None
        } else if let Some(fd) = self.shared_netns() {
            Some(fd)
        } else {
            flags |= libc::CLONE_NEWNET;
            None
        };
        if !self.privileged {
            flags |= libc::CLONE_NEWUSER;
        }
        let uid = rustix::process::getuid().as_raw();
        let gid = rustix::process::getgid().as_raw();
        let cstr = |b: Vec<u8>| CString::new(b).map_err(io::Error::other);
        let mut allowed: Vec<Vec<u8>> = vec![
            workspace.as_os_str().as_bytes().to_vec(),
            tmp.root.as_os_str().as_bytes().to_vec(),
        ];
        for s in &self.unix_sockets {
            allowed.push(fs::resolve(s).as_os_str().as_bytes().to_vec());
        }
        Ok(Prepared {
            child: Some(Arc::new(ChildPlan {
                unshare_flags: flags,
                netns,
                user_ns: !self.privileged,
                uid_map: cstr(format!("{uid} {uid} 1\n").into_bytes())?,
                gid_map: cstr(format!("{gid} {gid} 1\n").into_bytes())?,
                nproc: matches!(pids, PidsLimit::Rlimit)
                    .then_some(self.policy.max_processes.into()),
                pid_max: match pids {
                    PidsLimit::PidMax => Some(cstr(
                        format!("{}", self.policy.max_processes + 1).into_bytes(),
                    )?),
                    _ => None,
                },
                cgroup_procs: cgroup.as_ref().map(|c| {
                    use std::os::fd::AsRawFd;
                    c.procs.as_raw_fd()
                }),
                ruleset,
                shm: match shm {
                    Some(p) => Some(cstr(p.as_os_str().as_bytes().to_vec())?),
                    None => None,
                },
                hide: fs::system_secrets()
                    .into_iter()
                    .map(|p| cstr(p.into_os_string().into_vec()))
                    .collect::<io::Result<_>>()?,
                read_only: read_only
                    .into_iter()
                    .map(|p| cstr(p.into_os_string().into_vec()))
                    .collect::<io::Result<_>>()?,
                devpts: Path::new("/dev/pts").is_dir() && Path::new("/dev/ptmx").exists(),
                proc_access: fs::rights(self.landlock_abi).read.bits(),
                pts_access: (fs::rights(self.landlock_abi).device | landlock::AccessFs::ReadDir)
                    .bits(),
                ptmx_access: fs::rights(self.landlock_abi).device.bits(),
                cap_last: self.cap_last,
                filters: filters.clone(),
                gate: GatePlan { allowed },
            })),
            _cgroup: cgroup,
            tmp: Some(tmp),
            env,
        })
    }
}

impl Sandbox {
    /// As root, calls without network join one empty network namespace, made once, instead
    /// of making one each (a new network namespace costs more than all the other namespaces
    /// together, and its teardown more still). Its loopback stays down, so it carries no
    /// traffic at all; abstract Unix sockets, the one thing calls could share there, are
    /// scoped to each call by Landlock (ABI 6), so below that every call gets its own. An
    /// unprivileged user cannot join it from a new user namespace: they get their own too.
    fn shared_netns(&self) -> Option<libc::c_int> {
        use std::os::fd::AsRawFd;
        static NETNS: std::sync::OnceLock<Option<std::os::fd::OwnedFd>> =
            std::sync::OnceLock::new();
        if !self.privileged || self.landlock_abi < 6 {
            return None;
        }
        NETNS
            .get_or_init(|| {
                std::thread::spawn(|| {
                    // SAFETY: unshare affects only this short-lived thread.
                    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                        return None;
                    }
                    std::fs::File::open("/proc/thread-self/ns/net")
                        .ok()
                        .map(std::os::fd::OwnedFd::from)
                })
                .join()
                .ok()
                .flatten()
            })
            .as_ref()
            .map(|fd| fd.as_raw_fd())
    }
}

/// Root is exempt from `RLIMIT_NPROC`, so only a PID namespace's `pid_max` or a cgroup can
/// bound its calls.
const ROOT_NEEDS_BOUND: &str = "running as root, the number of a call's processes can be bounded only by the PID namespace's pid_max (Linux 6.14+, a bound of at least 301) or a pids cgroup, and neither is available here (cgroup v1 `pids` hierarchy, or cgroup v2 with `pids` in a writable cgroup's subtree_control); run lazarus as another user, on a newer kernel, give it such a cgroup, or pass --sandbox off";

/// A long-lived program confined like a shell call (an MCP server run with `sandbox =
/// true`): keep it as long as the program runs; dropping it removes the program's private
/// directory and process bound.
#[derive(Debug)]
pub struct Confinement {
    _prepared: Prepared,
}

impl Sandbox {
    /// Confines `cmd` as a shell call in `workspace` is: the environment the policy gives
    /// (replacing the runner's; set the program's own variables after this), a private
    /// `$TMPDIR`, and the namespaces, Landlock rules, seccomp filters and process bound. An
    /// error says why the sandbox cannot be entered here.
    pub fn confine(
        &self,
        workspace: &Path,
        cmd: &mut tokio::process::Command,
    ) -> io::Result<Confinement> {
        let prepared = self.prepare(workspace)?;
        prepared.apply(cmd);
        Ok(Confinement {
            _prepared: prepared,
        })
    }
}

/// A prepared sandbox for one command.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) tmp: Option<PrivateTmp>,
    /// Dropped after the private directory (field order): removed once the call is over.
    _cgroup: Option<CallCgroup>,
    child: Option<Arc<ChildPlan>>,
    env: Vec<(OsString, OsString)>,
}

impl Prepared {
    /// Whether the command runs in its own PID namespace (nothing of it outlives its leader).
    pub(crate) fn contained(&self) -> bool {
        self.child.is_some()
    }

    /// Installs the sandbox on a tokio command: the environment (replacing the runner's),
    /// `TMPDIR`, and the `pre_exec` step.
    pub(crate) fn apply(&self, cmd: &mut tokio::process::Command) {
        cmd.env_clear();
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(tmp) = &self.tmp {
            cmd.env("TMPDIR", &tmp.path);
        }
        if let Some(plan) = self.child.clone() {
            // SAFETY: `enter` only makes async-signal-safe system calls on data built before
            // the fork; it allocates nothing.
            unsafe {
                cmd.pre_exec(move || child::enter(&plan));
            }
        }
    }

    fn apply_std(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        cmd.env_clear();
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(tmp) = &self.tmp {
            cmd.env("TMPDIR", &tmp.path);
        }
        if let Some(plan) = self.child.clone() {
            // SAFETY: as in `apply`.
            unsafe {
                cmd.pre_exec(move || child::enter(&plan));
            }
        }
    }
}

#[cfg(test)]
mod tests;
