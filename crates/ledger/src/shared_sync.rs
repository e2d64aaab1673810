//! One `syncfs` for many ledgers: per-record durability at the rate of the disk, not of the
//! syscalls.
//!
//! A server with many sessions open appends to many files at once. `fdatasync` makes one
//! file durable per call, and on a virtual disk each call costs three device round trips (the
//! data, the inode, a cache flush) and ~36 µs of CPU: 64 threads syncing 64 files keep 1.4 of
//! 2 cores busy in the kernel. A [`SharedSync`] instead keeps a few threads that make *every*
//! file on the file system durable with one `syncfs(2)` (writeback of each dirty file in one
//! plugged batch, one flush) for all the writers that wrote since the last batch began; a
//! batch starts as soon as a waiter wants one and a thread is free, so several overlap (four
//! overlapping `syncfs` calls covered 64 files at 1.6x the rate of 64 threads each calling
//! `fdatasync`, with a quarter of the CPU).
//!
//! **The rule.** A writer with [`crate::Options::shared_sync`] set takes a [`Ticket`], writes
//! its line, then [`SharedSync::wait`]s for a `syncfs` that *began after* that write returned:
//! batch numbers are taken under one lock and a thread takes the next number as it starts a
//! batch, so a waiter registered under number `n` is covered by any finished batch numbered
//! `n` or more, never by one already running. The append is acknowledged only then, as with
//! its own `fdatasync`.
//!
//! **Errors.** `syncfs` reports a writeback error of *any* file on the file system (Linux ≥
//! 5.8; older kernels return 0 regardless, so [`SharedSync::start`] refuses them), once per
//! descriptor: each thread keeps a descriptor of its own, opened before the first ticket, so
//! every thread's next batch reports an error that happened since its last. Any failed batch
//! fails every waiter whose ticket is older than the report (the error may be its page,
//! written back by another batch or by the kernel's flusher); its writer then calls its own
//! `fdatasync`, and the file's own error state says whether its bytes were lost (then the
//! writer's usual failed-sync path saves them aside, cuts and poisons) or were written and
//! only another file failed (then that `fdatasync` flushes and succeeds).
//!
//! **What it costs.** `syncfs` also writes back other programs' dirty data on the same file
//! system: put the session directory on a file system of its own where others write a lot
//! (or use per-file `fdatasync`, `lazarus serve --sync per-file`).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use crate::fs::{FsSyncer, SharedFs};

/// Threads syncing at once. Alone, overlapping `syncfs` calls scale to about four on a virtual
/// disk (64 files: 15K/s with one, 60K/s with four, fewer with eight); behind the gateway,
/// where the CPU of accepting is the limit, two do best (`load accept`, three alternating
/// rounds: 24–26K/s with one, 27–29K/s with two, 20–25K/s with four).
pub const SYNC_THREADS: usize = 2;

/// Threads that make a file system durable with one `syncfs` for every writer waiting.
/// Cheap to clone; the threads end when the last clone is dropped.
#[derive(Clone)]
pub struct SharedSync {
    inner: Arc<Inner>,
    _owner: Arc<Owner>,
}

impl std::fmt::Debug for SharedSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSync")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

struct Inner {
    /// Any directory on the file system (the session directory).
    dir: PathBuf,
    batches: Mutex<Batches>,
    /// Idle threads sleep here until a waiter wants a batch (or the last handle went away).
    wanted: Condvar,
    /// Waiters sleep here until a batch that covers them is done.
    done: Condvar,
}

#[derive(Default)]
struct Batches {
    /// The number the next batch to start will carry (batches are numbered from 1).
    next: u64,
    /// The highest-numbered batch that finished (they may finish out of order).
    max_done: u64,
    /// Failed batches so far: a ticket taken before a failure was reported is failed.
    failures: u64,
    /// A waiter registered for `next`.
    wanted: bool,
    /// Threads asleep on `wanted` (a waiter wakes one only if there is one and nobody asked
    /// yet: one futex wake per batch, not one per waiter).
    idle: usize,
    /// Async waiters ([`SyncWait`]): the batch each waits for, and its waker.
    wakers: Vec<(u64, Waker)>,
    /// Every handle was dropped: the threads end.
    closed: bool,
    /// Batches run, and waits they answered (for reports and tests).
    syncs: u64,
    covered: u64,
    waiting: u64,
}

impl Batches {
    /// Registers a waiter for batch `next`, waking an idle thread to run it unless one was
    /// woken for it already (or none is idle: a busy one takes it when its batch ends).
    fn want(&mut self, wanted: &Condvar) {
        self.waiting += 1;
        if !self.wanted {
            self.wanted = true;
            if self.idle > 0 {
                wanted.notify_one();
            }
        }
    }
}

/// Ends the threads when the last handle goes.
struct Owner(Arc<Inner>);

impl Drop for Owner {
    fn drop(&mut self) {
        let wakers = {
            let mut b = lock(&self.0.batches);
            b.closed = true;
            std::mem::take(&mut b.wakers)
        };
        self.0.wanted.notify_all();
        self.0.done.notify_all();
        for (_, w) in wakers {
            w.wake();
        }
    }
}

/// Taken before a write that a later [`SharedSync::wait`] is to cover: a batch failure
/// reported after it fails the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64);

/// What [`SharedSync::wait`] answers when a batch failed since the caller's ticket: the
/// caller must find out with its own file's `fdatasync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchFailed;

