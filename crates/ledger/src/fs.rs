//! The file operations the writer performs, behind a trait so tests can put a simulated disk
//! (one that forgets unsynced bytes at a "power cut", tears sectors, fails an fsync) under the
//! real writer code.
//!
//! Every open of an existing file refuses anything but a regular file reached without
//! following a symlink in its last component (`O_NOFOLLOW`), and opens it `O_NONBLOCK` first,
//! so a FIFO or a device planted under a session's name can neither hang nor flood a reader.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

/// An open session file, opened for appending.
pub trait LedgerFile: Send + Sync {
    /// Appends all of `buf` at the end of the file.
    fn append(&self, buf: &[u8]) -> io::Result<()>;
    /// `fdatasync`: everything appended so far survives a power cut once this returns.
    fn sync_data(&self) -> io::Result<()>;
    /// Cuts the file to `len` bytes.
    fn truncate(&self, len: u64) -> io::Result<()>;
}

/// The file system operations the ledger needs.
pub trait Fs: Send + Sync {
    /// Creates `path`, failing if it exists (`O_CREAT|O_EXCL`), opened for appending.
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn LedgerFile>>;
    /// Opens an existing regular file for appending.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn LedgerFile>>;
    /// Opens an existing regular file for reading.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>>;
    /// Reads up to `len` bytes at `offset` (fewer at the end of the file).
    fn read_at(&self, path: &Path, offset: u64, len: u64) -> io::Result<Vec<u8>>;
    /// `fsync` on a directory, so that names created, renamed or removed in it survive a
    /// power cut.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Writes a whole new file durably: data and name (used to set bytes aside before they
    /// are cut from a ledger).
    fn write_new_durable(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// Renames `from` to `to`; with `replace == false`, fails with `AlreadyExists` if `to`
    /// exists (atomically: no window in which another file could be overwritten).
    fn rename(&self, from: &Path, to: &Path, replace: bool) -> io::Result<()>;
    /// Removes a name.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Copies `from[offset..]` into the new file `to`, durably (data and name), streaming;
    /// returns the bytes copied.
    fn save_range(&self, from: &Path, offset: u64, to: &Path) -> io::Result<u64>;
    /// Makes directory `path` (mode 0700). An existing *directory* is `AlreadyExists`;
    /// anything else at the name (a file, a symlink) is `InvalidInput`, never followed. The
    /// new name is durable once its parent is synced.
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// The names in directory `path` (not `.` and `..`), in no particular order.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Removes an empty directory (`DirectoryNotEmpty` otherwise).
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    /// The size of the file at `path` (not following a symlink).
    fn file_len(&self, path: &Path) -> io::Result<u64>;
    /// Holds an exclusive lock on directory `path` until the returned value is dropped, to
    /// serialise the processes that change it (e.g. deliveries checking a limit). `None`
    /// where locks mean nothing (the simulated disk: one process).
    fn lock_dir(&self, path: &Path) -> io::Result<Option<File>>;
    /// A handle whose [`FsSyncer::sync`] is `syncfs(2)` of the file system holding `dir`
    /// (see [`crate::shared_sync`]).
    fn open_syncer(&self, dir: &Path) -> io::Result<Box<dyn FsSyncer>>;
    /// Why [`Fs::sync_fs`] cannot be trusted here, if it cannot.
    fn sync_fs_unsupported(&self) -> Option<String>;
}

/// `syncfs` through one descriptor: every file written before [`FsSyncer::sync`] began is
/// durable when it returns `Ok`; a writeback error anywhere on the file system since the
/// descriptor's last call is reported.
pub trait FsSyncer: Send {
    fn sync(&self) -> io::Result<()>;
}

struct RealSyncer(File);

impl FsSyncer for RealSyncer {
    fn sync(&self) -> io::Result<()> {
        rustix::fs::syncfs(&self.0).map_err(io::Error::from)
    }
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

struct RealFile(File);

impl LedgerFile for RealFile {
    fn append(&self, buf: &[u8]) -> io::Result<()> {
        (&self.0).write_all(buf)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
}

/// Mode of every file the ledger creates: the owner's only (sessions hold user text).
pub const FILE_MODE: u32 = 0o600;

/// The error for a name that is not a regular file (FIFO, device, directory, socket, or a
/// symlink in the last component). Recognise it with [`is_not_regular`].
#[derive(Debug)]
pub struct NotRegularFile(pub &'static str);

impl std::fmt::Display for NotRegularFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a regular file ({})", self.0)
    }
}

impl std::error::Error for NotRegularFile {}

/// True when `e` says the name was not a regular file.
pub fn is_not_regular(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<NotRegularFile>())
}

fn not_regular(what: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, NotRegularFile(what))
}

