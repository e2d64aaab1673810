//! Durable, atomic replacement of a whole file: the one way Lazarus replaces a file's content.
//!
//! A temporary file is created *in the target's directory* (by directory descriptor, with
//! `O_CREAT|O_EXCL|O_NOFOLLOW` and a random name, so nothing planted at that name — a
//! symbolic link, a FIFO — is ever followed or opened), written, `fsync`ed, renamed over the
//! target with `renameat` (which replaces the directory entry and never writes through what
//! was there), and the directory is `fsync`ed. A crash leaves the old content or the new one,
//! never a mix; on error the temporary file is removed.
//!
//! [`replace_in_dir`] works on a directory descriptor the caller already resolved (safe
//! against a directory swapped for a symlink after the check); [`replace_file`] is the
//! by-path convenience.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// How [`replace_in_dir`] treats what is at the target name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplaceOptions {
    /// Permission bits of a new file (the umask applies). An existing file keeps its own.
    pub new_file_mode: u32,
    /// Refuse to replace a file that has other hard links (whose other names would silently
    /// keep the old content, and which may lie outside the directory the caller confined
    /// itself to).
    pub refuse_hard_links: bool,
    /// Refuse when the target name is a symbolic link (instead of replacing the link itself).
    pub refuse_symlinks: bool,
}

impl Default for ReplaceOptions {
    fn default() -> Self {
        ReplaceOptions {
            new_file_mode: 0o600,
            refuse_hard_links: false,
            refuse_symlinks: false,
        }
    }
}

fn errno(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Replaces the file `name` in the directory `dir` with `content`, atomically and durably.
/// `name` must be a single path component. Refuses (with `InvalidInput`) a target that is not
/// a regular file, and per `opts` hard-linked files and symbolic links.
pub fn replace_in_dir(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    content: &[u8],
    opts: &ReplaceOptions,
) -> io::Result<()> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(invalid(format!(
            "{name:?} is not a file name (one path component)"
        )));
    }
    let mut existing_mode = None;
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => {
            let ft = FileType::from_raw_mode(st.st_mode);
            if ft == FileType::Symlink {
                if opts.refuse_symlinks {
                    return Err(invalid(format!(
                        "{} is a symbolic link; write to the file it points to",
                        name.to_string_lossy()
                    )));
                }
            } else if ft != FileType::RegularFile {
                return Err(invalid(format!(
                    "{} is not a regular file",
                    name.to_string_lossy()
                )));
            } else {
                if opts.refuse_hard_links && st.st_nlink > 1 {
                    return Err(invalid(format!(
                        "{} has {} hard links; refusing to replace a file that has other names",
                        name.to_string_lossy(),
                        st.st_nlink
                    )));
                }
                existing_mode = Some(st.st_mode & 0o7777);
            }
        }
        Err(Errno::NOENT) => {}
        Err(e) => return Err(errno(e)),
    }
    let (tmp_name, file) = create_temp(dir, name, existing_mode.unwrap_or(opts.new_file_mode))?;
    let written = (|| -> io::Result<()> {
        let mut f = std::fs::File::from(file);
        f.write_all(content)?;
        if let Some(mode) = existing_mode {
            // the umask may have cut the existing file's mode at creation: restore it exactly
            rustix::fs::fchmod(&f, Mode::from_raw_mode(mode)).map_err(errno)?;
        }
        f.sync_all()?;
        rustix::fs::renameat(dir, &tmp_name, dir, name).map_err(errno)?;
        rustix::fs::fsync(dir).map_err(errno)
    })();
    if written.is_err() {
        let _ = rustix::fs::unlinkat(dir, &tmp_name, AtFlags::empty());
    }
    written
}

/// Creates a new temporary file next to `name` (`O_EXCL|O_NOFOLLOW`, random suffix).
fn create_temp(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<(OsString, OwnedFd)> {
    // keep the temporary name within NAME_MAX (255) whatever the target's length
    let stem: Vec<u8> = name.as_bytes().iter().copied().take(200).collect();
    for _ in 0..32 {
        let mut tmp = b".".to_vec();
        tmp.extend_from_slice(&stem);
        tmp.extend_from_slice(format!(".lazarus-tmp-{:016x}", random_u64()).as_bytes());
        let tmp = OsString::from_vec(tmp);
        match rustix::fs::openat(
            dir,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode & 0o777),
        ) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(errno(e)),
        }
    }
    Err(io::Error::other(
        "cannot find a free temporary file name after 32 tries",
    ))
}

/// An unpredictable-enough suffix. Unpredictability is not the defence (`O_EXCL|O_NOFOLLOW`
/// is); it only makes collisions with planted names rare.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u32(std::process::id());
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    h.finish()
}

/// [`replace_in_dir`] by path: opens `path`'s parent directory (which must exist) and
/// replaces the last component.
pub fn replace_file(path: &Path, content: &[u8], opts: &ReplaceOptions) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| invalid(format!("{} has no file name", path.display())))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = rustix::fs::open(
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)?;
    replace_in_dir(dir.as_fd(), name, content, opts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    #[test]
    fn replaces_content_and_keeps_mode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        replace_file(&p, b"one", &ReplaceOptions::default()).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        replace_file(&p, b"two", &ReplaceOptions::default()).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o640);
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "no temporary file left");
    }

    #[test]
    fn never_follows_a_link_planted_at_a_temporary_name() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        // the old scheme's predictable name, and a FIFO, planted in advance
        symlink(
            &victim,
            d.path()
                .join(format!(".f.lazarus-tmp-{}", std::process::id())),
        )
        .unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            d.path().join(".f.fifo"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        replace_file(&d.path().join("f"), b"new", &ReplaceOptions::default()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        assert_eq!(std::fs::read(d.path().join("f")).unwrap(), b"new");
        assert!(
            std::fs::symlink_metadata(d.path().join("f"))
                .unwrap()
                .is_file()
        );
    }

    #[test]
    fn refuses_what_it_must_not_replace() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("v"), "victim").unwrap();
        std::fs::hard_link(outside.path().join("v"), d.path().join("hl")).unwrap();
        symlink(outside.path().join("v"), d.path().join("sl")).unwrap();
        std::fs::create_dir(d.path().join("dir")).unwrap();
        let strict = ReplaceOptions {
            refuse_hard_links: true,
            refuse_symlinks: true,
            ..Default::default()
        };
        for (name, what) in [
            ("hl", "hard links"),
            ("sl", "symbolic link"),
            ("dir", "regular"),
        ] {
            let e = replace_file(&d.path().join(name), b"x", &strict).unwrap_err();
            assert!(e.to_string().contains(what), "{name}: {e}");
        }
        assert_eq!(
            std::fs::read_to_string(outside.path().join("v")).unwrap(),
            "victim"
        );
        // without the refusals a symlink is replaced as a name: the victim is untouched
        replace_file(&d.path().join("sl"), b"x", &ReplaceOptions::default()).unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.path().join("v")).unwrap(),
            "victim"
        );
        for bad in ["", ".", "..", "a/b"] {
            assert!(
                replace_in_dir(
                    rustix::fs::CWD,
                    OsStr::new(bad),
                    b"x",
                    &ReplaceOptions::default()
                )
                .is_err()
            );
        }
    }
}
