//! What a gateway resumes by itself: at start, every session of the store that owes work
//! (before `/readyz` turns 200), and on a timer, sessions whose gateway is gone (shared
//! stores only).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use lazarus_session::{SessionId, Status};
use tokio::sync::Semaphore;

use crate::hub::Hub;
use crate::registry::lock;

/// Result of the startup recovery scan.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    pub scanned: usize,
    pub requeued: usize,
    /// Sessions that owe work in a world this gateway cannot honour: left to their owner
    /// (`needs_owner`).
    pub left_alone: usize,
    pub held_elsewhere: usize,
    pub failed: usize,
    pub took: Duration,
}

/// Result of one takeover pass.
#[derive(Debug, Clone, Default)]
pub struct TakeoverReport {
    pub scanned: usize,
    pub taken: usize,
    /// Sessions whose world this gateway cannot honour, left to their owner.
    pub left_alone: usize,
    pub held_elsewhere: usize,
    pub failed: usize,
}

impl Hub {
    /// Startup: classify every session from its tail and re-queue the ones cut off. A session
    /// whose writer lock is held elsewhere is left alone. Marks the hub ready.
    pub async fn recover(self: &Arc<Self>) -> anyhow::Result<RecoveryReport> {
        let t0 = Instant::now();
        let hub = self.clone();
        let list = crate::memory::spawn_blocking(move || hub.store.list()).await??;
        let mut report = RecoveryReport {
            scanned: list.len(),
            ..Default::default()
        };
        let candidates: Vec<SessionId> = list
            .into_iter()
            .filter(|s| {
                if s.status == Status::Running {
                    report.held_elsewhere += 1;
                }
                // work its log owes, or messages accepted into its inbox
                s.owes_work()
            })
            .map(|s| s.id)
            .collect();
        // open in parallel on the blocking pool
        let mut set = tokio::task::JoinSet::new();
        let sem = Arc::new(Semaphore::new(16));
        for id in candidates {
            let hub = self.clone();
            let sem = sem.clone();
            set.spawn(async move {
                let _p = sem.acquire_owned().await;
                (id.clone(), hub.session(&id).await)
            });
        }
        while let Some(j) = set.join_next().await {
            let Ok((id, r)) = j else { continue };
            match r {
                Ok(actor) => {
                    let owed = lock(&actor.session).state().owes_work();
                    if actor.verdict.leaves().is_some() {
                        self.leave(&actor);
                        report.left_alone += 1;
                    } else if owed {
                        self.schedule(&actor, "gateway-start");
                        report.requeued += 1;
                    }
                }
                Err(e) if e.code == "locked" => {
                    tracing::info!(session = %id, "held by a live writer elsewhere; left alone");
                    report.held_elsewhere += 1;
                }
                Err(e) => {
                    tracing::warn!(session = %id, error = %e.message, "cannot recover session");
                    report.failed += 1;
                }
            }
        }
        report.took = t0.elapsed();
        self.ready.store(true, Ordering::SeqCst);
        Ok(report)
    }

    /// One takeover pass (shared stores): every session whose listing says it may owe work
    /// (`interrupted`, `pending`, `stopped` — a session whose writer lock is held anywhere
    /// lists as `running` and is skipped) and that is not open here is opened, which takes
    /// its exclusive writer lock; "in use by" means another live gateway got it first and is
    /// skipped quietly. A session opened here that owes work is driven with trigger
    /// `gateway-takeover` (the runner writes the usual resume receipt). `failed` remembers
    /// unreadable sessions so each is reported once.
    pub async fn takeover_tick(
        self: &Arc<Self>,
        failed: &mut std::collections::HashSet<SessionId>,
    ) -> anyhow::Result<TakeoverReport> {
        let mut report = TakeoverReport::default();
        if self.is_draining() || self.cfg.no_run {
            return Ok(report);
        }
        let hub = self.clone();
        let list = crate::memory::spawn_blocking(move || hub.store.list()).await??;
        report.scanned = list.len();
        let candidates: Vec<SessionId> = {
            list.into_iter()
                .filter(|s| {
                    s.owes_work()
                        && !self.registry.contains(s.id.as_str())
                        && !(s.waiting == 0 && self.left_unchanged(&s.id, s.records))
                })
                .map(|s| s.id)
                .collect()
        };
        for id in candidates {
            if self.is_draining() {
                break;
            }
            match self.session(&id).await {
                Ok(actor) => {
                    failed.remove(&id);
                    let owed = lock(&actor.session).state().owes_work();
                    if actor.verdict.leaves().is_some() {
                        self.leave(&actor);
                        report.left_alone += 1;
                    } else if owed && self.schedule(&actor, "gateway-takeover") {
                        tracing::info!(session = %id, "took over a session whose gateway is gone");
                        self.metrics.took_over();
                        report.taken += 1;
                    }
                }
                Err(e) if e.code == "locked" => report.held_elsewhere += 1,
                Err(e) => {
                    if failed.insert(id.clone()) {
                        tracing::warn!(session = %id, error = %e.message, "cannot take over session");
                    }
                    report.failed += 1;
                }
            }
        }
        Ok(report)
    }

    /// Runs [`Hub::takeover_tick`] every `every` until `stop` (or the drain).
    pub fn spawn_takeover(
        self: &Arc<Self>,
        every: Duration,
        stop: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let hub = self.clone();
        tokio::spawn(async move {
            let mut failed = std::collections::HashSet::new();
            let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                if hub.is_draining() {
                    return;
                }
                match hub.takeover_tick(&mut failed).await {
                    Ok(r) if r.taken > 0 => tracing::info!(
                        taken = r.taken,
                        scanned = r.scanned,
                        "takeover: resumed sessions of a gateway that is gone"
                    ),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "takeover scan failed; retrying"),
                }
            }
        })
    }
}
