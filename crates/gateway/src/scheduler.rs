//! When sessions run: admission against the bounded run queue, one run per session at a
//! time (a message that arrives mid-run makes it run again), the run loop, and what the
//! runner's events mean for metrics, live tails and drain.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use lazarus_agent::provider::CancellationToken;
use lazarus_agent::runner::{RunError, RunEvent, RunOutcome, Runner, RunnerConfig};
use lazarus_session::StoredRecord;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};

use crate::hub::Hub;
use crate::registry::{OpenSession, lock};

impl Hub {
    /// Refuses new work with 429 when the run queue is full (the session is not running and
    /// no slot or queue place is free).
    pub fn admit(&self, actor: &OpenSession) -> ApiResult<()> {
        if self.cfg.no_run || actor.is_running() {
            return Ok(());
        }
        let queued = self.queued.load(Ordering::SeqCst);
        // A free run slot (nobody waiting for it) takes the work at once.
        if self.run_slots.available_permits() > queued {
            return Ok(());
        }
        if queued >= self.cfg.limits.max_queued {
            return Err(ApiError::busy(
                "queue_full",
                format!(
                    "all {} run slots are busy and {queued} sessions are waiting for one (limit --max-queued {}); retry later",
                    self.cfg.limits.max_running, self.cfg.limits.max_queued
                ),
                1,
            ));
        }
        Ok(())
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Makes sure the session runs until idle: starts a run, or asks the running one to look
    /// again for inputs when it is done. False when nothing was scheduled.
    pub fn schedule(self: &Arc<Self>, actor: &Arc<OpenSession>, trigger: &'static str) -> bool {
        if self.cfg.no_run || self.is_draining() {
            return false;
        }
        if actor.verdict.leaves().is_some() {
            // its world is not this gateway's: it runs nowhere here
            self.leave(actor);
            return false;
        }
        // already running: it looks again for inputs when its run ends
        let Some(cancel) = self.claim_run(actor, true) else {
            return true;
        };
        self.queued.fetch_add(1, Ordering::SeqCst);
        let hub = self.clone();
        let actor = actor.clone();
        self.runs.spawn_on(
            async move { hub.run_loop(actor, trigger, cancel).await },
            &self.run_rt,
        );
        true
    }

    /// Leaves a session whose world this gateway cannot honour to its owner: records why
    /// (once per reason, and only while it owes work), then lets go of it, so the command the
    /// record names can take it. Off the async workers.
    pub(crate) fn leave(self: &Arc<Self>, actor: &Arc<OpenSession>) {
        let Some(why) = actor.verdict.leaves().cloned() else {
            return;
        };
        self.registry.remove(actor);
        let a = actor.clone();
        let hub = self.clone();
        tokio::spawn(async move {
            let r = crate::memory::spawn_blocking(move || -> Result<(), lazarus_session::SessionError> {
                let mut s = lock(&a.session);
                let st = s.state();
                let said = st
                    .needs_owner
                    .as_ref()
                    .is_some_and(|(_, n)| n.reason == why.reason && n.resume_with == why.resume_with);
                if said || !st.owes_work() {
                    hub.remember_left(&a.id, st.last_seq);
                    return Ok(());
                }
                let rec = lazarus_session::Record::NeedsOwner(why);
                let (kind, data) = (rec.kind(), rec.data_value());
                let stored = s.append(rec)?;
                hub.metrics.appended(kind);
                let _ = a.tx.send(Arc::new(StoredRecord {
                    seq: stored.seq,
                    ts: stored.ts,
                    kind: kind.to_string(),
                    data,
                }));
                hub.remember_left(&a.id, stored.seq);
                tracing::warn!(session = %a.id, "left to its owner: this gateway cannot honour its world");
                Ok(())
            })
            .await;
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot record why a session is left alone")
                }
                Err(e) => tracing::warn!(error = %e, "cannot record why a session is left alone"),
            }
        });
    }

    /// Notes that `id`, at `last_seq`, was left to its owner: the takeover pass does not open
    /// it again until it changes.
    fn remember_left(&self, id: &lazarus_session::SessionId, last_seq: u64) {
        lock(&self.left_alone).insert(id.clone(), last_seq);
    }

    /// Whether `id` was left to its owner here and nothing was recorded since.
    pub(crate) fn left_unchanged(&self, id: &lazarus_session::SessionId, last_seq: u64) -> bool {
        lock(&self.left_alone).get(id) == Some(&last_seq)
    }

    /// Marks the session running with fresh flags and a cancel token under the shutdown's;
    /// `None` when it runs already (then, with `again`, asks that run to look again for
    /// inputs when it ends — under the same lock, so the request cannot miss the run's end).
    /// The caller clears `running` when it is done.
    fn claim_run(&self, actor: &OpenSession, again: bool) -> Option<CancellationToken> {
        let mut f = lock(&actor.run);
        if f.running {
            f.again |= again;
            return None;
        }
        f.running = true;
        f.again = false;
        f.in_tool = false;
        let c = self.shutdown.child_token();
        f.cancel = Some(c.clone());
        Some(c)
    }

    /// The gateway's runner settings, in the session's workspace.
    fn runner_config(&self, actor: &OpenSession) -> RunnerConfig {
        let mut cfg = self.cfg.runner.clone();
        cfg.workspace = actor.workspace.clone();
        cfg
    }

    /// The runner of a session whose world this gateway honours: in its workspace, with the
    /// tools it recorded, checking (and adopting, for a session that has none) its world.
    fn runner_for(&self, actor: &OpenSession, cfg: RunnerConfig) -> Result<Runner, RunError> {
        let crate::registry::WorldVerdict::Run { world, .. } = &actor.verdict else {
            return Err(RunError::Internal(format!(
                "session {} is left to its owner; not run here",
                actor.id
            )));
        };
        Ok(Runner::new(cfg)?
            .with_toolbox(self.toolbox_for(world))
            .with_world((**world).clone()))
    }

    async fn run_loop(
        self: Arc<Self>,
        actor: Arc<OpenSession>,
        trigger: &'static str,
        cancel: CancellationToken,
    ) {
        let permit = tokio::select! {
            p = self.run_slots.clone().acquire_owned() => p.ok(),
            _ = cancel.cancelled() => None,
        };
        self.queued.fetch_sub(1, Ordering::SeqCst);
        let Some(_permit) = permit else {
            let mut f = lock(&actor.run);
            f.running = false;
            f.cancel = None;
            return;
        };
        self.running.fetch_add(1, Ordering::SeqCst);
        let runner = self.runner_for(&actor, self.runner_config(&actor));
        let mut trigger = trigger;
        loop {
            let r = match &runner {
                Ok(runner) => {
                    let hub = &self;
                    let a = &actor;
                    let c = &cancel;
                    let mut observer = move |ev: RunEvent<'_>| hub.observe(a, ev, c);
                    runner
                        .drive(&actor.session, trigger, &cancel, &mut observer)
                        .await
                }
                Err(e) => Err(lazarus_agent::runner::RunError::Internal(e.to_string())),
            };
            if let Err(RunError::World(refusal)) = &r {
                // its world changed under us (it never does while we hold it): leave it
                tracing::warn!(session = %actor.id, %refusal, "not run: its world is not this gateway's");
            }
            let outcome = match &r {
                Ok(RunOutcome::Idle) => "idle",
                Ok(RunOutcome::MaxTurns) => "max_turns",
                Ok(RunOutcome::Cancelled) => "cancelled",
                Ok(RunOutcome::Failed { .. }) => "failed",
                Ok(RunOutcome::AwaitingApproval { .. }) => "awaiting_approval",
                Err(_) => "error",
            };
            self.metrics.run_finished(outcome);
            if let Err(e) = &r {
                tracing::warn!(session = %actor.id, error = %e, "run stopped with an error; the session stays resumable");
            }
            let mut f = lock(&actor.run);
            f.in_tool = false;
            if f.again && r.is_ok() && !cancel.is_cancelled() && !self.is_draining() {
                f.again = false;
                trigger = "message";
                continue;
            }
            f.running = false;
            f.again = false;
            f.cancel = None;
            actor.touch();
            break;
        }
        self.running.fetch_sub(1, Ordering::SeqCst);
    }

    /// Compacts an open session now (`POST /v1/sessions/{id}/compact`): the runner's
    /// compaction with trigger `manual`, on a session that owes no work and is not running.
    /// While it compacts the session counts as running, so a message that arrives meanwhile
    /// is recorded and run right after. Returns the `compaction` record written (seq, data),
    /// or `None` when there was nothing to summarise.
    pub async fn compact(
        self: &Arc<Self>,
        actor: &Arc<OpenSession>,
        keep_turns: Option<u64>,
    ) -> ApiResult<Option<(u64, Value)>> {
        if self.is_draining() {
            return Err(ApiError::unavailable("the gateway is shutting down"));
        }
        let Some(cancel) = self.claim_run(actor, false) else {
            return Err(ApiError::conflict(
                "running",
                format!(
                    "session {} is running; POST /v1/sessions/{}/events {{\"type\":\"compact\"}} to compact it after the turn in flight, or compact it once it is idle (with --context-window or --compact-at the gateway compacts by itself before a request would pass the window)",
                    actor.id, actor.id
                ),
            ));
        };
        let mut cfg = self.runner_config(actor);
        if let Some(k) = keep_turns {
            cfg.compaction.keep_turns = k;
        }
        let result = match self.runner_for(actor, cfg) {
            Ok(runner) => {
                let mut record = None;
                let hub = &**self;
                let a = &**actor;
                let c = &cancel;
                let mut observer = |ev: RunEvent<'_>| {
                    if let RunEvent::Record {
                        seq, kind, data, ..
                    } = &ev
                        && *kind == "compaction"
                    {
                        record = Some((*seq, data.clone()));
                    }
                    hub.observe(a, ev, c);
                };
                let r = runner
                    .compact_now(&actor.session, &cancel, &mut observer)
                    .await;
                r.map(|_| record)
            }
            Err(e) => Err(e),
        };
        let again = {
            let mut f = lock(&actor.run);
            f.running = false;
            f.cancel = None;
            std::mem::take(&mut f.again)
        };
        actor.touch();
        if again {
            self.schedule(actor, "message");
        }
        result.map_err(|e| match e {
            RunError::Session(e) => ApiError::from(e),
            RunError::Provider(e) => ApiError::new(
                axum::http::StatusCode::BAD_GATEWAY,
                "model_failed",
                format!("the summarising request failed: {e}; nothing was written, try again"),
            ),
            RunError::Internal(m) if m.contains("owes work") => ApiError::conflict(
                "owes_work",
                format!("session {} owes work (a pending input or an open turn); it is compacted by itself when it runs with --context-window or --compact-at", actor.id),
            ),
            RunError::Internal(m) => ApiError::internal(m),
            RunError::World(refusal) => ApiError::conflict("needs_owner", refusal.to_string()),
        })
    }

    fn observe(&self, actor: &OpenSession, ev: RunEvent<'_>, cancel: &CancellationToken) {
        match ev {
            RunEvent::Record {
                seq,
                ts,
                kind,
                data,
            } => {
                if let Some(t) = self.telemetry.get() {
                    t.record(actor.id.as_str(), seq, ts, kind, &data);
                }
                let m = &self.metrics;
                m.appended(kind);
                match kind {
                    "resume" => m.resumed(data["trigger"].as_str().unwrap_or("?")),
                    "response" => {
                        let failed = data.get("failure").is_some_and(|f| !f.is_null());
                        m.model_request(if failed { "failed" } else { "ok" });
                    }
                    "tool_outcome" => {
                        m.tool_call(data["status"].as_str().unwrap_or("?"));
                        lock(&actor.run).in_tool = false;
                        if self.is_draining() {
                            // the running call finished: stop here, resumable
                            cancel.cancel();
                        }
                    }
                    _ => {}
                }
                let _ = actor.tx.send(Arc::new(StoredRecord {
                    seq,
                    ts: ts.to_string(),
                    kind: kind.to_string(),
                    data,
                }));
            }
            RunEvent::ToolRunning { .. } => lock(&actor.run).in_tool = true,
            RunEvent::Retry { .. } => self.metrics.model_retry(),
            RunEvent::Text(_) | RunEvent::Reasoning(_) | RunEvent::ToolProgress { .. } => {}
        }
    }
}
