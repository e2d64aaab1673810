//! Confining paths to the workspace.

use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("the workspace {0} cannot be resolved: {1}")]
    Workspace(PathBuf, #[source] io::Error),
    #[error("path {0:?} is outside the workspace; use a path relative to the workspace")]
    Outside(String),
    #[error("path {0:?} leaves the workspace through a symbolic link")]
    SymlinkEscape(String),
    #[error("path {0:?} is a dangling symbolic link")]
    Dangling(String),
    #[error("path is empty")]
    Empty,
    #[error("cannot resolve path {0:?}: {1}")]
    Io(String, #[source] io::Error),
}

/// Resolves `path` (relative to the workspace, or absolute inside it) to an absolute path
/// whose existing part has all symlinks resolved and lies inside the canonical workspace.
/// Refuses `..` that climbs out, absolute paths elsewhere, symlinks pointing out and dangling
/// symlinks (writing through one would create a file wherever it points).
pub fn resolve_in_workspace(workspace: &Path, path: &str) -> Result<PathBuf, PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.contains('\0') {
        return Err(PathError::Outside(path.to_string()));
    }
    let root = workspace
        .canonicalize()
        .map_err(|e| PathError::Workspace(workspace.to_path_buf(), e))?;
    let p = Path::new(path);
    let rel: PathBuf = if p.is_absolute() {
        if let Ok(r) = p.strip_prefix(&root) {
            r.to_path_buf()
        } else if let Ok(r) = p.strip_prefix(workspace) {
            r.to_path_buf()
        } else {
            return Err(PathError::Outside(path.to_string()));
        }
    } else {
        p.to_path_buf()
    };
    // Lexical normalisation: `..` may not climb above the workspace root.
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
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
    let mut full = root.clone();
    full.extend(&parts);
    // Find the deepest existing ancestor (not following a final symlink), canonicalise it.
    let mut existing = full.clone();
    let mut missing: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match std::fs::symlink_metadata(&existing) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let Some(name) = existing.file_name().map(|n| n.to_os_string()) else {
                    return Err(PathError::Io(path.to_string(), e));
                };
                missing.push(name);
                if !existing.pop() {
                    return Err(PathError::Io(path.to_string(), e));
                }
            }
            Err(e) => return Err(PathError::Io(path.to_string(), e)),
        }
    }
    let canon = match existing.canonicalize() {
        Ok(c) => c,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(PathError::Dangling(path.to_string()));
        }
        Err(e) => return Err(PathError::Io(path.to_string(), e)),
    };
    if !canon.starts_with(&root) {
        return Err(PathError::SymlinkEscape(path.to_string()));
    }
    let mut out = canon;
    for name in missing.into_iter().rev() {
        out.push(name);
    }
    Ok(out)
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
        symlink(outside.path(), ws.path().join("out")).unwrap();
        symlink(ws.path().join("sub"), ws.path().join("in")).unwrap();
        symlink("/nonexistent/x", ws.path().join("dangling")).unwrap();

        let ok = |p: &str| resolve_in_workspace(ws.path(), p).unwrap();
        assert_eq!(ok("a.txt"), root.join("a.txt"));
        assert_eq!(ok("./sub/../b/c.txt"), root.join("b/c.txt"));
        assert_eq!(ok("in/x"), root.join("sub/x"));
        assert_eq!(ok(&root.join("sub").to_string_lossy()), root.join("sub"));
        assert_eq!(ok("."), root);

        let err = |p: &str| resolve_in_workspace(ws.path(), p).unwrap_err();
        assert!(matches!(err("../x"), PathError::Outside(_)));
        assert!(matches!(err("sub/../../x"), PathError::Outside(_)));
        assert!(matches!(err("/etc/passwd"), PathError::Outside(_)));
        assert!(matches!(err("out/x"), PathError::SymlinkEscape(_)));
        assert!(matches!(err("out"), PathError::SymlinkEscape(_)));
        assert!(matches!(err("dangling"), PathError::Dangling(_)));
        assert!(matches!(err(""), PathError::Empty));
    }
}
