//! The sessions a gateway hosts: one [`Actor`] per open session (it holds the ledger's writer
//! lock for the life of this process), appends of inputs off the async workers, a bounded run
//! queue, live record fan-out, startup recovery and drain.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use lazarus_agent::provider::CancellationToken;
use lazarus_agent::runner::{RunEvent, RunOutcome, Runner, RunnerConfig, SharedSession};
use lazarus_agent::tools::Toolbox;
use lazarus_session::record::{Control, Input};
use lazarus_session::{
    CreateOptions, Record, Session, SessionError, SessionState, SharedStore, Status, StoredRecord,
};
use serde_json::{Value, json};
use tokio::sync::{OnceCell, Semaphore, broadcast};
use tokio_util::task::TaskTracker;

use crate::error::{ApiError, ApiResult};
use crate::metrics::Metrics;

/// Limits of one gateway. Every queue is bounded.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Largest message text, in bytes.
    pub max_text_bytes: usize,
    /// Sessions driven at once (each makes at most one model request or tool call at a time).
    pub max_running: usize,
    /// Sessions waiting for a run slot; beyond it new work is refused with 429.
    pub max_queued: usize,
    /// Sessions open (writer lock held) at once.
    pub max_open_sessions: usize,
    /// Concurrent live-tail streams.
    pub max_streams: usize,
    /// Largest page of `records`.
    pub max_page: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 1024 * 1024,
            max_text_bytes: 256 * 1024,
            max_running: 64,
            max_queued: 4096,
            max_open_sessions: 10_000,
            max_streams: 1024,
            max_page: 1000,
        }
    }
}

/// What the hub needs besides the store.
#[derive(Debug, Clone)]
pub struct HubConfig {
    pub workspace_root: PathBuf,
    pub limits: Limits,
    /// Runner settings; `workspace` is replaced per session.
    pub runner: RunnerConfig,
    pub toolbox: Toolbox,
    /// Accept and record inputs but never drive sessions (benchmarks, maintenance).
    pub no_run: bool,
}

/// A record as broadcast to live tails.
pub type Live = Arc<StoredRecord>;

#[derive(Default)]
struct RunFlags {
    running: bool,
    again: bool,
    in_tool: bool,
    cancel: Option<CancellationToken>,
}

/// One open session.
pub struct Actor {
    pub id: String,
    pub session: SharedSession,
    pub workspace: PathBuf,
    tx: broadcast::Sender<Live>,
    run: Mutex<RunFlags>,
    /// Serialises resume-event decisions.
    pub event_lock: tokio::sync::Mutex<()>,
}

