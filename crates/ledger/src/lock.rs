//! The single-writer lock: an exclusive `flock` on `<id>.lock` beside the session file.
//!
//! The kernel releases a `flock` when the holding process dies, however it dies, so there is
//! never a stale lock to clean up by hand. After taking the lock the holder writes who it is
//! (pid, host, since, start time) into the lock file; that text is only for messages — the
//! `flock` itself is the truth. A clean release empties the text first, so text found by the
//! next holder names a process that died holding the lock ([`WriterLock::previous`]).
//! Readers never take the lock.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{LedgerError, Result};
pub use crate::holder::{Holder, hostname};
use rustix::fs::{FlockOperation, flock};

/// A held writer lock. Dropping it (or the process dying) releases it.
#[derive(Debug)]
pub struct WriterLock {
    file: File,
    path: PathBuf,
    previous: Option<Holder>,
}

/// How long a writer waits for a lock someone holds before it gives up with
/// [`LedgerError::Locked`].
pub const LOCK_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(50);

impl WriterLock {
    /// Takes the exclusive lock at `lock_path`, waiting at most [`LOCK_WAIT_MAX`]: a lister
    /// that checks the lock ([`held_by`]) holds it for microseconds, a writer for its life.
    pub fn acquire(lock_path: &Path, session_path: &Path) -> Result<Self> {
        let started = std::time::Instant::now();
        let mut file = loop {
            let file = Self::lock_file(lock_path, session_path, started)?;
            // The file may have been removed (a creation that failed cleans up after itself) or
            // replaced while we waited for it: a lock on a file no longer at the path guards
            // nothing, so open the path afresh.
            if is_at(&file, lock_path) {
                break file;
            }
            if started.elapsed() >= LOCK_WAIT_MAX {
                return Err(LedgerError::Locked {
                    path: session_path.to_path_buf(),
                    holder: None,
                });
            }
        };
        // Text left in the file names a holder that never released cleanly: it died.
        let previous = read_holder_from(&mut file).filter(|h| h.pid != std::process::id());
        let me = serde_json::to_vec(&Holder::current()).unwrap_or_default();
        // Best effort: the holder text is informational only.
        let _ = file.set_len(0);
        let _ = file.seek(SeekFrom::Start(0));
        let _ = file.write_all(&me);
        Ok(WriterLock {
            file,
            path: lock_path.to_path_buf(),
            previous,
        })
    }

    /// The process that held this lock before and died holding it (its text was still in
    /// the lock file), if any.
    pub fn previous(&self) -> Option<&Holder> {
        self.previous.as_ref()
    }

