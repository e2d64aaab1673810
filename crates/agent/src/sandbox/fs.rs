//! The call's Landlock ruleset: what it may read, write and use in `/dev`.
//!
//! Landlock rules only add rights, so a denied path is carved out by walking down to it:
//! every directory on the way gets listing only (`ReadDir`), each of its other entries the
//! full grant. Denied paths are resolved (symbolic links followed, even dangling ones) when
//! the ruleset is built, so `~/.kube -> /elsewhere` denies `/elsewhere`. `/dev` is denied as a
//! whole and a short list of devices granted back ([`DEVICES`]); the call gets a private
//! `/dev/shm` and its own pseudo-terminals.

use std::ffi::OsString;
use std::fmt;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};

/// Places in the home directory that hold credentials: confined commands cannot read the
/// files in them (they can list the names). Resolved: a symbolic link denies its target.
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

/// The system's own credential files (the SSH host keys `/etc/ssh/ssh_host_*_key` too).
pub const HIDDEN_SYSTEM: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
];

/// A set of Landlock file-system rights.
pub(crate) type FsRights = BitFlags<AccessFs>;

/// The devices a call may open; the rest of `/dev` (disks, `/dev/kmsg`, `/dev/mem`, the host's
/// terminals, `/dev/tty` and `/dev/console`, and shared memory) is denied. `/dev/pts` and
/// `/dev/ptmx` are the call's own (a new `devpts` instance), `/dev/shm` its private
/// directory. (`/dev/tty` would open nothing anyway: a call has no controlling terminal.)
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// `path` with every symbolic link resolved, as far as it exists (like `realpath -m`): the
/// components after the first missing one are taken as written. At most 40 links are
/// followed (the kernel's own limit); `..` is applied to the resolved path.
pub fn resolve(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let mut todo: Vec<OsString> = Vec::new();
    push_components(&mut todo, &abs);
    let mut out = PathBuf::from("/");
    let mut hops = 0;
    while let Some(c) = todo.pop() {
        if c == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&c);
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() && hops < 40 => {
                hops += 1;
                match std::fs::read_link(&next) {
                    Ok(target) => {
                        if target.is_absolute() {
                            out = PathBuf::from("/");
                        }
                        push_components(&mut todo, &target);
                    }
                    Err(_) => out = next,
                }
            }
            _ => out = next,
        }
    }
    out
}

/// Pushes `p`'s components in reverse (so popping yields them in order); `.` dropped.
fn push_components(todo: &mut Vec<OsString>, p: &Path) {
    let comps: Vec<OsString> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect();
    todo.extend(comps.into_iter().rev());
}

/// Every denied path, resolved: the credential stores in `home` and `extra` (the session
/// directory, a gateway's token and workspaces), and `/dev` (its devices are granted back one
/// by one).
pub fn denied_paths(home: Option<&Path>, extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    if let Some(home) = home {
        out.extend(HIDDEN_IN_HOME.iter().map(|h| resolve(&home.join(h))));
    }
    out.extend(extra.iter().map(|p| resolve(p)));
    out.push(PathBuf::from("/dev"));
    out.sort();
    out.dedup();
    out
}

/// The version-control metadata directories a workspace's own repository keeps at its top.
/// Programs the person runs later (git from a prompt theme, hg, jj) execute what they hold
/// (hooks, `core.fsmonitor`, `[hooks]`, aliases), outside any sandbox.
pub const VCS_DIRS: &[&str] = &[".git", ".hg", ".jj"];

/// The user's configuration of those programs in the home directory (hooks and commands it
/// names run for every repository): read-only like the metadata where a workspace holds it.
pub const VCS_USER_CONFIG: &[&str] = &[
    ".gitconfig",
    ".config/git",
    ".hgrc",
    ".config/hg",
    ".jjconfig.toml",
    ".config/jj",
];

/// The version-control metadata of `workspace` (resolved; existing or not): `.git`, `.hg` and
/// `.jj` at its top and, when `.git` is a file (a worktree or a submodule), the git directory
/// it names and that one's `commondir` (the main repository's), wherever they lie. Writes to
/// them are refused unless the operator allows them (`--sandbox-allow-vcs-write`).
pub fn vcs_metadata(workspace: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for name in VCS_DIRS {
        out.push(resolve(&workspace.join(name)));
    }
    let dot_git = resolve(&workspace.join(".git"));
    if let Some(gitdir) = pointed_dir(&dot_git, "gitdir:") {
        if let Some(common) = pointed_dir(&gitdir.join("commondir"), "") {
            out.push(common);
        }
        out.push(gitdir);
    }
    out.sort();
    out.dedup();
    out
}

