//! The sandbox of the `shell` tool.
//!
//! Modes, as users know them from Codex:
//! - `workspace-write` (the default): read anywhere, write only beneath the workspace and the
//!   call's private temporary directory (`$TMPDIR`, removed after the call), no network.
//! - `read-only`: read anywhere, write only to the call's private temporary directory.
//! - `off`: no confinement at all (explicit; printed and recorded wherever the sandbox is).
//!
//! `--sandbox-network` lets confined commands use the network.
//!
//! How it is enforced (Linux only), all set up between `fork` and `exec` of the shell:
//! 1. new namespaces: a PID namespace (always) and a network namespace (unless the network is
//!    allowed); a user namespace first when not running as root, so no privilege is needed;
//! 2. Landlock, with every file-system right of the running kernel's ABI handled: read and
//!    execute beneath `/` except the credential stores of [`HIDDEN_IN_HOME`] (their names can
//!    be listed, their files not read), everything beneath the writable roots, writes to `/dev/null`,
//!    `/dev/zero` and `/dev/full`; TCP bind/connect denied (ABI ≥ 4) unless the network is
//!    allowed; signals and abstract Unix sockets scoped to the sandbox (ABI ≥ 6);
//! 3. environment variables that look like credentials ([`HIDDEN_ENV_PARTS`]) are removed;
//! 4. a tiny init: the spawned process (the group leader the runner records, so resume after a
//!    crash finds it by pid and start time as before) forks the namespace's PID 1, which forks
//!    the shell and reaps orphans. When the shell exits, PID 1 exits, and the kernel kills
//!    every process left in the namespace — `setsid`, double forks and daemons included.
//!    Nothing a call starts outlives it.
//!
//! Where the kernel lacks Landlock or namespaces cannot be created, [`Sandbox::probe`] says
//! why and `shell` refuses to run (never silently unconfined) unless the mode is `off`.
//! `LAZARUS_SANDBOX_TEST_UNSUPPORTED=1` makes the probe answer "unsupported"; it exists only
//! so tests can exercise that refusal on kernels that have Landlock.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};
use serde::{Deserialize, Serialize};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// Whether confined commands may use the network (ignored when the mode is `off`).
    pub network: bool,
}

/// The sandbox in force: the policy plus what this machine can enforce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    pub policy: SandboxPolicy,
    /// Landlock ABI of the running kernel (0: none).
    pub landlock_abi: i32,
    /// Run as root: namespaces without a user namespace.
    privileged: bool,
    /// Why confined shell calls cannot run here, if they cannot.
    pub unavailable: Option<String>,
    /// The home directory whose credential stores ([`HIDDEN_IN_HOME`]) are hidden (`$HOME`
    /// at probe time).
    pub home: Option<PathBuf>,
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

/// The default sandbox (`workspace-write`, no network), probed once per process.
pub fn default_probed() -> Arc<Sandbox> {
    static DEFAULT: std::sync::OnceLock<Arc<Sandbox>> = std::sync::OnceLock::new();
    DEFAULT
        .get_or_init(|| Arc::new(Sandbox::probe(SandboxPolicy::default())))
        .clone()
}

impl Sandbox {
    /// A sandbox that confines nothing (`--sandbox off`).
    pub fn off() -> Self {
        Sandbox {
            policy: SandboxPolicy {
                mode: SandboxMode::Off,
                network: true,
            },
            landlock_abi: 0,
            privileged: false,
            unavailable: None,
            home: None,
        }
    }