    /// Opens the lock file at `lock_path` and takes its `flock`, waiting until `started` +
    /// [`LOCK_WAIT_MAX`].
    fn lock_file(
        lock_path: &Path,
        session_path: &Path,
        started: std::time::Instant,
    ) -> Result<File> {
        // never through a symlink: one planted there would have the holder text written into
        // its target
        let mut file = crate::fs::open_private(lock_path, false)
            .map_err(|e| LedgerError::open_failed(lock_path, e))?;
        loop {
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(file),
                Err(e) if e == rustix::io::Errno::WOULDBLOCK || e == rustix::io::Errno::AGAIN => {
                    if started.elapsed() < LOCK_WAIT_MAX {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                        continue;
                    }
                    return Err(LedgerError::Locked {
                        path: session_path.to_path_buf(),
                        holder: read_holder_from(&mut file),
                    });
                }
                Err(e) => {
                    return Err(LedgerError::io("flock", lock_path, e.into()));
                }
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the lock file while still holding it, then releases it: for a creation that
    /// failed, so that nothing is left behind. Whoever waited on this file sees, once it has
    /// it, that it is no longer at the path, and opens the path afresh.
    pub(crate) fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether `file` is the file at `path` now (same device and inode; a symlink never is).
fn is_at(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // a clean release: no text is left to name this process as one that died holding it
        let _ = self.file.set_len(0);
        let _ = flock(&self.file, FlockOperation::Unlock);
    }
}

fn read_holder_from(file: &mut File) -> Option<Holder> {
    let mut buf = Vec::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(4096).read_to_end(&mut buf).ok()?;
    serde_json::from_slice(&buf).ok()
}

/// Reads who last took the lock at `lock_path`, without locking. `None` when unknown (or
/// when the name is not a regular file).
pub fn read_holder(lock_path: &Path) -> Option<Holder> {
    let mut f = crate::fs::open_regular(lock_path, false, false).ok()?;
    read_holder_from(&mut f)
}

/// Whether some process holds the writer lock at `lock_path` right now, and if so who (as
/// far as the lock file says): one open, one non-blocking shared `flock` (released at once).
/// `None`: nobody holds it (or there is no lock file).
pub fn held_by(lock_path: &Path) -> Option<Option<Holder>> {
    let mut f = crate::fs::open_regular(lock_path, false, false).ok()?;
    match flock(&f, FlockOperation::NonBlockingLockShared) {
        Ok(()) => {
            let _ = flock(&f, FlockOperation::Unlock);
            None
        }
        Err(_) => Some(read_holder_from(&mut f)),
    }
}

/// True when some process holds the writer lock at `lock_path` right now.
///
/// Asks the kernel (a non-blocking shared `flock` that is released at once); this never makes
/// a writer fail, because writers only ever try to lock once, at open, and a writer that
/// loses that race gets the usual "in use" error and may retry.
pub fn is_locked(lock_path: &Path) -> bool {
    let Ok(f) = crate::fs::open_regular(lock_path, false, false) else {
        return false;
    };
    match flock(&f, FlockOperation::NonBlockingLockShared) {
        Ok(()) => {
            let _ = flock(&f, FlockOperation::Unlock);
            false
        }
        Err(_) => true,
    }
}

/// The inode numbers of every file some process holds a `flock` on right now, system-wide,
/// from `/proc/locks` (`None` where it cannot be read: not Linux, or `/proc` hidden). A
/// listing asks [`held_by`] only about lock files whose inode is here, instead of opening
/// every one: a lock file whose inode is absent is not held (as of this read). Devices are
/// not compared (a stat's device and the kernel's lock device differ on some file systems):
/// the same inode number on another device costs one [`held_by`] more, never a wrong answer.
/// A lock held by a process in another PID namespace is listed too (with pid 0).
pub fn flocked_inodes() -> Option<std::collections::HashSet<u64>> {
    const PROC_LOCKS_BYTES_MAX: u64 = 64 * 1024 * 1024;
    let f = File::open("/proc/locks").ok()?;
    let mut text = String::new();
    f.take(PROC_LOCKS_BYTES_MAX)
        .read_to_string(&mut text)
        .ok()?;
    Some(parse_proc_locks(&text))
}

/// The inodes of the `FLOCK` lines of `/proc/locks` text: `1: FLOCK ADVISORY WRITE 1234
/// fd:01:123456 0 EOF` (a waiter's line has `->` after the number). Lines it cannot read are
/// skipped.
pub fn parse_proc_locks(text: &str) -> std::collections::HashSet<u64> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace().skip(1);
            let mut kind = words.next()?;
            if kind == "->" {
                kind = words.next()?;
            }
            if kind != "FLOCK" {
                return None;
            }
            // ADVISORY, READ/WRITE, pid, then major:minor:inode
            let dev_ino = words.nth(3)?;
            dev_ino.rsplit(':').next()?.parse().ok()
        })
        .collect()
}

#[cfg(test)]
mod proc_locks_tests {
    use super::*;

    #[test]
    fn flock_lines_give_their_inodes_and_others_are_skipped() {
        let text = "1: POSIX  ADVISORY  WRITE 3568 fd:00:2531452 0 EOF\n\
                    2: FLOCK  ADVISORY  WRITE 3517 fd:00:2531448 0 EOF\n\
                    2: -> FLOCK  ADVISORY  WRITE 3519 fd:00:2531448 0 EOF\n\
                    3: FLOCK  ADVISORY  READ  0 00:2f:32388 0 EOF\n\
                    4: OFDLCK ADVISORY  READ  -1 08:01:7864448 128 128\n\
                    5: LEASE  ACTIVE    READ  1 08:01:99 0 EOF\n\
                    garbage\n\
                    6: FLOCK ADVISORY WRITE 1 fd:00:notanumber 0 EOF\n";
        let got = parse_proc_locks(text);
        assert_eq!(got, [2531448u64, 32388].into_iter().collect());
    }

    #[test]
    fn a_lock_this_process_holds_is_listed_and_a_released_one_is_not() {
        assert!(
            flocked_inodes().is_some(),
            "/proc/locks cannot be read here: the listing's fast path is untested"
        );
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("s.lock");
        let held = WriterLock::acquire(&lock, &dir.path().join("s.jsonl")).unwrap();
        use std::os::unix::fs::MetadataExt;
        let ino = std::fs::metadata(&lock).unwrap().ino();
        assert!(flocked_inodes().unwrap().contains(&ino));
        drop(held);
        assert!(!flocked_inodes().unwrap().contains(&ino));
    }
}
