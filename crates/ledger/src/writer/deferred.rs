//! Deferred appends: a per-record append whose durability an async caller awaits, so that a
//! server does not park a thread per request while a shared `syncfs` runs
//! ([`crate::shared_sync`]).
//!
//! **One at a time per ledger.** A deferred append closes the writer's *gate* until it is
//! durable: every later append (deferred or not) waits for it, exactly as a per-record append
//! holds the writer until its own sync returned. Without that, a later append could be
//! acknowledged and then cut away with an earlier one whose sync failed.
//!
//! **A failed batch** is settled by the file's own `fdatasync` (which reports an error of this
//! file once). When that fails too, the gate stays marked: the next use of the writer poisons
//! it, saves the unsynced bytes aside and cuts them, as after any failed sync
//! ([`Writer::fail_sync`]); the waiting caller gets the error at once.
//!
//! **Dropped before durable** (a cancelled request): the drop waits for the batch itself, so
//! the gate is always opened.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll};

use super::{Appended, Writer};
use crate::error::{LedgerError, Result};
use crate::fs::LedgerFile;
use crate::shared_sync::{SharedSync, SyncWait, Ticket};

/// Closed while a deferred append is not yet durable.
#[derive(Default)]
pub(super) struct Gate {
    state: Mutex<GateState>,
    opened: Condvar,
}

#[derive(Default)]
struct GateState {
    in_flight: bool,
    /// A deferred append's own `fdatasync` failed: (the durable length before it, why).
    failed: Option<(u64, String)>,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn close(&self) {
        self.lock().in_flight = true;
    }

    fn open(&self, failed: Option<(u64, String)>) {
        let mut g = self.lock();
        g.in_flight = false;
        if failed.is_some() {
            g.failed = failed;
        }
        drop(g);
        self.opened.notify_all();
    }

    fn is_closed(&self) -> bool {
        self.lock().in_flight
    }

    fn is_open_and_clean(&self) -> bool {
        let g = self.lock();
        !g.in_flight && g.failed.is_none()
    }

    /// [`Gate::pass`] waiting at most `limit` (a writer dropped while its last deferred append
    /// is settled on the same thread must not wait for itself).
    fn pass_within(&self, limit: std::time::Duration) -> Option<(u64, String)> {
        let g = self.lock();
        let (mut g, _) = self
            .opened
            .wait_timeout_while(g, limit, |g| g.in_flight)
            .unwrap_or_else(|p| p.into_inner());
        g.failed.take()
    }

    /// Waits for the gate; a failure found there is taken (to be acted on by the caller).
    fn pass(&self) -> Option<(u64, String)> {
        let mut g = self.lock();
        while g.in_flight {
            g = self.opened.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        g.failed.take()
    }
}

/// An append written but not yet durable: await it (or drop it) before acknowledging.
#[must_use = "an append is acknowledged only once durable: await it"]
pub struct Deferred {
    appended: Appended,
    wait: Option<SyncWait>,
    shared: SharedSync,
    ticket: Ticket,
    file: Arc<dyn LedgerFile>,
    gate: Arc<Gate>,
    path: std::path::PathBuf,
    /// Run once the bytes are durable, before the gate opens (e.g. showing the record to live
    /// readers, in order).
    on_durable: Option<Box<dyn FnOnce() + Send>>,
    settled: bool,
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deferred")
            .field("appended", &self.appended)
            .finish_non_exhaustive()
    }
}

impl Deferred {
    /// Where the record landed (not durable until this future is done).
    pub fn appended(&self) -> &Appended {
        &self.appended
    }

    /// Runs `f` once the record is durable, before any later append of this ledger can be.
    pub fn on_durable(mut self, f: impl FnOnce() + Send + 'static) -> Self {
        self.on_durable = Some(Box::new(f));
        self
    }