    /// Checks what this machine can enforce for `policy`: the kernel's Landlock ABI, and a
    /// trial run of `true` under the full sandbox (namespaces, Landlock, init).
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
            privileged: rustix::process::geteuid().is_root(),
            unavailable: None,
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
        };
        if landlock_abi < 1 {
            sb.unavailable = Some(if forced {
                format!("Landlock reported unsupported ({TEST_UNSUPPORTED_ENV}=1, for tests)")
            } else {
                "this kernel has no Landlock (Linux 5.13+ with landlock in the lsm= list)"
                    .to_string()
            });
            return sb;
        }
        if let Err(e) = sb.trial() {
            if sb.privileged {
                // root without CAP_SYS_ADMIN (in a container, say) may still make a user
                // namespace
                sb.privileged = false;
                if sb.trial().is_ok() {
                    return sb;
                }
                sb.privileged = true;
            }
            sb.unavailable = Some(e);
        }
        sb
    }

    /// Whether confined shell calls can run (always true for `off`).
    pub fn usable(&self) -> bool {
        self.unavailable.is_none()
    }

    /// One line for the terminal: what the sandbox allows and what enforces it.
    pub fn describe(&self) -> String {
        let p = self.policy;
        if p.mode == SandboxMode::Off {
            return "sandbox: off — shell commands run unconfined (they can read, write and connect anywhere this user can, and may leave processes running)".to_string();
        }
        if let Some(why) = &self.unavailable {
            return format!(
                "sandbox: {} — UNAVAILABLE: {why}; shell calls will be refused (pass --sandbox off to run them unconfined)",
                p.mode
            );
        }
        let writes = match p.mode {
            SandboxMode::WorkspaceWrite => "write only in the workspace and a private $TMPDIR",
            _ => "write only in a private $TMPDIR",
        };
        let net = if p.network {
            "network allowed"
        } else {
            "no network"
        };
        format!(
            "sandbox: {} — shell commands read anywhere, {writes}; {net}; nothing they start outlives the call ({})",
            p.mode,
            self.enforcement()
        )
    }

    fn enforcement(&self) -> String {
        let mut parts = vec![format!("Landlock ABI {}", self.landlock_abi)];
        if !self.policy.network {
            parts.push("network namespace".into());
        }
        parts.push("PID namespace".into());
        if !self.privileged {
            parts.push("user namespace".into());
        }
        parts.join(", ")
    }

    /// What the receipt and the session header record.
    pub fn note(&self) -> SandboxNote {
        let detail = match (&self.unavailable, self.policy.mode) {
            (_, SandboxMode::Off) => "unconfined".to_string(),
            (Some(why), _) => format!("unavailable: {why}; shell refused"),
            (None, _) => self.enforcement(),
        };
        SandboxNote {
            mode: self.policy.mode,
            network: self.policy.mode == SandboxMode::Off || self.policy.network,
            detail,
        }
    }

    /// Runs `true` under the sandbox with the current directory as workspace.
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
            .stderr(std::process::Stdio::null());
        prepared.apply_std(&mut cmd);
        let status = cmd.status().map_err(|e| {
            format!(
                "cannot enter the sandbox ({e}); are user namespaces disabled (sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces, or an AppArmor restriction)?"
            )
        })?;
        if !status.success() {
            return Err(format!("a trial command in the sandbox failed ({status})"));
        }
        Ok(())
    }

    /// Builds everything the child needs, before the fork (the child may not allocate).
    /// `None` when the mode is `off`.
    pub(crate) fn prepare(&self, workspace: &Path) -> io::Result<Prepared> {
        if self.policy.mode == SandboxMode::Off {
            return Ok(Prepared {
                tmp: None,
                child: None,
            });
        }
        if let Some(why) = &self.unavailable {
            return Err(io::Error::other(why.clone()));
        }
        let tmp = PrivateTmp::create()?;
        let ruleset = self
            .ruleset(workspace, &tmp.path)
            .map_err(io::Error::other)?;
        let privileged = self.privileged;
        let mut flags = libc::CLONE_NEWPID;
        if !self.policy.network {
            flags |= libc::CLONE_NEWNET;
        }
        if !privileged {
            flags |= libc::CLONE_NEWUSER;
        }
        let uid = rustix::process::getuid().as_raw();
        let gid = rustix::process::getgid().as_raw();
        let cstr = |s: String| CString::new(s).map_err(io::Error::other);
        Ok(Prepared {
            child: Some(Arc::new(ChildPlan {
                unshare_flags: flags,
                user_ns: !privileged,
                uid_map: cstr(format!("{uid} {uid} 1\n"))?,
                gid_map: cstr(format!("{gid} {gid} 1\n"))?,
                ruleset,
            })),
            tmp: Some(tmp),
        })
    }

    fn ruleset(&self, workspace: &Path, tmp: &Path) -> Result<OwnedFd, String> {
        let abi = ABI::from(self.landlock_abi);
        let all = AccessFs::from_all(abi);
        let mut read = AccessFs::from_read(abi);
        if self.landlock_abi >= 5 {
            // ioctl on devices (terminals, /dev/null) is not what the sandbox is about
            read |= AccessFs::IoctlDev;
        }
        let device = AccessFs::from_file(abi);
        let e = |what: &str, err: &dyn fmt::Display| format!("Landlock {what}: {err}");
        let mut rs = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(all)
            .map_err(|x| e("file-system rights", &x))?;
        if !self.policy.network && self.landlock_abi >= 4 {
            rs = rs
                .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
                .map_err(|x| e("network rights", &x))?;
        }
        if self.landlock_abi >= 6 {
            rs = rs
                .scope(Scope::from_all(ABI::V6))
                .map_err(|x| e("scopes", &x))?;
        }
        let mut created = rs.create().map_err(|x| e("ruleset", &x))?;
        let beneath = |p: &Path| PathFd::new(p).map_err(|x| e(&format!("{}", p.display()), &x));
        let hidden = hidden_paths(self.home.as_deref());
        for (path, grant) in read_grants(&hidden) {
            let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
            let access = match grant {
                Grant::Read if is_dir => read,
                Grant::Read => read & AccessFs::from_file(abi),
                Grant::ListOnly => AccessFs::ReadDir.into(),
            };
            // A path that vanished since it was listed is simply not granted.
            let Ok(fd) = PathFd::new(&path) else { continue };
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|x| e(&format!("rule for {}", path.display()), &x))?;
        }
        if self.policy.mode == SandboxMode::WorkspaceWrite {
            created = created
                .add_rule(PathBeneath::new(beneath(workspace)?, all))
                .map_err(|x| e("rule for the workspace", &x))?;
        }
        created = created
            .add_rule(PathBeneath::new(beneath(tmp)?, all))
            .map_err(|x| e("rule for $TMPDIR", &x))?;
        for dev in ["/dev/null", "/dev/zero", "/dev/full"] {
            if let Ok(fd) = PathFd::new(dev) {
                created = created
                    .add_rule(PathBeneath::new(fd, device))
                    .map_err(|x| e(dev, &x))?;
            }
        }
        let fd: Option<OwnedFd> = created.into();
        fd.ok_or_else(|| "Landlock is not enforced by this kernel".to_string())
    }
}

