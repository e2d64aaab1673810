//! Where a gateway session's tools work.
//!
//! The workspace comes only from the operator's `--workspace-root`: a session works in
//! `<root>/<id>`, or in a directory a create request names beneath the root. A ledger's
//! header (`meta.workspace`, which an import or a fork carries in) is a record, never an
//! authority: it is used only when it names a directory strictly beneath the root, reached
//! without symbolic links; anything else (`/`, `.`, the root itself, a path through a
//! symlink) falls back to `<root>/<id>`.
//!
//! Directories are created one component at a time beneath a descriptor of the root
//! (`mkdirat`, then an `O_NOFOLLOW` open of what was made), so a refused workspace creates
//! nothing anywhere, and nothing is ever created outside the root. Workspaces are made 0700.
//! A requested workspace that already exists is refused (`409 workspace_in_use`): workspaces
//! are distinct per session (forks, which carry their parent's record, share it).

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};

/// A workspace made for a new session, and what of it was created here (so that a creation
/// that fails afterwards leaves no directory behind: [`WorkspacePolicy::undo`]).
#[derive(Debug)]
pub struct NewWorkspace {
    pub path: PathBuf,
    rel: PathBuf,
    /// How many leading components of `rel` existed before; the rest were made here.
    existed: Option<usize>,
}

/// Longest directory name (`NAME_MAX` on Linux file systems).
const NAME_BYTES_MAX: usize = 255;

/// The operator's workspace root (canonical).
#[derive(Debug, Clone)]
pub struct WorkspacePolicy {
    root: PathBuf,
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::bad_request("bad_workspace", msg)
}