/// Opens an existing file without following a symlink in its last component and without
/// blocking (a FIFO), and checks that it is a regular file.
pub fn open_regular(path: &Path, write: bool, append: bool) -> io::Result<File> {
    open_regular_meta(path, write, append).map(|(f, _)| f)
}

/// [`open_regular`], also returning the file's metadata (read once, for the check).
pub fn open_regular_meta(
    path: &Path,
    write: bool,
    append: bool,
) -> io::Result<(File, std::fs::Metadata)> {
    let f = OpenOptions::new()
        .read(!write)
        .write(write && !append)
        .append(append)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                not_regular("a symbolic link")
            } else {
                e
            }
        })?;
    // O_NONBLOCK stays set: it means nothing for a regular file, which is all this returns.
    let meta = check_regular(&f)?;
    Ok((f, meta))
}

/// Fails unless `f` is a regular file.
pub fn check_regular(f: &File) -> io::Result<std::fs::Metadata> {
    let meta = f.metadata()?;
    let ft = meta.file_type();
    if ft.is_file() {
        return Ok(meta);
    }
    use std::os::unix::fs::FileTypeExt;
    Err(not_regular(if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a plain file"
    }))
}

/// Creates a new file (`O_EXCL`, never through a symlink), mode [`FILE_MODE`].
pub fn create_exclusive(path: &Path, append: bool) -> io::Result<File> {
    OpenOptions::new()
        .write(!append)
        .append(append)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

/// Opens a file for writing, creating it (mode [`FILE_MODE`]) if missing: never through a
/// symlink in the last component, never blocking, regular files only; `append` opens in
/// append mode, else without truncating. For files a process keeps for itself (a lock, a
/// state or decision log).
pub fn open_private(path: &Path, append: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true)
        .create(true)
        .mode(FILE_MODE)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32);
    if append {
        o.append(true);
    } else {
        o.write(true).truncate(false);
    }
    let f = o.open(path).map_err(|e| {
        if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            not_regular("a symbolic link")
        } else {
            e
        }
    })?;
    check_regular(&f)?;
    Ok(f)
}

/// `fsync` of a directory (the directory itself may be reached through a symlink: it is the
/// operator's choice of place, unlike the names inside it).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    let d = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::DIRECTORY.bits() as i32)
        .open(dir)?;
    d.sync_all()
}

/// The directory holding `path` (`.` for a bare name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