/// The directory a small pointer file names (`gitdir: PATH` in a `.git` file, a bare `PATH`
/// in `commondir`), resolved relative to the file's directory; `None` if it is no such file.
fn pointed_dir(file: &Path, prefix: &str) -> Option<PathBuf> {
    use std::io::Read;
    let meta = std::fs::symlink_metadata(file).ok()?;
    if !meta.is_file() || meta.len() > 4096 {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(file)
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    let line = text.lines().next()?.strip_prefix(prefix)?.trim();
    if line.is_empty() {
        return None;
    }
    let base = file.parent()?;
    Some(resolve(&base.join(line)))
}

/// The system's credential files that exist ([`HIDDEN_SYSTEM`] and the SSH host keys),
/// resolved. The init mounts `/dev/null` over each: carving `/etc` in Landlock would take a
/// rule for each of its entries on every call, and these files do not come and go.
pub fn system_secrets() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = HIDDEN_SYSTEM
        .iter()
        .map(|p| resolve(Path::new(p)))
        .collect();
    if let Ok(rd) = std::fs::read_dir("/etc/ssh") {
        for e in rd.flatten() {
            let n = e.file_name();
            let n = n.to_string_lossy();
            if n.starts_with("ssh_host_") && !n.ends_with(".pub") {
                out.push(resolve(&e.path()));
            }
        }
    }
    out.retain(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()));
    out.sort();
    out.dedup();
    out
}

/// Rights beneath `path`, carved around `denied`: `(path, rights)` pairs for Landlock.
fn carve(
    path: &Path,
    is_dir: bool,
    access: FsRights,
    file_rights: FsRights,
    denied: &[PathBuf],
    out: &mut Vec<(PathBuf, FsRights)>,
) {
    if denied.iter().any(|d| d == path) {
        return;
    }
    if !denied.iter().any(|d| d.starts_with(path)) {
        // a file gets the file rights only (Landlock refuses directory rights on files)
        let access = if is_dir { access } else { access & file_rights };
        out.push((path.to_path_buf(), access));
        return;
    }
    out.push((path.to_path_buf(), access & AccessFs::ReadDir));
    let Ok(rd) = std::fs::read_dir(path) else {
        return;
    };
    for entry in rd.flatten() {
        // Symbolic links get no rule: what they point to is judged by its own.
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        // the entry's type as the directory listing gives it (no stat for each)
        let Ok(t) = entry.file_type() else { continue };
        carve(&entry.path(), t.is_dir(), access, file_rights, denied, out);
    }
}

/// What a call may do where: the `(path, rights)` pairs of its ruleset.
#[derive(Debug)]
pub(crate) struct FsPlan {
    pub(crate) rules: Vec<(PathBuf, FsRights)>,
}

/// The rights a call gets.
pub(crate) struct Rights {
    pub(crate) read: FsRights,
    pub(crate) write: FsRights,
    pub(crate) device: FsRights,
    pub(crate) all: FsRights,
}

pub(crate) fn rights(abi: i32) -> Rights {
    let v = ABI::from(abi);
    let all = AccessFs::from_all(v);
    let mut read = AccessFs::from_read(v);
    if abi >= 5 {
        // ioctl on devices (terminals, /dev/null) is not what the sandbox is about
        read |= AccessFs::IoctlDev;
    }
    Rights {
        read,
        // no device nodes, even in the workspace
        write: all & !(AccessFs::MakeChar | AccessFs::MakeBlock),
        device: AccessFs::from_file(v),
        all,
    }
}

/// Where a call may read (`/` less `denied`), write (`writable`, less `denied`) and which
/// devices it may use.
pub(crate) fn plan(
    abi: i32,
    denied: &[PathBuf],
    writable: &[PathBuf],
    shm: Option<&Path>,
) -> FsPlan {
    let r = rights(abi);
    let mut rules = Vec::new();
    let file_rights = AccessFs::from_file(ABI::from(abi));
    carve(
        Path::new("/"),
        true,
        r.read,
        file_rights,
        denied,
        &mut rules,
    );
    for w in writable {
        carve(w, true, r.write, file_rights, denied, &mut rules);
    }
    rules.push((PathBuf::from("/dev"), AccessFs::ReadDir.into()));
    for d in DEVICES {
        rules.push((PathBuf::from(d), r.device));
    }
    // the call's own devpts instance and its multiplexer, like the new /proc, are granted by
    // the init once mounted (Landlock skips the mount points they hide)
    if let Some(shm) = shm {
        rules.push((shm.to_path_buf(), r.write));
    }
    FsPlan { rules }
}

impl FsPlan {
    /// The Landlock ruleset: every file-system right of the ABI handled, TCP denied unless
    /// `network`, signals and abstract sockets scoped (ABI ≥ 6).
    pub(crate) fn ruleset(&self, abi: i32, network: bool) -> Result<OwnedFd, String> {
        let r = rights(abi);
        let e = |what: &str, err: &dyn fmt::Display| format!("Landlock {what}: {err}");
        let mut rs = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(r.all)
            .map_err(|x| e("file-system rights", &x))?;
        if !network && abi >= 4 {
            rs = rs
                .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
                .map_err(|x| e("network rights", &x))?;
        }
        if abi >= 6 {
            rs = rs
                .scope(Scope::from_all(ABI::V6))
                .map_err(|x| e("scopes", &x))?;
        }
        let mut created = rs.create().map_err(|x| e("ruleset", &x))?;
        for (path, access) in &self.rules {
            if access.is_empty() {
                continue;
            }
            // A path that vanished since it was listed is simply not granted.
            let Ok(fd) = PathFd::new(path) else { continue };
            created = created
                .add_rule(PathBeneath::new(fd, *access))
                .map_err(|x| e(&format!("rule for {}", path.display()), &x))?;
        }
        let fd: Option<OwnedFd> = created.into();
        fd.ok_or_else(|| "Landlock is not enforced by this kernel".to_string())
    }
}
