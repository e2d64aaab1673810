//! The call's private directory: `$TMPDIR` and the `/dev/shm` the call sees, removed after
//! the call; directories of runners that died without removing theirs are swept.

use std::io;
use std::path::{Path, PathBuf};

/// `lazarus-shell-PID-RAND/` (mode 0700) in the system's temporary directory: the call's
/// `$TMPDIR`, also mounted on `/dev/shm` inside the sandbox (one directory: both are the
/// call's scratch space, and one costs half as much to make and remove). Removed when dropped.
#[derive(Debug)]
pub(crate) struct PrivateTmp {
    /// The directory itself.
    pub(crate) root: PathBuf,
    /// `$TMPDIR` of the call.
    pub(crate) path: PathBuf,
    /// What the call sees as `/dev/shm`.
    pub(crate) shm: PathBuf,
}

/// Removes the private directories of runners that are gone (killed with SIGKILL, say):
/// `lazarus-shell-PID-*` of this user whose PID no longer exists. A reused PID only delays the
/// removal.
pub(crate) fn sweep_stale_tmp(base: &Path) {
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
    pub(crate) fn create() -> io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        static BASE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        // canonical, so the directory is what Landlock rules and the connect gate compare
        let base = BASE
            .get_or_init(|| {
                let t = std::env::temp_dir();
                t.canonicalize().unwrap_or(t)
            })
            .clone();
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep_stale_tmp(&base));
        let named = |e: io::Error, p: &Path| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot create the shell call's temporary directory {}: {e}; check that {} is writable",
                    p.display(),
                    base.display()
                ),
            )
        };
        for _ in 0..16 {
            let root = base.join(format!(
                "lazarus-shell-{}-{:016x}",
                std::process::id(),
                rand::random::<u64>()
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&root) {
                Ok(()) => {
                    return Ok(PrivateTmp {
                        path: root.clone(),
                        shm: root.clone(),
                        root,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(named(e, &root)),
            }
        }
        Err(io::Error::other(format!(
            "cannot create a unique temporary directory in {} (16 names taken)",
            base.display()
        )))
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.root)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.root.display(), error = %e, "cannot remove a shell call's temporary directory");
        }
    }
}
