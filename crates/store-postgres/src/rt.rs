//! The store's own tokio runtime, and running futures on it from synchronous code.
//!
//! The `Store` trait is synchronous. Each [`PgStore`](crate::PgStore) owns a small
//! multi-thread runtime that drives its connections. A trait method runs its future with
//! [`Rt::run`]: directly with `block_on` when the calling thread is outside any runtime, or —
//! when called from inside another runtime (an async task, or `spawn_blocking`) — by spawning
//! it on the store's runtime and waiting on a channel, so `block_on` never nests.

use std::future::Future;

use crate::error::PgError;

pub(crate) struct Rt(Option<tokio::runtime::Runtime>);

impl Rt {
    pub(crate) fn new(workers: usize) -> Result<Rt, PgError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers.max(1))
            .thread_name("lazarus-pg")
            .enable_all()
            .build()
            .map_err(|e| PgError::Config(format!("cannot start the PostgreSQL runtime: {e}")))?;
        Ok(Rt(Some(rt)))
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        self.0.as_ref().expect("runtime present until drop")
    }

    /// Starts `fut` in the background on this runtime (stopped with it).
    pub(crate) fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.rt().spawn(fut);
    }

    /// Runs `fut` to completion on this runtime, from any thread.
    pub(crate) fn run<T, F>(&self, fut: F) -> Result<T, PgError>
    where
        F: Future<Output = Result<T, PgError>> + Send + 'static,
        T: Send + 'static,
    {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.rt().block_on(fut);
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.rt().spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().unwrap_or_else(|_| {
            Err(PgError::Config(
                "the PostgreSQL store's runtime stopped while a request was running".into(),
            ))
        })
    }
}

impl Drop for Rt {
    fn drop(&mut self) {
        // `shutdown_background` never blocks, so a store may be dropped anywhere (also inside
        // an async task). Connections still open close with their tasks.
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}
