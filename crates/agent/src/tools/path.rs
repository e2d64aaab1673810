//! Confining paths to the workspace, atomically.
//!
//! Every file tool resolves its path with one `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS)` from a descriptor of the workspace: the kernel refuses any step
//! out of it (`..`, an absolute symlink, a symlink to outside, `/proc` magic links) during the
//! open itself, so a directory swapped for a symlink between a check and the open cannot
//! redirect it. Nothing is resolved by name and opened later.
//!
//! The shell sandbox's denied set (credential stores in `$HOME`, Lazarus's own state, the
//! approvals policy) holds for the file tools too where it lies *inside* the workspace (a
//! workspace that is the home directory must not hand out `~/.ssh`): what an open reached is
//! looked up by the kernel's own name for it (`/proc/self/fd`), so a symlink inside the
//! workspace cannot lead around it. Denied paths that hold the workspace (a gateway's
//! workspace root) are the shell's business: a session's own workspace is granted back.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("the workspace {0} cannot be opened: {1}")]
    Workspace(PathBuf, #[source] io::Error),
    #[error("path {0:?} is outside the workspace; use a path relative to the workspace")]
    Outside(String),
    #[error("path {0:?} leaves the workspace through a symbolic link")]
    SymlinkEscape(String),
    #[error("path {0:?} does not exist")]
    NotFound(String),
    #[error("path is empty")]
    Empty,
    #[error("cannot resolve path {0:?}: {1}")]
    Io(String, #[source] io::Error),
    #[error(
        "path {0:?} is in a denied location (credentials or Lazarus's own state); the file tools do not touch it"
    )]
    Denied(String),
    #[error(
        "path {0:?} is version-control metadata (.git, .hg, .jj), read-only to the tools: git would run what is written there (hooks, config) outside the sandbox; the operator can allow it with --sandbox-allow-vcs-write"
    )]
    ReadOnly(String),
}

pub(crate) fn errno(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// A workspace opened as a directory descriptor; paths are resolved beneath it.
#[derive(Debug)]
pub struct Workspace {
    root: OwnedFd,
    path: PathBuf,
    /// Denied paths beneath the workspace, resolved (see the module's doc).
    denied: Vec<PathBuf>,
    /// Paths beneath the workspace that may be read and not written (its version-control
    /// metadata), resolved.
    read_only: Vec<PathBuf>,
}

impl Workspace {
    /// Opens the workspace directory (following symlinks: the operator chose it).
    pub fn open(workspace: &Path) -> Result<Self, PathError> {
        let root = rustix::fs::open(
            workspace,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| PathError::Workspace(workspace.to_path_buf(), errno(e)))?;
        Ok(Workspace {
            root,
            path: workspace.to_path_buf(),
            denied: Vec::new(),
            read_only: Vec::new(),
        })
    }

    /// Refuses the paths of `denied` (resolved) that lie beneath the workspace; the others
    /// are left to the shell's sandbox.
    pub fn denying(mut self, denied: Vec<PathBuf>) -> Self {
        self.denied = self.beneath(denied);
        self
    }

    /// Refuses writes (a file written or made, a directory made) beneath the paths of
    /// `paths` (resolved, existing or not) that lie beneath the workspace.
    pub fn read_only(mut self, paths: Vec<PathBuf>) -> Self {
        self.read_only = self.beneath(paths);
        self
    }

    fn beneath(&self, paths: Vec<PathBuf>) -> Vec<PathBuf> {
        let real = self
            .path
            .canonicalize()
            .unwrap_or_else(|_| self.path.clone());
        paths
            .into_iter()
            .filter(|d| d != &real && d.starts_with(&real))
            .collect()
    }

    /// The kernel's name for what `fd` reached.
    fn real_path(fd: &OwnedFd, shown: &str) -> Result<PathBuf, PathError> {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|e| PathError::Io(shown.to_string(), e))
    }

    fn refuse_denied(&self, real: &Path, shown: &str) -> Result<(), PathError> {
        if self.denied.iter().any(|d| real.starts_with(d)) {
            return Err(PathError::Denied(shown.to_string()));
        }
        Ok(())
    }

    /// Refuses a name about to be made in directory `dir` (a file written, a directory
    /// created) when it would be a denied or read-only path.
    pub fn check_entry(&self, dir: &OwnedFd, name: &OsStr, shown: &str) -> Result<(), PathError> {
        if self.denied.is_empty() && self.read_only.is_empty() {
            return Ok(());
        }
        let real = Self::real_path(dir, shown)?.join(name);
        self.refuse_denied(&real, shown)?;
        if self.read_only.iter().any(|d| real.starts_with(d)) {
            return Err(PathError::ReadOnly(shown.to_string()));
        }
        Ok(())
    }

    /// The path relative to the workspace, lexically: absolute paths must lie inside the
    /// workspace (as given or canonical), `..` may not climb above it. Empty means the
    /// workspace itself.
    pub fn relative(&self, path: &str) -> Result<PathBuf, PathError> {
        if path.is_empty() {
            return Err(PathError::Empty);
        }
        if path.contains('\0') {
            return Err(PathError::Outside(path.to_string()));
        }
        let p = Path::new(path);
        let rel: PathBuf = if p.is_absolute() {
            let canon = self.path.canonicalize().ok();
            if let Some(r) = canon.as_ref().and_then(|c| p.strip_prefix(c).ok()) {
                r.to_path_buf()
            } else if let Ok(r) = p.strip_prefix(&self.path) {
                r.to_path_buf()
            } else {
                return Err(PathError::Outside(path.to_string()));
            }
        } else {
            p.to_path_buf()
        };
        let mut parts: Vec<&OsStr> = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(s) => parts.push(s),
                Component::CurDir => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Err(PathError::Outside(path.to_string()));
                    }
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(PathError::Outside(path.to_string()));
                }
            }
        }
        Ok(parts.iter().collect())
    }

    /// Opens `rel` beneath the workspace in one `openat2` (symlinks inside the workspace are
    /// followed; any step out of it is refused by the kernel).
    pub fn open_beneath(
        &self,
        rel: &Path,
        flags: OFlags,
        shown: &str,
    ) -> Result<OwnedFd, PathError> {
        let target: &Path = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(
                &self.root,
                target,
                flags | OFlags::CLOEXEC,
                Mode::empty(),
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            ) {
                Ok(fd) => {
                    if !self.denied.is_empty() {
                        self.refuse_denied(&Self::real_path(&fd, shown)?, shown)?;
                    }
                    return Ok(fd);
                }
                // a concurrent rename made the kernel unsure; try again
                Err(Errno::AGAIN) if tries < 16 => tries += 1,
                Err(Errno::XDEV) | Err(Errno::LOOP) => {
                    return Err(PathError::SymlinkEscape(shown.to_string()));
                }
                Err(Errno::NOENT) => return Err(PathError::NotFound(shown.to_string())),
                Err(Errno::NOSYS) => {
                    return Err(PathError::Io(
                        shown.to_string(),
                        io::Error::other(
                            "this kernel lacks openat2 (Linux 5.6+), which the file tools need to stay inside the workspace",
                        ),
                    ));
                }
                Err(e) => return Err(PathError::Io(shown.to_string(), errno(e))),
            }
        }
    }

    /// Opens the directory `rel` beneath the workspace, creating missing components one at
    /// a time (`mkdirat` in the directory just opened, then `openat2` again from the root),
    /// so nothing is ever created outside the workspace.
    pub fn create_dirs(&self, rel: &Path, shown: &str) -> Result<OwnedFd, PathError> {
        let mut done = PathBuf::new();
        let mut dir = self.open_beneath(&done, OFlags::RDONLY | OFlags::DIRECTORY, shown)?;
        for part in rel.components() {
            let Component::Normal(name) = part else {
                return Err(PathError::Outside(shown.to_string()));
            };
            done.push(name);
            dir = match self.open_beneath(&done, OFlags::RDONLY | OFlags::DIRECTORY, shown) {
                Ok(fd) => fd,
                Err(PathError::NotFound(_)) => {
                    self.check_entry(&dir, name, shown)?;
                    match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(PathError::Io(shown.to_string(), errno(e))),
                    }
                    self.open_beneath(&done, OFlags::RDONLY | OFlags::DIRECTORY, shown)?
                }
                Err(e) => return Err(e),
            };
        }
        Ok(dir)
    }

    pub fn root(&self) -> impl AsFd + '_ {
        &self.root
    }
}