impl WorkspacePolicy {
    /// `root` must be canonical (the gateway canonicalises `--workspace-root` at start).
    pub fn new(root: PathBuf) -> Self {
        WorkspacePolicy { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The workspace of a new session: `requested` (relative to the root, or absolute inside
    /// it) or `<root>/<id>`, created. A requested workspace must not be the root, must not
    /// exist yet, and must not pass through a symbolic link.
    pub fn for_new_session(&self, requested: Option<&str>, id: &str) -> ApiResult<NewWorkspace> {
        let rel = match requested {
            None => PathBuf::from(id),
            Some(w) => self.requested_relative(w)?,
        };
        if requested.is_some() {
            match self.walk(&rel, false) {
                Ok(_) => {
                    return Err(ApiError::conflict(
                        "workspace_in_use",
                        format!(
                            "workspace {} already exists; workspaces are distinct per session (omit `workspace` for {}/<id>)",
                            self.root.join(&rel).display(),
                            self.root.display()
                        ),
                    ));
                }
                Err(WalkError::Missing) => {}
                Err(WalkError::Symlink) => {
                    return Err(bad(format!(
                        "workspace passes through a symbolic link; it must be a plain directory inside {}",
                        self.root.display()
                    )));
                }
                Err(WalkError::Io(e)) => {
                    return Err(ApiError::io(
                        format_args!("workspace {}", self.root.join(&rel).display()),
                        &e,
                    ));
                }
            }
        }
        self.make_new(rel)
    }

    /// Creates `rel` (validated) for a new session; whatever it made is removed again when a
    /// later step fails.
    fn make_new(&self, rel: PathBuf) -> ApiResult<NewWorkspace> {
        let mut existed = None;
        let made = self.walk_making(&rel, &mut existed);
        let ws = NewWorkspace {
            path: self.root.join(&rel),
            rel: rel.clone(),
            existed,
        };
        if made.is_err() {
            // what was made before the walk failed goes too
            self.undo(&ws);
        }
        match made {
            Ok(_) => Ok(ws),
            Err(WalkError::Symlink) => Err(bad(format!(
                "workspace passes through a symbolic link; it must be a plain directory inside {}",
                self.root.display()
            ))),
            Err(WalkError::Io(e)) => Err(ApiError::io(
                format_args!("cannot create workspace {}", self.root.join(&rel).display()),
                &e,
            )),
            Err(e @ WalkError::Missing) => Err(ApiError::internal(format!(
                "cannot create workspace {}: {e}",
                self.root.join(&rel).display()
            ))),
        }
    }

    /// Removes the directories [`WorkspacePolicy::for_new_session`] made for `ws` (empty ones
    /// only, deepest first, each beneath a descriptor of its parent), when the session they
    /// were made for could not be created. Best effort: what cannot be removed is logged.
    pub fn undo(&self, ws: &NewWorkspace) {
        let Some(existed) = ws.existed else {
            return;
        };
        let parts: Vec<&OsStr> = ws.rel.iter().collect();
        for depth in (existed..parts.len()).rev() {
            let parent: PathBuf = parts[..depth].iter().collect();
            // a walk that failed half-way made only the first few: the rest are not there
            let r = match self.walk(&parent, false) {
                Ok((dir, _)) => {
                    match rustix::fs::unlinkat(&dir, parts[depth], rustix::fs::AtFlags::REMOVEDIR) {
                        Ok(()) | Err(Errno::NOENT) | Err(Errno::NAMETOOLONG) => Ok(()),
                        Err(e) => Err(e.to_string()),
                    }
                }
                Err(WalkError::Missing) => Ok(()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = r {
                tracing::warn!(workspace = %ws.path.display(), error = %e, "cannot remove the workspace made for a session that was not created");
                return;
            }
        }
    }

    /// Where an existing session's workspace is (what [`WorkspacePolicy::for_existing_session`]
    /// would use), without creating anything: for describing a session that is not open.
    pub fn path_for_existing(&self, meta: Option<&Value>, id: &str) -> PathBuf {
        meta.and_then(|m| m.get("workspace"))
            .and_then(Value::as_str)
            .and_then(|w| self.recorded_relative(w))
            .map_or_else(|| self.root.join(id), |rel| self.root.join(rel))
    }

    /// A workspace a session's world records, when it lies strictly beneath the root: the
    /// path, reached without symbolic links and made if missing (0700, as for the gateway's
    /// own sessions). `None` when it is not beneath the root or cannot be reached so.
    pub fn recorded_beneath_root(&self, w: &str) -> Option<PathBuf> {
        let rel = self.recorded_relative(w)?;
        match self.ensure(&rel) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!(recorded = w, error = %e, "the recorded workspace cannot be used");
                None
            }
        }
    }

    /// The workspace of an existing session (opened from the store): the one its header
    /// records when that is strictly beneath the root and reached without symbolic links,
    /// else `<root>/<id>`. Created if missing.
    pub fn for_existing_session(&self, meta: Option<&Value>, id: &str) -> PathBuf {
        let recorded = meta
            .and_then(|m| m.get("workspace"))
            .and_then(Value::as_str);
        if let Some(w) = recorded {
            match self.recorded_relative(w) {
                Some(rel) => match self.ensure(&rel) {
                    Ok(p) => return p,
                    Err(e) => tracing::warn!(
                        session = id,
                        recorded = w,
                        error = %e,
                        "the recorded workspace cannot be used; using the default one"
                    ),
                },
                None => tracing::warn!(
                    session = id,
                    recorded = w,
                    root = %self.root.display(),
                    "the session's header names a workspace outside --workspace-root; using the default one"
                ),
            }
        }
        let rel = PathBuf::from(id);
        match self.ensure(&rel) {
            Ok(p) => p,
            Err(e) => {
                // the tools report the problem when they run
                tracing::warn!(session = id, error = %e, "cannot create the session's workspace");
                self.root.join(rel)
            }
        }
    }

    /// Validates a requested workspace: non-empty, no `..`, relative or absolute inside the
    /// root, not the root itself.
    fn requested_relative(&self, w: &str) -> ApiResult<PathBuf> {
        if w.is_empty() || w.len() > 4096 || w.contains('\0') {
            return Err(bad("workspace must be a non-empty path"));
        }
        let p = Path::new(w);
        if p.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(bad("workspace must not contain '..'"));
        }
        let rel = if p.is_absolute() {
            p.strip_prefix(&self.root)
                .map_err(|_| bad(format!("workspace must be inside {}", self.root.display())))?
        } else {
            p
        };
        let rel: PathBuf = rel
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        if rel.iter().any(|c| c.len() > NAME_BYTES_MAX) {
            return Err(bad(format!(
                "each directory name in workspace must be at most {NAME_BYTES_MAX} bytes"
            )));
        }
        if rel.as_os_str().is_empty() {
            return Err(bad(format!(
                "workspace must be a directory inside {}, not the root itself (it holds every session's workspace)",
                self.root.display()
            )));
        }
        Ok(rel)
    }

    /// A recorded workspace, relative to the root, if it is an absolute path strictly
    /// beneath the root without `..`.
    fn recorded_relative(&self, w: &str) -> Option<PathBuf> {
        let p = Path::new(w);
        if !p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
            return None;
        }
        let rel: PathBuf = p
            .strip_prefix(&self.root)
            .ok()?
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        (!rel.as_os_str().is_empty()).then_some(rel)
    }

    /// Creates `rel` beneath the root (0700 for what it creates) and returns its path.
    fn ensure(&self, rel: &Path) -> Result<PathBuf, WalkError> {
        self.walk(rel, true)?;
        Ok(self.root.join(rel))
    }

    /// Opens `rel` component by component from the root with `O_NOFOLLOW`, creating missing
    /// components when `create` ([`WorkspacePolicy::walk_making`]). Also returns how many
    /// leading components existed when the first one was made here (`None`: nothing made).
    fn walk(&self, rel: &Path, create: bool) -> Result<(OwnedFd, Option<usize>), WalkError> {
        let mut first_made = None;
        if create {
            let dir = self.walk_making(rel, &mut first_made)?;
            return Ok((dir, first_made));
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut dir = rustix::fs::open(&self.root, flags, Mode::empty())
            .map_err(|e| WalkError::Io(errno(e)))?;
        for c in rel.components() {
            let Component::Normal(name) = c else {
                return Err(WalkError::Symlink);
            };
            dir = open_component(&dir, name, flags)?;
        }
        Ok((dir, None))
    }

    /// [`WorkspacePolicy::walk`] creating what is missing; `first_made` is set to the depth
    /// of the first component made here, also when a later step fails.
    fn walk_making(
        &self,
        rel: &Path,
        first_made: &mut Option<usize>,
    ) -> Result<OwnedFd, WalkError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut dir = rustix::fs::open(&self.root, flags, Mode::empty())
            .map_err(|e| WalkError::Io(errno(e)))?;
        for (depth, c) in rel.components().enumerate() {
            let Component::Normal(name) = c else {
                return Err(WalkError::Symlink);
            };
            dir = match open_component(&dir, name, flags) {
                Err(WalkError::Missing) => {
                    match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o700)) {
                        Ok(()) => {
                            first_made.get_or_insert(depth);
                        }
                        Err(Errno::EXIST) => {}
                        Err(e) => return Err(WalkError::Io(errno(e))),
                    }
                    open_component(&dir, name, flags)?
                }
                other => other?,
            };
        }
        Ok(dir)
    }
}