/// Places in the home directory that hold credentials: confined commands cannot read the
/// files in them (they can list the names).
pub const HIDDEN_IN_HOME: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".password-store",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];

/// Environment variables whose names contain one of these (any case) are not passed to
/// confined commands: they usually hold credentials (the model API key among them).
pub const HIDDEN_ENV_PARTS: &[&str] =
    &["KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"];

fn hidden_paths(home: Option<&Path>) -> Vec<PathBuf> {
    let Some(home) = home else {
        return Vec::new();
    };
    let home = home.canonicalize().unwrap_or_else(|_| home.to_path_buf());
    HIDDEN_IN_HOME.iter().map(|h| home.join(h)).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grant {
    Read,
    ListOnly,
}

/// Read rights for everything except `hidden`: Landlock rules only add rights, so every
/// directory on the way to a hidden path gets listing only, and each of its other entries a
/// full read rule. Symbolic links get no rule (what they point to is judged by its own).
fn read_grants(hidden: &[PathBuf]) -> Vec<(PathBuf, Grant)> {
    fn walk(path: &Path, hidden: &[PathBuf], out: &mut Vec<(PathBuf, Grant)>) {
        if hidden.iter().any(|h| h == path) {
            return;
        }
        if !hidden.iter().any(|h| h.starts_with(path)) {
            out.push((path.to_path_buf(), Grant::Read));
            return;
        }
        out.push((path.to_path_buf(), Grant::ListOnly));
        let Ok(rd) = std::fs::read_dir(path) else {
            return;
        };
        for entry in rd.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            walk(&entry.path(), hidden, out);
        }
    }
    let mut out = Vec::new();
    walk(Path::new("/"), hidden, &mut out);
    out
}

/// The call's private temporary directory (mode 0700), removed when dropped.
#[derive(Debug)]
pub(crate) struct PrivateTmp {
    pub(crate) path: PathBuf,
}

