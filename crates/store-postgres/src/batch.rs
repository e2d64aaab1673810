//! A queue served in batches: requests wait while the queue's batch slots are busy, and
//! whatever waits leaves together when a slot frees up. One request alone leaves at once; many
//! at a time share one statement (and, for appends, one commit). Used for appends (`commit`)
//! and for the inbox look before an input (`peek`).

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::ctx::Ctx;

/// The most requests in one batch.
pub(crate) const BATCH_ITEMS_MAX: usize = 256;

/// A batch stops growing once its requests reach this many bytes (one request always goes),
/// so one statement's parameters stay a few MiB.
pub(crate) const BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;

/// A request of a batched queue.
pub(crate) trait Item: Send + 'static {
    /// Requests with the same key never share a batch (the later one waits for the next).
    fn key(&self) -> Option<&str>;
    /// What it adds to its statement's parameters.
    fn bytes(&self) -> usize;
}

/// A request and where its answer goes.
pub(crate) struct Job<I, A> {
    pub item: I,
    pub reply: oneshot::Sender<A>,
}

/// Serves one batch: answers every job (a job left unanswered sees its channel closed).
pub(crate) type Serve<I, A> = fn(Arc<Ctx>, Vec<Job<I, A>>) -> BoxFuture<'static, ()>;

pub(crate) struct Queue<I, A> {
    tx: mpsc::UnboundedSender<Job<I, A>>,
}

impl<I: Item, A: Send + 'static> Queue<I, A> {
    /// Starts the queue's task on the store's runtime: at most `slots` batches in flight.
    pub(crate) fn start(
        rt: &crate::rt::Rt,
        ctx: Arc<Ctx>,
        slots: usize,
        serve: Serve<I, A>,
    ) -> Queue<I, A> {
        let (tx, rx) = mpsc::unbounded_channel();
        rt.spawn(dispatch(ctx, rx, slots.max(1), serve));
        Queue { tx }
    }

    /// Queues `item`; the answer arrives once its batch was served.
    pub(crate) fn submit(&self, item: I) -> oneshot::Receiver<A> {
        let (reply, rx) = oneshot::channel();
        // If the task is gone (the store's runtime stopped), the job and its `reply` are
        // dropped here and the waiter sees the channel closed.
        let _ = self.tx.send(Job { item, reply });
        rx
    }
}

/// A batch being formed.
struct Forming<I, A> {
    jobs: Vec<Job<I, A>>,
    keys: HashSet<String>,
    bytes: usize,
}

impl<I: Item, A> Forming<I, A> {
    /// Adds `job`, or holds it for a later batch when its key is in this one already.
    fn take(&mut self, job: Job<I, A>, held: &mut Vec<Job<I, A>>) {
        if let Some(k) = job.item.key() {
            if self.keys.contains(k) {
                held.push(job);
                return;
            }
            self.keys.insert(k.to_string());
        }
        self.bytes += job.item.bytes();
        self.jobs.push(job);
    }

    fn full(&self) -> bool {
        self.jobs.len() >= BATCH_ITEMS_MAX || self.bytes >= BATCH_BYTES_MAX
    }
}

/// Takes what is queued whenever a batch slot is free, and serves it as one batch.
async fn dispatch<I: Item, A: Send + 'static>(
    ctx: Arc<Ctx>,
    mut rx: mpsc::UnboundedReceiver<Job<I, A>>,
    slots: usize,
    serve: Serve<I, A>,
) {
    let slots = Arc::new(Semaphore::new(slots));
    let mut held: Vec<Job<I, A>> = Vec::new();
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = Forming {
            jobs: Vec::new(),
            keys: HashSet::new(),
            bytes: 0,
        };
        for job in std::mem::take(&mut held) {
            if batch.full() {
                held.push(job);
            } else {
                batch.take(job, &mut held);
            }
        }
        if batch.jobs.is_empty() {
            match rx.recv().await {
                Some(job) => batch.take(job, &mut held),
                None => return,
            }
        }
        while !batch.full() {
            match rx.try_recv() {
                Ok(job) => batch.take(job, &mut held),
                Err(_) => break,
            }
        }
        let fut = serve(ctx.clone(), batch.jobs);
        tokio::spawn(async move {
            fut.await;
            drop(slot);
        });
    }
}
