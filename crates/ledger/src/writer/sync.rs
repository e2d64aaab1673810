//! Syncing: group commit (appenders sharing one `fdatasync`, within the ledger's unsynced
//! bound), and what a failed `fdatasync` does: save the unsynced bytes aside, cut them, and
//! poison the writer, never retrying.

use std::sync::MutexGuard;
use std::sync::atomic::Ordering;

use crate::error::{LedgerError, Result};

use super::aside::save_aside;
use super::{State, SyncState, UNSYNCED_BYTES_MAX_DEFAULT, Writer};

impl Writer {
    /// Group commit keeps the unsynced bytes within the ledger's crash window: before a line
    /// that would overflow it is written, everything written so far is synced (so a line
    /// longer than the window is written alone). Called holding the state lock, so nobody
    /// writes meanwhile.
    pub(super) fn make_room(&self, st: &State, line_len: u64) -> Result<()> {
        let max = self
            .header
            .unsynced_bytes_max
            .unwrap_or(UNSYNCED_BYTES_MAX_DEFAULT as u64);
        let synced = self.sync_state().synced_len;
        let unsynced = st.len - synced;
        if unsynced == 0 || unsynced + line_len <= max {
            return Ok(());
        }
        self.wait_synced(st.len)
    }

    /// Group commit: wait until a sync covers `end`, leading one if none is running.
    pub(super) fn wait_synced(&self, end: u64) -> Result<()> {
        let mut s = self.sync_state();
        loop {
            self.check_poison()?;
            if s.synced_len >= end {
                return Ok(());
            }
            if !s.syncing {
                s.syncing = true;
                // What this sync covers: the bytes written before it starts. Read before the
                // sync, never after: bytes written while it runs are not covered.
                let target = self.written_len.load(Ordering::SeqCst);
                let durable = s.synced_len;
                drop(s);
                let r = self.file.sync_data();
                let failed = r.err().map(|e| self.fail_sync(durable, e));
                s = self.sync_state();
                s.syncing = false;
                if failed.is_none() {
                    s.synced_len = s.synced_len.max(target);
                }
                self.synced.notify_all();
                if let Some(e) = failed {
                    return Err(e);
                }
                continue;
            }
            s = self
                .synced
                .wait(s)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// After a failed `fdatasync`. Linux may have dropped the dirty pages: reads still show
    /// the bytes, and a retried fsync "succeeds" without ever writing them. So the writer never
    /// retries; it poisons itself, saves the bytes after `durable_len` (the last synced end)
    /// aside, and cuts the file back to it, so nobody reopening the session builds on records
    /// that are not on the disk. Needs no lock beyond the poison flag: appenders check it
    /// before writing.
    pub(super) fn fail_sync(&self, durable_len: u64, cause: std::io::Error) -> LedgerError {
        let mut note = format!("fdatasync failed: {cause}");
        self.poison(note.clone());
        match save_aside(&self.opts, &self.path, durable_len) {
            Ok(Some((p, n))) => {
                note.push_str(&format!("; {n} unsynced bytes saved to {}", p.display()))
            }
            Ok(None) => {}
            Err(e) => note.push_str(&format!("; the unsynced bytes could not be saved: {e}")),
        }
        match self
            .file
            .truncate(durable_len)
            .and_then(|()| self.file.sync_data())
        {
            Ok(()) => note.push_str("; the file was cut back to its last durable record"),
            Err(e) => note.push_str(&format!(
                "; the file could not be cut back to its last durable record ({e}): check the disk before reopening the session"
            )),
        }
        tracing::error!(path = %self.path.display(), cause = %note, "writer poisoned");
        *self.poison_cause.lock().unwrap_or_else(|p| p.into_inner()) = note;
        LedgerError::io("fdatasync", &self.path, cause)
    }

    pub(super) fn poison(&self, cause: String) {
        *self.poison_cause.lock().unwrap_or_else(|p| p.into_inner()) = cause;
        self.poisoned.store(true, Ordering::SeqCst);
    }

    pub(super) fn check_poison(&self) -> Result<()> {
        if self.poisoned.load(Ordering::SeqCst) {
            let cause = self
                .poison_cause
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            return Err(LedgerError::Poisoned {
                path: self.path.clone(),
                cause,
            });
        }
        Ok(())
    }

    /// True once an fsync (or undoing a failed write) failed; every later append fails.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    fn sync_state(&self) -> MutexGuard<'_, SyncState> {
        self.sync.lock().unwrap_or_else(|p| p.into_inner())
    }
}