/// Removes the private temporary directories of runners that are gone (killed with
/// SIGKILL, say): `lazarus-shell-PID-*` of this user whose PID no longer exists. A reused
/// PID only delays the removal.
fn sweep_stale_tmp(base: &Path) {
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::getuid().as_raw();
    let Ok(rd) = std::fs::read_dir(base) else {
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
        let mine = std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if mine && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl PrivateTmp {
    fn create() -> io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep_stale_tmp(&base));
        for _ in 0..16 {
            let path = base.join(format!(
                "lazarus-shell-{}-{:016x}",
                std::process::id(),
                rand::random::<u64>()
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(PrivateTmp { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "cannot create a temporary directory in {}: {e}",
                            base.display()
                        ),
                    ));
                }
            }
        }
        Err(io::Error::other(format!(
            "cannot create a unique temporary directory in {}",
            base.display()
        )))
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove a shell call's temporary directory");
        }
    }
}

/// What the child does between fork and exec; built before the fork.
#[derive(Debug)]
struct ChildPlan {
    unshare_flags: libc::c_int,
    user_ns: bool,
    uid_map: CString,
    gid_map: CString,
    ruleset: OwnedFd,
}

/// A prepared sandbox for one command.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) tmp: Option<PrivateTmp>,
    child: Option<Arc<ChildPlan>>,
}

impl Prepared {
    /// Installs the sandbox on a tokio command (sets `TMPDIR`, adds the `pre_exec` step).
    pub(crate) fn apply(&self, cmd: &mut tokio::process::Command) {
        if let Some(tmp) = &self.tmp {
            cmd.env("TMPDIR", &tmp.path);
            for (name, _) in std::env::vars_os() {
                let upper = name.to_string_lossy().to_ascii_uppercase();
                if HIDDEN_ENV_PARTS.iter().any(|p| upper.contains(p)) {
                    cmd.env_remove(&name);
                }
            }
        }
        if let Some(plan) = self.child.clone() {
            // SAFETY: `enter` only makes async-signal-safe system calls on data built before
            // the fork; it allocates nothing.
            unsafe {
                cmd.pre_exec(move || enter(&plan));
            }
        }
    }

    fn apply_std(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        if let Some(tmp) = &self.tmp {
            cmd.env("TMPDIR", &tmp.path);
        }
        if let Some(plan) = self.child.clone() {
            // SAFETY: as in `apply`.
            unsafe {
                cmd.pre_exec(move || enter(&plan));
            }
        }
    }
}

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// Writes `data` to the file `path` (raw calls only).
unsafe fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
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

/// Closes every descriptor above stderr (the spawn's error pipe among them, so the parent's
/// `spawn` returns when the real command execs).
unsafe fn close_above_stderr() {
    // SAFETY: closing descriptors this process owns.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
            for fd in 3..4096 {
                libc::close(fd);
            }
        }
    }
}

/// Between fork and exec of the leader: namespaces, Landlock, then the init. Returns only in
/// the process that goes on to exec the shell.
fn enter(plan: &ChildPlan) -> io::Result<()> {
    // SAFETY: async-signal-safe system calls only, on data prepared before the fork.
    unsafe {
        if libc::unshare(plan.unshare_flags) != 0 {
            return Err(last_err());
        }
        if plan.user_ns {
            write_proc(c"/proc/self/setgroups", b"deny")?;
            write_proc(c"/proc/self/uid_map", plan.uid_map.as_bytes())?;
            write_proc(c"/proc/self/gid_map", plan.gid_map.as_bytes())?;
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(last_err());
        }
        if libc::syscall(
            libc::SYS_landlock_restrict_self,
            plan.ruleset.as_raw_fd(),
            0u32,
        ) != 0
        {
            return Err(last_err());
        }
        // The leader stays outside the new PID namespace; its first child is the namespace's
        // PID 1.
        let init = libc::fork();
        if init < 0 {
            return Err(last_err());
        }
        if init > 0 {
            close_above_stderr();
            let mut st = 0;
            loop {
                let r = libc::waitpid(init, &mut st, 0);
                if r == init {
                    libc::_exit(code_of(st));
                }
                if r < 0 && *libc::__errno_location() != libc::EINTR {
                    libc::_exit(126);
                }
            }
        }
        // PID 1: run the shell as its child and reap orphans until the shell exits; then
        // exit, and the kernel kills whatever is left in the namespace.
        let shell = libc::fork();
        if shell < 0 {
            libc::_exit(126);
        }
        if shell > 0 {
            close_above_stderr();
            let mut st = 0;
            loop {
                let r = libc::waitpid(-1, &mut st, 0);
                if r == shell {
                    libc::_exit(code_of(st));
                }
                if r < 0 && *libc::__errno_location() != libc::EINTR {
                    libc::_exit(126);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