impl Actor {
    pub fn is_running(&self) -> bool {
        lock(&self.run).running
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Result of the startup recovery scan.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    pub scanned: usize,
    pub requeued: usize,
    pub held_elsewhere: usize,
    pub failed: usize,
    pub took: Duration,
}

/// Result of one takeover pass.
#[derive(Debug, Clone, Default)]
pub struct TakeoverReport {
    pub scanned: usize,
    pub taken: usize,
    pub held_elsewhere: usize,
    pub failed: usize,
}

/// All sessions of one gateway.
pub struct Hub {
    pub store: SharedStore,
    pub cfg: HubConfig,
    pub metrics: Metrics,
    actors: Mutex<HashMap<String, Arc<OnceCell<Arc<Actor>>>>>,
    channels: Mutex<HashMap<String, broadcast::Sender<Live>>>,
    run_slots: Arc<Semaphore>,
    queued: AtomicUsize,
    running: AtomicUsize,
    pub streams: Arc<Semaphore>,
    /// Parent of every run's cancel token.
    shutdown: CancellationToken,
    draining: AtomicBool,
    ready: AtomicBool,
    run_rt: tokio::runtime::Handle,
    runs: TaskTracker,
}

impl Hub {
    pub fn new(store: SharedStore, cfg: HubConfig, run_rt: tokio::runtime::Handle) -> Arc<Self> {
        Arc::new(Hub {
            store,
            run_slots: Arc::new(Semaphore::new(cfg.limits.max_running.max(1))),
            streams: Arc::new(Semaphore::new(cfg.limits.max_streams)),
            cfg,
            metrics: Metrics::default(),
            actors: Mutex::new(HashMap::new()),
            channels: Mutex::new(HashMap::new()),
            queued: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            shutdown: CancellationToken::new(),
            draining: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            run_rt,
            runs: TaskTracker::new(),
        })
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    pub fn running_count(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    pub fn queued_count(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    pub fn open_count(&self) -> usize {
        lock(&self.actors).len()
    }

    /// The live channel of a session (created on first use).
    pub fn channel(&self, id: &str) -> broadcast::Sender<Live> {
        lock(&self.channels)
            .entry(id.to_string())
            .or_insert_with(|| broadcast::channel(1024).0)
            .clone()
    }

    /// The open session `id`, opening it (taking its writer lock) if needed.
    pub async fn actor(self: &Arc<Self>, id: &str) -> ApiResult<Arc<Actor>> {
        lazarus_ledger::validate_id(id)?;
        let cell = {
            let mut m = lock(&self.actors);
            if let Some(c) = m.get(id) {
                c.clone()
            } else {
                if m.len() >= self.cfg.limits.max_open_sessions {
                    return Err(ApiError::busy(
                        "too_many_open_sessions",
                        format!(
                            "{} sessions are open in this gateway (limit --max-open-sessions)",
                            m.len()
                        ),
                        5,
                    ));
                }
                let c = Arc::new(OnceCell::new());
                m.insert(id.to_string(), c.clone());
                c
            }
        };
        let hub = self.clone();
        let idc = id.to_string();
        let r = cell
            .get_or_try_init(|| async move {
                let h = hub.clone();
                tokio::task::spawn_blocking(move || h.store.open(&idc).map(|s| h.make_actor(s)))
                    .await
                    .map_err(|e| ApiError::internal(e.to_string()))?
                    .map_err(ApiError::from)
            })
            .await
            .cloned();
        if r.is_err() {
            let mut m = lock(&self.actors);
            if m.get(id)
                .is_some_and(|c| Arc::ptr_eq(c, &cell) && !c.initialized())
            {
                m.remove(id);
            }
        }
        r
    }

    /// The actor if the session is open here.
    pub fn open_actor(&self, id: &str) -> Option<Arc<Actor>> {
        lock(&self.actors).get(id).and_then(|c| c.get().cloned())
    }

    fn make_actor(&self, s: Session) -> Arc<Actor> {
        let id = s.id().to_string();
        let workspace = s
            .state()
            .header
            .meta
            .as_ref()
            .and_then(|m| m.get("workspace"))
            .and_then(Value::as_str)
            .map(PathBuf::from)
            .unwrap_or_else(|| self.cfg.workspace_root.join(&id));
        Arc::new(Actor {
            tx: self.channel(&id),
            id,
            session: Arc::new(Mutex::new(s)),
            workspace,
            run: Mutex::new(RunFlags::default()),
            event_lock: tokio::sync::Mutex::new(()),
        })
    }

    /// Resolves a requested workspace (relative to the root, or absolute inside it), creating
    /// the directory. Anything outside the root is refused.
    pub fn resolve_workspace(&self, requested: Option<&str>, id: &str) -> ApiResult<PathBuf> {
        let root = &self.cfg.workspace_root;
        let p = match requested {
            None => root.join(id),
            Some(w) => {
                let wp = Path::new(w);
                if w.is_empty() || w.len() > 4096 || w.contains('\0') {
                    return Err(ApiError::bad_request(
                        "bad_workspace",
                        "workspace must be a non-empty path",
                    ));
                }
                if wp
                    .components()
                    .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
                {
                    return Err(ApiError::bad_request(
                        "bad_workspace",
                        "workspace must not contain '..'",
                    ));
                }
                if wp.is_absolute() {
                    wp.to_path_buf()
                } else {
                    root.join(wp)
                }
            }
        };
        if !p.starts_with(root) {
            return Err(ApiError::bad_request(
                "bad_workspace",
                format!("workspace must be inside {}", root.display()),
            ));
        }
        std::fs::create_dir_all(&p).map_err(|e| {
            ApiError::internal(format!("cannot create workspace {}: {e}", p.display()))
        })?;
        let canon = p
            .canonicalize()
            .map_err(|e| ApiError::internal(format!("workspace {}: {e}", p.display())))?;
        if !canon.starts_with(root) {
            return Err(ApiError::bad_request(
                "bad_workspace",
                format!("workspace resolves outside {} (symlink?)", root.display()),
            ));
        }
        Ok(canon)
    }

    /// Creates a session and keeps it open.
    pub async fn create(
        self: &Arc<Self>,
        id: Option<String>,
        workspace: Option<String>,
        system_prompt: Option<String>,
    ) -> ApiResult<Arc<Actor>> {
        let id = id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        lazarus_ledger::validate_id(&id)?;
        if self.exists(&id).await? {
            return Err(ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "already_exists",
                format!("session {id:?} already exists; a session is never overwritten"),
            ));
        }
        if self.open_count() >= self.cfg.limits.max_open_sessions {
            return Err(ApiError::busy(
                "too_many_open_sessions",
                "too many sessions are open in this gateway (limit --max-open-sessions)",
                5,
            ));
        }
        let hub = self.clone();
        let actor = tokio::task::spawn_blocking(move || -> ApiResult<Arc<Actor>> {
            let ws = hub.resolve_workspace(workspace.as_deref(), &id)?;
            let meta = json!({
                "workspace": ws,
                "system_prompt": system_prompt.or_else(|| hub.cfg.runner.system_prompt.clone()),
            });
            let s = hub.store.create(CreateOptions {
                id: Some(id),
                meta: Some(meta),
            })?;
            Ok(hub.make_actor(s))
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))??;
        self.metrics.appended("header");
        let cell = Arc::new(OnceCell::new_with(Some(actor.clone())));
        lock(&self.actors).insert(actor.id.clone(), cell);
        Ok(actor)
    }

    /// Records an input through the session's own exactly-once rule
    /// ([`Session::append_input`] / [`Session::append_control`]) and, if it was new, shows it
    /// to live tails. Runs on the blocking pool (write + fdatasync must not stall the async
    /// workers). Returns (seq, duplicate).
    async fn append_once(&self, actor: &Arc<Actor>, rec: Record) -> ApiResult<(u64, bool)> {
        let a = actor.clone();
        let t0 = Instant::now();
        let r = tokio::task::spawn_blocking(move || -> ApiResult<(u64, bool)> {
            let mut s = lock(&a.session);
            let ack = match &rec {
                Record::Input(i) => s.append_input(&i.input_id, &i.source, &i.text)?,
                Record::Control(c) => {
                    s.append_control(&c.input_id, &c.action, c.reason.as_deref())?
                }
                other => {
                    return Err(ApiError::internal(format!(
                        "not an input record: {}",
                        other.kind()
                    )));
                }
            };
            if let Some(ts) = ack.ts {
                // sent under the session lock: inputs reach live tails in seq order
                let _ = a.tx.send(Arc::new(StoredRecord {
                    seq: ack.seq,
                    ts,
                    kind: rec.kind().to_string(),
                    data: rec.data_value(),
                }));
            }
            Ok((ack.seq, ack.duplicate))
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))??;
        if !r.1 {
            self.metrics.observe_append(t0.elapsed());
        }
        Ok(r)
    }

    /// Records a user message once per `message_id`.
    pub async fn append_input(
        &self,
        actor: &Arc<Actor>,
        message_id: String,
        text: String,
    ) -> ApiResult<(u64, bool)> {
        let rec = Record::Input(Input {
            input_id: message_id,
            source: "user".into(),
            text,
        });
        let r = self.append_once(actor, rec).await?;
        if !r.1 {
            self.metrics.appended("input");
        }
        Ok(r)
    }

    /// Records a control input once per `input_id`.
    pub async fn append_control(
        &self,
        actor: &Arc<Actor>,
        input_id: String,
        action: &str,
        reason: Option<String>,
    ) -> ApiResult<(u64, bool)> {
        let rec = Record::Control(Control {
            input_id,
            action: action.to_string(),
            reason,
        });
        let r = self.append_once(actor, rec).await?;
        if !r.1 {
            self.metrics.appended("control");
        }
        Ok(r)
    }

    /// Refuses new work with 429 when the run queue is full (the session is not running and
    /// no slot or queue place is free).
    pub fn admit(&self, actor: &Actor) -> ApiResult<()> {
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
    pub fn schedule(self: &Arc<Self>, actor: &Arc<Actor>, trigger: &'static str) -> bool {
        if self.cfg.no_run || self.is_draining() {
            return false;
        }
        let cancel = {
            let mut f = lock(&actor.run);
            if f.running {
                f.again = true;
                return true;
            }
            f.running = true;
            f.again = false;
            f.in_tool = false;
            let c = self.shutdown.child_token();
            f.cancel = Some(c.clone());
            c
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

    async fn run_loop(
        self: Arc<Self>,
        actor: Arc<Actor>,
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
        let mut cfg = self.cfg.runner.clone();
        cfg.workspace = actor.workspace.clone();
        let _ = std::fs::create_dir_all(&cfg.workspace);
        let runner = Runner::new(cfg).map(|r| r.with_toolbox(self.cfg.toolbox.clone()));
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
            let outcome = match &r {
                Ok(RunOutcome::Idle) => "idle",
                Ok(RunOutcome::MaxTurns) => "max_turns",
                Ok(RunOutcome::Cancelled) => "cancelled",
                Ok(RunOutcome::Failed { .. }) => "failed",
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
            break;
        }
        self.running.fetch_sub(1, Ordering::SeqCst);
    }

    fn observe(&self, actor: &Actor, ev: RunEvent<'_>, cancel: &CancellationToken) {
        match ev {
            RunEvent::Record {
                seq,
                ts,
                kind,
                data,
            } => {
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
            RunEvent::Text(_) | RunEvent::Reasoning(_) => {}
        }
    }

    /// Startup: classify every session from its tail and re-queue the ones cut off. A session
    /// whose writer lock is held elsewhere is left alone. Marks the hub ready.
    pub async fn recover(self: &Arc<Self>) -> anyhow::Result<RecoveryReport> {
        let t0 = Instant::now();
        let hub = self.clone();
        let list = tokio::task::spawn_blocking(move || hub.store.list()).await??;
        let mut report = RecoveryReport {
            scanned: list.len(),
            ..Default::default()
        };
        let candidates: Vec<String> = list
            .into_iter()
            .filter(|s| {
                if s.status == Status::Running {
                    report.held_elsewhere += 1;
                }
                matches!(
                    s.status,
                    Status::Interrupted | Status::Pending | Status::Stopped
                )
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
                (id.clone(), hub.actor(&id).await)
            });
        }
        while let Some(j) = set.join_next().await {
            let Ok((id, r)) = j else { continue };
            match r {
                Ok(actor) => {
                    let owed = lock(&actor.session).state().owes_work();
                    if owed {
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

    /// True when the store has a session `id` (one that exists but cannot be read counts).
    pub async fn exists(self: &Arc<Self>, id: &str) -> ApiResult<bool> {
        let hub = self.clone();
        let idc = id.to_string();
        let r = tokio::task::spawn_blocking(move || hub.store.summary(&idc))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
        match r {
            Ok(_) => Ok(true),
            Err(SessionError::NotFound { .. })
            | Err(SessionError::Ledger(lazarus_ledger::LedgerError::NotFound { .. })) => Ok(false),
            Err(e @ SessionError::Backend(_)) => Err(e.into()),
            Err(_) => Ok(true),
        }
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
        failed: &mut std::collections::HashSet<String>,
    ) -> anyhow::Result<TakeoverReport> {
        let mut report = TakeoverReport::default();
        if self.is_draining() || self.cfg.no_run {
            return Ok(report);
        }
        let hub = self.clone();
        let list = tokio::task::spawn_blocking(move || hub.store.list()).await??;
        report.scanned = list.len();
        let candidates: Vec<String> = {
            let actors = lock(&self.actors);
            list.into_iter()
                .filter(|s| {
                    matches!(
                        s.status,
                        Status::Interrupted | Status::Pending | Status::Stopped
                    ) && !actors.contains_key(&s.id)
                })
                .map(|s| s.id)
                .collect()
        };
        for id in candidates {
            if self.is_draining() {
                break;
            }
            match self.actor(&id).await {
                Ok(actor) => {
                    failed.remove(&id);
                    let owed = lock(&actor.session).state().owes_work();
                    if owed && self.schedule(&actor, "gateway-takeover") {
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

    /// SIGTERM: no new runs; sessions not inside a tool call stop now, a running tool call
    /// may finish within `timeout`; then everything left is cancelled. Every stop is recorded
    /// by the runner (`interrupted`), so every session stays resumable.
    pub async fn drain(&self, timeout: Duration) {
        self.draining.store(true, Ordering::SeqCst);
        let actors: Vec<Arc<Actor>> = lock(&self.actors)
            .values()
            .filter_map(|c| c.get().cloned())
            .collect();
        for a in &actors {
            let f = lock(&a.run);
            if f.running
                && !f.in_tool
                && let Some(c) = &f.cancel
            {
                c.cancel();
            }
        }
        self.runs.close();
        if tokio::time::timeout(timeout, self.runs.wait())
            .await
            .is_err()
        {
            tracing::warn!("drain budget spent: cancelling the tool calls still running");
            self.shutdown.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(30), self.runs.wait()).await;
        }
        self.shutdown.cancel();
    }

    /// Status for listings: the live one for sessions open here.
    pub fn live_status(&self, id: &str) -> Option<Status> {
        let a = self.open_actor(id)?;
        if a.is_running() {
            return Some(Status::Running);
        }
        let s = lock(&a.session);
        Some(s.state().status())
    }

    /// A copy of the state: the live one if open here, else replayed from the store.
    pub async fn state(self: &Arc<Self>, id: &str) -> ApiResult<(SessionState, bool)> {
        lazarus_ledger::validate_id(id)?;
        if let Some(a) = self.open_actor(id) {
            let running = a.is_running();
            let st = tokio::task::spawn_blocking(move || lock(&a.session).state().clone())
                .await
                .map_err(|e| ApiError::internal(e.to_string()))?;
            return Ok((st, running));
        }
        let hub = self.clone();
        let id = id.to_string();
        let st = tokio::task::spawn_blocking(move || hub.store.load(&id))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))??;
        Ok((st, false))
    }

    /// Stops everything at once (tests, second signal).
    pub fn cancel_all(&self) {
        self.shutdown.cancel();
    }

    /// Locks the session (for a short read).
    pub fn with_state<R>(actor: &Actor, f: impl FnOnce(&SessionState) -> R) -> R {
        f(lock(&actor.session).state())
    }
}
