//! The file operations the writer performs, behind a trait so tests can put a simulated disk
//! (one that forgets unsynced bytes at a "power cut") under the real writer code.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
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
    /// Opens an existing file for appending.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn LedgerFile>>;
    /// Opens a file for reading.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>>;
    /// `fsync` on a directory, so that new names in it survive a power cut.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Writes a whole new file durably (used to set removed bytes aside before a repair).
    fn write_new_durable(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
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

const MODE: u32 = 0o600;

impl Fs for RealFs {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn LedgerFile>> {
        let f = OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(MODE)
            .open(path)?;
        Ok(Box::new(RealFile(f)))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn LedgerFile>> {
        let f = OpenOptions::new().append(true).open(path)?;
        Ok(Box::new(RealFile(f)))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(File::open(path)?))
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn write_new_durable(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(MODE)
            .open(path)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        if let Some(dir) = path.parent() {
            self.sync_dir(dir)?;
        }
        Ok(())
    }
}

/// A shared handle to a file system implementation.
pub type SharedFs = Arc<dyn Fs>;

/// The real file system as a shared handle.
pub fn real() -> SharedFs {
    Arc::new(RealFs)
}