/// Counters since the start (for benchmarks and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SharedSyncStats {
    /// `syncfs` calls made.
    pub syncs: u64,
    /// Waits they answered.
    pub covered: u64,
    /// Calls that failed.
    pub failures: u64,
}

fn lock(m: &Mutex<Batches>) -> MutexGuard<'_, Batches> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SharedSync {
    /// Starts [`SYNC_THREADS`] syncing threads for the file system holding `dir`. Refused (an
    /// `Unsupported` error saying why) where `syncfs` cannot be trusted to report a writeback
    /// error: Linux before 5.8, or not Linux. `fs` is the real file system, or the simulated
    /// one of the power-loss tests.
    pub fn start(fs: SharedFs, dir: &Path) -> std::io::Result<SharedSync> {
        if let Some(why) = fs.sync_fs_unsupported() {
            return Err(std::io::Error::new(std::io::ErrorKind::Unsupported, why));
        }
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            batches: Mutex::new(Batches {
                next: 1,
                ..Batches::default()
            }),
            wanted: Condvar::new(),
            done: Condvar::new(),
        });
        // Descriptors first, all of them before the first ticket: each reports every
        // writeback error from its opening on.
        let syncers = (0..SYNC_THREADS)
            .map(|_| fs.open_syncer(dir))
            .collect::<std::io::Result<Vec<_>>>()?;
        let owner = Arc::new(Owner(inner.clone()));
        for (i, syncer) in syncers.into_iter().enumerate() {
            let worker = inner.clone();
            std::thread::Builder::new()
                .name(format!("lazarus-syncfs-{i}"))
                .spawn(move || run(&worker, &*syncer))?;
        }
        Ok(SharedSync {
            _owner: owner,
            inner,
        })
    }

    /// The directory whose file system this syncs.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Take before writing what the next [`SharedSync::wait`] is to make durable.
    pub fn ticket(&self) -> Ticket {
        Ticket(lock(&self.inner.batches).failures)
    }

    /// Blocks until a `syncfs` that began after this call has finished. `Err` when a batch
    /// failed since `ticket` was taken: the caller's bytes may be lost, its own `fdatasync`
    /// tells.
    pub fn wait(&self, ticket: Ticket) -> Result<(), BatchFailed> {
        let mut b = lock(&self.inner.batches);
        let mine = b.next;
        b.want(&self.inner.wanted);
        while b.max_done < mine && !b.closed {
            b = self.inner.done.wait(b).unwrap_or_else(|p| p.into_inner());
        }
        if b.max_done < mine || b.failures != ticket.0 {
            return Err(BatchFailed);
        }
        Ok(())
    }

    /// [`SharedSync::wait`] for async callers: the batch is registered at the first poll (so
    /// create the future after the write), and the future is woken by the syncing thread,
    /// without a thread of the caller's blocking on it.
    pub fn wait_async(&self, ticket: Ticket) -> SyncWait {
        SyncWait {
            inner: self.inner.clone(),
            ticket,
            mine: None,
        }
    }

    pub fn stats(&self) -> SharedSyncStats {
        let b = lock(&self.inner.batches);
        SharedSyncStats {
            syncs: b.syncs,
            covered: b.covered,
            failures: b.failures,
        }
    }
}

/// The future of [`SharedSync::wait_async`].
pub struct SyncWait {
    inner: Arc<Inner>,
    ticket: Ticket,
    mine: Option<u64>,
}

impl Future for SyncWait {
    type Output = Result<(), BatchFailed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.inner.clone();
        let mut b = lock(&inner.batches);
        let mine = match self.mine {
            Some(m) => m,
            None => {
                let m = b.next;
                b.want(&inner.wanted);
                self.mine = Some(m);
                m
            }
        };
        if b.max_done >= mine || b.closed {
            let ok = b.max_done >= mine && b.failures == self.ticket.0;
            return Poll::Ready(if ok { Ok(()) } else { Err(BatchFailed) });
        }
        match b
            .wakers
            .iter_mut()
            .find(|(m, w)| *m == mine && w.will_wake(cx.waker()))
        {
            Some(_) => {}
            None => b.wakers.push((mine, cx.waker().clone())),
        }
        Poll::Pending
    }
}

/// One thread: a `syncfs` per batch of waiters, for as long as a handle is alive.
fn run(inner: &Inner, syncer: &dyn FsSyncer) {
    loop {
        let batch = {
            let mut b = lock(&inner.batches);
            while !b.wanted && !b.closed {
                b.idle += 1;
                b = inner.wanted.wait(b).unwrap_or_else(|p| p.into_inner());
                b.idle -= 1;
            }
            if b.closed {
                return;
            }
            // Every waiter registered so far wrote before this point: this batch covers them;
            // later ones get the next number.
            let batch = b.next;
            b.next += 1;
            b.wanted = false;
            b.covered += std::mem::take(&mut b.waiting);
            batch
        };
        let result = syncer.sync();
        let mut b = lock(&inner.batches);
        if let Err(e) = result {
            tracing::warn!(dir = %inner.dir.display(), error = %e,
                "syncfs failed; each writer waiting checks its own file with fdatasync");
            b.failures += 1;
        }
        b.max_done = b.max_done.max(batch);
        b.syncs += 1;
        let max_done = b.max_done;
        let mut ready = Vec::new();
        b.wakers.retain(|(m, w)| {
            if *m <= max_done {
                ready.push(w.clone());
                false
            } else {
                true
            }
        });
        drop(b);
        inner.done.notify_all();
        for w in ready {
            w.wake();
        }
    }
}