fn open_component(dir: &OwnedFd, name: &OsStr, flags: OFlags) -> Result<OwnedFd, WalkError> {
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOENT) => Err(WalkError::Missing),
        // O_NOFOLLOW on a symlink gives ELOOP; O_DIRECTORY on something else ENOTDIR
        Err(Errno::LOOP) | Err(Errno::NOTDIR) => Err(WalkError::Symlink),
        Err(e) => Err(WalkError::Io(errno(e))),
    }
}

fn errno(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

#[derive(Debug)]
enum WalkError {
    Missing,
    Symlink,
    Io(std::io::Error),
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Missing => f.write_str("a component is missing"),
            WalkError::Symlink => f.write_str("a component is a symbolic link or not a directory"),
            WalkError::Io(e) => write!(f, "{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy() -> (tempfile::TempDir, WorkspacePolicy) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("workspaces");
        std::fs::create_dir(&root).unwrap();
        let p = WorkspacePolicy::new(root.canonicalize().unwrap());
        (d, p)
    }

    #[test]
    fn new_sessions_get_distinct_directories_inside_the_root() {
        let (_d, p) = policy();
        let root = p.root().to_path_buf();
        assert_eq!(p.for_new_session(None, "s1").unwrap().path, root.join("s1"));
        assert_eq!(
            p.for_new_session(Some("team/one"), "s2").unwrap().path,
            root.join("team/one")
        );
        assert!(root.join("team/one").is_dir());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(root.join("s1"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        let e = p.for_new_session(Some("team/one"), "s3").unwrap_err();
        assert_eq!(e.code, "workspace_in_use");
        for w in [
            ".",
            "./",
            "",
            "../x",
            "/etc",
            "a/../../b",
            &root.to_string_lossy(),
        ] {
            let e = p.for_new_session(Some(w), "s4").unwrap_err();
            assert_eq!(e.code, "bad_workspace", "{w}");
        }
    }

    #[test]
    fn undo_removes_only_what_was_made() {
        let (_d, p) = policy();
        let root = p.root().to_path_buf();
        std::fs::create_dir(root.join("team")).unwrap();
        let ws = p.for_new_session(Some("team/a/b"), "s1").unwrap();
        assert!(root.join("team/a/b").is_dir());
        p.undo(&ws);
        assert!(!root.join("team/a").exists(), "made here, removed");
        assert!(root.join("team").is_dir(), "existed before, kept");
        // the default workspace existed already (a session's leftover): kept
        std::fs::create_dir(root.join("s2")).unwrap();
        let ws = p.for_new_session(None, "s2").unwrap();
        p.undo(&ws);
        assert!(root.join("s2").is_dir());
        let ws = p.for_new_session(None, "s3").unwrap();
        p.undo(&ws);
        assert!(!root.join("s3").exists());
    }

    #[test]
    fn a_walk_that_fails_half_way_removes_what_it_made() {
        let (_d, p) = policy();
        let root = p.root().to_path_buf();
        let long = "n".repeat(NAME_BYTES_MAX + 1);
        // the request is refused before anything is made
        let e = p
            .for_new_session(Some(&format!("team/{long}")), "s1")
            .unwrap_err();
        assert_eq!(e.code, "bad_workspace", "{}", e.message);
        // and should a step fail after a directory was made, that directory goes
        let e = p
            .make_new(PathBuf::from(format!("team/a/{long}")))
            .unwrap_err();
        assert!(e.message.contains("ile name too long"), "{}", e.message);
        assert!(
            !root.join("team").exists(),
            "a half-made workspace was left"
        );
    }

    #[test]
    fn a_refused_workspace_creates_nothing_outside() {
        let (d, p) = policy();
        let outside = d.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, p.root().join("link")).unwrap();
        let e = p.for_new_session(Some("link/a/b"), "s1").unwrap_err();
        assert_eq!(e.code, "bad_workspace", "{}", e.message);
        assert!(
            std::fs::read_dir(&outside).unwrap().next().is_none(),
            "created directories outside the root"
        );
    }

    #[test]
    fn a_recorded_workspace_is_trusted_only_beneath_the_root() {
        let (d, p) = policy();
        let root = p.root().to_path_buf();
        let ws = |w: &str| p.for_existing_session(Some(&json!({ "workspace": w })), "imp");
        assert_eq!(ws("/"), root.join("imp"));
        assert_eq!(ws("."), root.join("imp"));
        assert_eq!(ws(&root.to_string_lossy()), root.join("imp"));
        assert_eq!(ws("/tmp"), root.join("imp"));
        assert_eq!(ws(&format!("{}/../x", root.display())), root.join("imp"));
        assert_eq!(ws(&root.join("kept").to_string_lossy()), root.join("kept"));
        let outside = d.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        assert_eq!(ws(&root.join("link/x").to_string_lossy()), root.join("imp"));
        assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
        assert_eq!(p.for_existing_session(None, "plain"), root.join("plain"));
    }
}