/// Splits a relative path into its parent and last component (`None` for the workspace).
pub(crate) fn split_last(rel: &Path) -> Option<(&Path, &OsStr)> {
    let name = rel.file_name()?;
    Some((rel.parent().unwrap_or(Path::new("")), name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn confines_paths() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::create_dir(ws.path().join("sub")).unwrap();
        std::fs::write(ws.path().join("sub/x"), "x").unwrap();
        std::fs::write(outside.path().join("x"), "secret").unwrap();
        symlink(outside.path(), ws.path().join("out")).unwrap();
        symlink("sub", ws.path().join("in")).unwrap();
        symlink("../sub/x", ws.path().join("sub/up")).unwrap();
        symlink("/etc/hostname", ws.path().join("abs")).unwrap();
        symlink("/proc/self/root/etc/hostname", ws.path().join("magic")).unwrap();
        let w = Workspace::open(ws.path()).unwrap();

        let rel = |p: &str| w.relative(p).unwrap();
        assert_eq!(rel("a.txt"), Path::new("a.txt"));
        assert_eq!(rel("./sub/../b/c.txt"), Path::new("b/c.txt"));
        assert_eq!(rel(&root.join("sub").to_string_lossy()), Path::new("sub"));
        assert_eq!(rel("."), Path::new(""));
        let err = |p: &str| w.relative(p).unwrap_err();
        assert!(matches!(err("../x"), PathError::Outside(_)));
        assert!(matches!(err("sub/../../x"), PathError::Outside(_)));
        assert!(matches!(err("/etc/passwd"), PathError::Outside(_)));
        assert!(matches!(err(""), PathError::Empty));

        let open = |p: &str| w.open_beneath(Path::new(p), OFlags::RDONLY, p);
        assert!(open("in/x").is_ok());
        assert!(open("sub/up").is_ok());
        assert!(open("").is_ok());
        for bad in ["out/x", "out", "abs", "magic"] {
            assert!(
                matches!(open(bad), Err(PathError::SymlinkEscape(_))),
                "{bad}: {:?}",
                open(bad)
            );
        }
        assert!(matches!(open("nope"), Err(PathError::NotFound(_))));
    }

    #[test]
    fn creates_directories_only_beneath() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), ws.path().join("link")).unwrap();
        let w = Workspace::open(ws.path()).unwrap();
        w.create_dirs(Path::new("a/b/c"), "a/b/c").unwrap();
        assert!(ws.path().join("a/b/c").is_dir());
        assert!(matches!(
            w.create_dirs(Path::new("link/a/b"), "link/a/b"),
            Err(PathError::SymlinkEscape(_))
        ));
        assert!(
            std::fs::read_dir(outside.path()).unwrap().next().is_none(),
            "created something outside"
        );
    }
}