    /// Settles after the batch answered: its own `fdatasync` when the batch failed.
    fn settle(&mut self, batch_ok: bool) -> Result<Appended> {
        self.settled = true;
        let durable = if batch_ok {
            Ok(())
        } else {
            self.file.sync_data()
        };
        match durable {
            Ok(()) => {
                if let Some(f) = self.on_durable.take() {
                    f();
                }
                self.gate.open(None);
                Ok(self.appended.clone())
            }
            Err(e) => {
                self.gate.open(Some((
                    self.appended.offset,
                    format!("fdatasync failed: {e}"),
                )));
                Err(LedgerError::io("fdatasync", &self.path, e))
            }
        }
    }
}

impl Future for Deferred {
    type Output = Result<Appended>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.settled {
            return Poll::Ready(Ok(self.appended.clone()));
        }
        let (shared, ticket) = (self.shared.clone(), self.ticket);
        let wait = self.wait.get_or_insert_with(|| shared.wait_async(ticket));
        match Pin::new(wait).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(batch) => Poll::Ready(self.settle(batch.is_ok())),
        }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        if !self.settled {
            let ok = self.shared.wait(self.ticket).is_ok();
            let _ = self.settle(ok);
        }
    }
}

impl Writer {
    /// Appends one record (compact JSON object text) and returns before it is durable: the
    /// [`Deferred`] future says when it is (a `syncfs` of [`crate::Options::shared_sync`]).
    /// `Ok(None)` when this writer cannot defer (no shared sync, not per-record durability)
    /// or an earlier deferred append is still in flight: use [`Writer::append_json`], which
    /// waits for it. **Drive the [`Deferred`] on its own** (a task of its own, as the gateway
    /// does): every later use of this writer waits for it, so a thread that holds it unpolled
    /// and appends again waits for itself (a dropped writer waits at most 5 s).
    pub fn append_json_deferred(&self, kind: &str, data_json: &[u8]) -> Result<Option<Deferred>> {
        let Some(shared) = self.opts.shared_sync.clone() else {
            return Ok(None);
        };
        if self.opts.durability != super::Durability::PerRecord {
            return Ok(None);
        }
        super::append::check_data(data_json)?;
        self.check_poison()?;
        let ts = crate::frame::format_ts(jiff::Timestamp::now());
        let mut st = self.lock_state();
        // The gate closes only under the state lock: open now, it stays open, and passing it
        // only takes a failure left there (never waits on an async worker).
        if self.gate.is_closed() {
            return Ok(None);
        }
        self.settle_gate(&mut st)?;
        self.check_poison()?;
        let ticket = shared.ticket();
        let appended = self.write_line(&mut st, &ts, kind, data_json)?;
        self.gate.close();
        drop(st);
        Ok(Some(Deferred {
            appended,
            wait: None,
            shared,
            ticket,
            file: self.file.clone(),
            gate: self.gate.clone(),
            path: self.path.clone(),
            on_durable: None,
            settled: false,
        }))
    }

    /// Whether everything this writer wrote is durable now, without waiting: no deferred
    /// append in flight, none failed unseen, not poisoned.
    pub fn is_settled(&self) -> bool {
        self.gate.is_open_and_clean() && !self.is_poisoned()
    }

    /// Returns once everything this writer acknowledged or wrote is durable: waits for a
    /// deferred append in flight and acts on its failure (an error then, and the writer
    /// poisoned). For an answer that relies on a record already written (a duplicate's).
    pub fn wait_durable(&self) -> Result<()> {
        let mut st = self.lock_state();
        self.settle_gate(&mut st)?;
        self.check_poison()
    }

    /// Before any append: waits for a deferred append in flight, and acts on its failure
    /// (poison, save aside, cut back), under the state lock.
    pub(super) fn settle_gate(&self, st: &mut super::State) -> Result<()> {
        if let Some((offset, cause)) = self.gate.pass() {
            st.len = offset;
            return Err(self.fail_sync(offset, std::io::Error::other(cause)));
        }
        Ok(())
    }
}

impl Drop for Writer {
    /// A deferred append whose own `fdatasync` failed is acted on before the handle goes:
    /// nobody reopening the ledger may find bytes the disk does not hold.
    fn drop(&mut self) {
        if let Some((offset, cause)) = self.gate.pass_within(std::time::Duration::from_secs(5)) {
            let _ = self.fail_sync(offset, std::io::Error::other(cause));
        }
    }
}