impl Fs for RealFs {
    fn open_syncer(&self, dir: &Path) -> io::Result<Box<dyn FsSyncer>> {
        let d = OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::DIRECTORY.bits() as i32)
            .open(dir)?;
        Ok(Box::new(RealSyncer(d)))
    }
    fn sync_fs_unsupported(&self) -> Option<String> {
        kernel_syncfs_unsupported()
    }
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn LedgerFile>> {
        Ok(Box::new(RealFile(create_exclusive(path, true)?)))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn LedgerFile>> {
        Ok(Box::new(RealFile(open_regular(path, true, true)?)))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(open_regular(path, false, false)?))
    }
    fn read_at(&self, path: &Path, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let f = open_regular(path, false, false)?;
        let size = f.metadata()?.len();
        let n = len.min(size.saturating_sub(offset));
        let mut buf = vec![0u8; usize::try_from(n).map_err(io::Error::other)?];
        let mut done = 0;
        while done < buf.len() {
            match f.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(k) => done += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(done);
        Ok(buf)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        sync_dir(dir)
    }
    fn write_new_durable(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut f = create_exclusive(path, false)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        sync_dir(parent_dir(path))
    }
    fn rename(&self, from: &Path, to: &Path, replace: bool) -> io::Result<()> {
        if replace {
            return std::fs::rename(from, to);
        }
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(()),
            // File systems without RENAME_NOREPLACE: link(2) refuses an existing name too.
            Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
                std::fs::hard_link(from, to)?;
                std::fs::remove_file(from)
            }
            Err(e) => Err(e.into()),
        }
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new().mode(0o700).create(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if std::fs::symlink_metadata(path)?.is_dir() {
                    Err(e)
                } else {
                    Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "{} is not a directory (a symlink or a file?); it is not Lazarus': move it away",
                            path.display()
                        ),
                    ))
                }
            }
            Err(e) => Err(e),
        }
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path)? {
            if let Some(name) = entry?.file_name().to_str() {
                out.push(name.to_string());
            }
        }
        Ok(out)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }
    fn file_len(&self, path: &Path) -> io::Result<u64> {
        Ok(std::fs::symlink_metadata(path)?.len())
    }
    fn lock_dir(&self, path: &Path) -> io::Result<Option<File>> {
        let d = OpenOptions::new()
            .read(true)
            .custom_flags(
                (rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::NOFOLLOW).bits() as i32,
            )
            .open(path)?;
        rustix::fs::flock(&d, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(Some(d))
    }
    fn save_range(&self, from: &Path, offset: u64, to: &Path) -> io::Result<u64> {
        use std::io::{Seek, SeekFrom};
        let mut src = open_regular(from, false, false)?;
        src.seek(SeekFrom::Start(offset))?;
        let mut dst = create_exclusive(to, false)?;
        let n = io::copy(&mut src, &mut dst)?;
        dst.sync_all()?;
        sync_dir(parent_dir(to))?;
        Ok(n)
    }
}

/// A shared handle to a file system implementation.
pub type SharedFs = Arc<dyn Fs>;

/// The real file system as a shared handle.
pub fn real() -> SharedFs {
    Arc::new(RealFs)
}

/// Why `syncfs` cannot be trusted on this kernel, if it cannot (it reports writeback errors
/// since Linux 5.8).
fn kernel_syncfs_unsupported() -> Option<String> {
    if !cfg!(target_os = "linux") {
        return Some("syncfs is Linux only".into());
    }
    let uname = rustix::system::uname();
    let release = uname.release().to_string_lossy().into_owned();
    if release_reports_syncfs_errors(&release) {
        return None;
    }
    Some(format!(
        "Linux {release} does not report writeback errors from syncfs (5.8 and later do)"
    ))
}

/// Whether a Linux release string (`uname -r`) is 5.8 or later; an unreadable one is not.
fn release_reports_syncfs_errors(release: &str) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (5, 8),
        _ => false,
    }
}

#[cfg(test)]
mod syncfs_kernel_tests {
    use super::release_reports_syncfs_errors as ok;

    #[test]
    fn syncfs_is_trusted_from_linux_5_8() {
        assert!(ok("5.8.0"));
        assert!(ok("5.10.0-28-amd64"));
        assert!(ok("6.18.44-fc-v1300"));
        assert!(ok("10.0"));
        assert!(!ok("5.7.19"));
        assert!(!ok("4.19.0-25-amd64"));
        assert!(!ok(""));
        assert!(!ok("linux"));
        assert!(!ok("6"));
    }
}
