//! Syncing: group commit (appenders sharing one `fdatasync`, within the ledger's unsynced
//! bound), and what a failed `fdatasync` does: save the unsynced bytes aside, cut them, and
//! poison the writer, never retrying.

use std::sync::MutexGuard;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rustix::thread::futex;

use crate::error::{LedgerError, Result};

use super::aside::save_aside;
use super::{State, SyncState, UNSYNCED_BYTES_MAX_DEFAULT, Writer, write_in_pieces};

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
        let synced = self.synced_len.load(Ordering::SeqCst);
        let unsynced = st.len - synced;
        if unsynced == 0 || unsynced + line_len <= max {
            return Ok(());
        }
        self.wait_synced(st.len)
    }

    /// Group commit: wait until a sync covers `end`, leading one if none is running. The
    /// leader writes the pending batch in one `write`, then `fdatasync`s everything written.
    ///
    /// Waiters sleep on a futex word bumped after each sync, not on a condition variable:
    /// woken, each reads the synced length without taking a lock, so the appenders a sync
    /// lets go return side by side instead of one after another through a mutex (with 64
    /// appenders, that convoy took longer than the `fdatasync` itself).
    pub(super) fn wait_synced(&self, end: u64) -> Result<()> {
        // Durable first: a line a sync covered is acknowledged even if a later batch failed
        // meanwhile (its caller must not retry it and write it twice). A sync publishes what
        // it covered before anyone can lead the next one, so an error met after that sync
        // (the next leader's poison, or our own lead refused by it) is looked at again here.
        let durable = |e| {
            if self.synced_len.load(Ordering::SeqCst) >= end {
                Ok(())
            } else {
                Err(e)
            }
        };
        loop {
            let generation = self.sync_generation.load(Ordering::SeqCst);
            if self.synced_len.load(Ordering::SeqCst) >= end {
                return Ok(());
            }
            if let Err(e) = self.check_poison() {
                return durable(e);
            }
            if self
                .syncing
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                if let Err(e) = self.lead_sync() {
                    return durable(e);
                }
                continue;
            }
            // Returns at once if a sync ended since `generation` was read (EAGAIN), and on
            // a signal (EINTR): either way the loop looks again.
            let _ = futex::wait(
                &self.sync_generation,
                futex::Flags::PRIVATE,
                generation,
                None,
            );
        }
    }

    /// One group commit, by the appender that won `syncing`: gather the pending lines, write
    /// them, `fdatasync`, publish the synced length, wake every waiter.
    fn lead_sync(&self) -> Result<()> {
        let mut guard = self.sync_state();
        let s = &mut *guard;
        let durable = self.synced_len.load(Ordering::SeqCst);
        // Poisoned by the leader before this one (which held the sync state): an appender may
        // have won `syncing` after checking the poison and before it was set. What is pending
        // now comes after a batch that was cut back: written, it would follow a gap.
        let r = self.check_poison().and_then(|()| {
            let lines = self.gather(s.last_lines, s.last_sync, &mut s.spare);
            let sync_started = Instant::now();
            let written = self.write_batch(&mut s.written_len, &s.spare);
            s.spare.clear();
            // What this sync covers: the bytes written before it starts, never those
            // written while it runs.
            let target = written.and_then(|target| match self.file.sync_data() {
                Ok(()) => Ok(target),
                Err(e) => Err(self.fail_sync(durable, e)),
            })?;
            s.last_lines = lines;
            s.last_sync = sync_started.elapsed();
            Ok(target)
        });
        if let Ok(target) = r {
            self.synced_len.fetch_max(target, Ordering::SeqCst);
        }
        drop(guard);
        self.syncing.store(false, Ordering::SeqCst);
        self.sync_generation.fetch_add(1, Ordering::SeqCst);
        // The count is an `int` to the kernel: `u32::MAX` would read as -1 and wake only one.
        let _ = futex::wake(
            &self.sync_generation,
            futex::Flags::PRIVATE,
            i32::MAX as u32,
        );
        r.map(drop)
    }

    /// Takes the pending lines into `batch` (returns how many). The appenders the last sync
    /// let go are on their way back with their next lines: so that this sync takes them
    /// rather than one line alone (and the next sync the rest), the leader first waits until
    /// as many lines as that sync had are queued, or as long as that sync took, whichever
    /// comes first. A lone appender (last batch: one line) never waits.
    fn gather(&self, want: usize, window: std::time::Duration, batch: &mut Vec<u8>) -> usize {
        let started = Instant::now();
        loop {
            let mut pending = self.lock_pending();
            if pending.lines >= want || started.elapsed() >= window {
                std::mem::swap(&mut pending.bytes, batch);
                return std::mem::take(&mut pending.lines);
            }
            drop(pending);
            std::thread::yield_now();
        }
    }

    /// Writes a group-commit batch at `written_len` (the end of what is written) and moves
    /// it on; returns the new end. A failed write is cut back and poisons the writer: the
    /// batch's seqs, and those of the lines queued after it, were already handed out, so
    /// nothing after it can be written.
    fn write_batch(&self, written_len: &mut u64, batch: &[u8]) -> Result<u64> {
        let start = *written_len;
        if batch.is_empty() {
            return Ok(start);
        }
        if let Err(e) = write_in_pieces(&*self.file, batch, &self.opts, &self.path) {
            let undone = match self.file.truncate(start) {
                Ok(()) => "cut back".to_string(),
                Err(t) => format!("could not be cut back ({t}): check the disk before reopening"),
            };
            self.poison(format!(
                "a group-commit write failed ({e}); its partial batch {undone}; none of it was acknowledged"
            ));
            return Err(e);
        }
        *written_len = start + batch.len() as u64;
        Ok(*written_len)
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

    /// True once an fsync failed, or a group-commit write, or undoing a failed write; every
    /// later append fails.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    fn sync_state(&self) -> MutexGuard<'_, SyncState> {
        self.sync.lock().unwrap_or_else(|p| p.into_inner())
    }
}
