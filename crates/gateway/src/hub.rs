//! The sessions a gateway hosts: the [`Hub`] with its configuration and limits, and what it
//! does with inputs (appended off the async workers, through the session's own exactly-once
//! rule), creation, live record fan-out and drain. Its other rooms: which sessions are open
//! ([`crate::registry`]), when they run ([`crate::scheduler`]), what is resumed at start and
//! taken over from gateways that are gone ([`crate::recovery`]), and where their workspaces are
//! ([`crate::workspace`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lazarus_agent::provider::CancellationToken;
use lazarus_agent::runner::{RunnerConfig, sandbox_record};
use lazarus_agent::tools::Toolbox;
use lazarus_session::record::{Control, Input};
use lazarus_session::{
    CreateOptions, Record, Session, SessionError, SessionId, SessionState, SessionSummary,
    SharedStore, Status, StoredRecord,
};
use serde_json::json;
use tokio::sync::{Semaphore, broadcast};
use tokio_util::task::TaskTracker;

use crate::error::{ApiError, ApiResult};
use crate::metrics::Metrics;
use crate::workspace::WorkspacePolicy;

use crate::registry::{Live, OpenSession, Registry, RunFlags, lock};

/// What a failed summary says about whether a session is there: `Some(false)` for not found,
/// `Some(true)` for a name that is taken by something unreadable, `None` when the check
/// itself failed and says nothing.
fn presence(e: &SessionError) -> Option<bool> {
    use lazarus_ledger::LedgerError as L;
    match e {
        SessionError::NotFound { .. } | SessionError::Ledger(L::NotFound { .. }) => Some(false),
        SessionError::Replay { .. }
        | SessionError::Ledger(
            L::Corrupt(_)
            | L::NoHeader { .. }
            | L::UnsupportedVersion { .. }
            | L::WrongFormat { .. }
            | L::NotRegularFile { .. }
            | L::InvalidId { .. },
        ) => Some(true),
        _ => None,
    }
}

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
    /// HTTP connections served at once (see [`crate::server`]).
    pub max_connections: usize,
    /// Time a client has to send a request head (also the longest wait for the next
    /// request on a keep-alive connection).
    pub header_timeout: Duration,
    /// A connection with no byte moving either way for this long is closed.
    pub idle_timeout: Duration,
    /// An open session idle this long (not running, used by no request) is closed, which
    /// releases its writer, lock or lease, descriptors and memory; `None`: never.
    pub idle_close: Option<Duration>,
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
            max_connections: crate::fds::default_max_connections(),
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            idle_close: Some(Duration::from_secs(60)),
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
    /// The world this gateway runs sessions in (its tools, MCP servers, policy and model;
    /// the workspace is each session's): new sessions record it, and a session made
    /// elsewhere runs here only when its recorded world agrees (see [`crate::world`]).
    pub world: lazarus_session::record::World,
    /// Besides `workspace_root`: directories at or beneath which a session's recorded
    /// workspace may be (`--allow-workspace`), canonical.
    pub allowed_workspaces: Vec<PathBuf>,
    /// The flag naming this gateway's store in a `lazarus run` command (`--session-dir DIR`),
    /// for the command a session left alone is resumed with.
    pub store_flag: Option<String>,
}

/// All sessions of one gateway.
pub struct Hub {
    pub store: SharedStore,
    pub cfg: HubConfig,
    pub metrics: Metrics,
    pub(crate) registry: Registry,
    pub(crate) run_slots: Arc<Semaphore>,
    pub(crate) queued: AtomicUsize,
    pub(crate) running: AtomicUsize,
    pub streams: Arc<Semaphore>,
    /// Parent of every run's cancel token.
    pub(crate) shutdown: CancellationToken,
    pub(crate) draining: AtomicBool,
    pub(crate) ready: AtomicBool,
    pub(crate) run_rt: tokio::runtime::Handle,
    pub(crate) runs: TaskTracker,
    /// Sessions with mail whose lease another process holds, and when it runs out: the
    /// inbox pass does not knock before then.
    pub(crate) mail_not_before: Mutex<std::collections::HashMap<SessionId, Instant>>,
    /// Live OpenTelemetry spans, when `OTEL_EXPORTER_OTLP_ENDPOINT` asked for them.
    pub(crate) telemetry: std::sync::OnceLock<lazarus_telemetry::live::Live>,
    /// Sessions left to their owner (world not honoured here), with their last seq then.
    pub(crate) left_alone: Mutex<std::collections::HashMap<SessionId, u64>>,
}

impl Hub {
    pub fn new(store: SharedStore, cfg: HubConfig, run_rt: tokio::runtime::Handle) -> Arc<Self> {
        Arc::new(Hub {
            store,
            run_slots: Arc::new(Semaphore::new(cfg.limits.max_running.max(1))),
            streams: Arc::new(Semaphore::new(cfg.limits.max_streams)),
            cfg,
            metrics: Metrics::default(),
            registry: Registry::default(),
            queued: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            shutdown: CancellationToken::new(),
            draining: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            run_rt,
            runs: TaskTracker::new(),
            mail_not_before: Mutex::new(std::collections::HashMap::new()),
            telemetry: std::sync::OnceLock::new(),
            left_alone: Mutex::new(std::collections::HashMap::new()),
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

    /// The live channel of a session (created on first use).
    pub fn channel(&self, id: &SessionId) -> broadcast::Sender<Live> {
        self.registry.channel(id)
    }

    pub fn open_count(&self) -> usize {
        self.registry.count()
    }

    /// The open session `id`, opening it (taking its writer lock) if needed.
    pub async fn session(self: &Arc<Self>, id: &SessionId) -> ApiResult<Arc<OpenSession>> {
        let slot = self
            .registry
            .slot(id, self.cfg.limits.max_open_sessions)
            .map_err(|open| {
                ApiError::busy(
                    "too_many_open_sessions",
                    format!("{open} sessions are open in this gateway (limit --max-open-sessions)"),
                    5,
                )
            })?;
        let hub = self.clone();
        let idc = id.clone();
        let r = slot
            .get_or_try_init(|| async move {
                let h = hub.clone();
                crate::memory::spawn_blocking(move || {
                    crate::fds::check_headroom("opening a session")?;
                    Ok(h.store.open(&idc).map(|s| h.wrap_open(idc, s))?)
                })
                .await
                .map_err(|e| ApiError::internal(e.to_string()))?
            })
            .await
            .cloned();
        if r.is_err() {
            self.registry.forget_failed(id, &slot);
        }
        r
    }

    /// The session if it is open here.
    pub fn session_if_open(&self, id: &str) -> Option<Arc<OpenSession>> {
        self.registry.get(id)
    }

    /// Keeps `s`, just opened (or created) by the store as `id`, open here, with what its
    /// world allows: where and with what it runs, or that it is left alone.
    pub(crate) fn wrap_open(&self, id: SessionId, s: Session) -> Arc<OpenSession> {
        let verdict = self.world_verdict(&id, s.state());
        let workspace = match &verdict {
            crate::registry::WorldVerdict::Run { workspace, .. } => workspace.clone(),
            crate::registry::WorldVerdict::Leave(_) => s
                .state()
                .world
                .as_ref()
                .and_then(|w| w.world.workspace.clone())
                .map(PathBuf::from)
                .unwrap_or_default(),
        };
        Arc::new(OpenSession {
            last_active: Mutex::new(Instant::now()),
            tx: self.channel(&id),
            id,
            session: Arc::new(Mutex::new(s)),
            workspace,
            verdict,
            run: Mutex::new(RunFlags::default()),
            event_lock: tokio::sync::Mutex::new(()),
        })
    }

    /// Locks the session (for a short read).
    pub fn with_state<R>(actor: &OpenSession, f: impl FnOnce(&SessionState) -> R) -> R {
        f(lock(&actor.session).state())
    }

    /// The operator's workspace policy (see [`crate::workspace`]).
    pub fn workspaces(&self) -> WorkspacePolicy {
        WorkspacePolicy::new(self.cfg.workspace_root.clone())
    }

    /// Creates a session and keeps it open.
    pub async fn create(
        self: &Arc<Self>,
        id: Option<SessionId>,
        workspace: Option<String>,
        system_prompt: Option<String>,
    ) -> ApiResult<Arc<OpenSession>> {
        let id = id.unwrap_or_else(SessionId::new_v7);
        if self.exists(&id).await? {
            return Err(ApiError::conflict(
                "already_exists",
                format!("session {id:?} already exists; a session is never overwritten"),
            ));
        }
        let hub = self.clone();
        let actor = crate::memory::spawn_blocking(move || -> ApiResult<Arc<OpenSession>> {
            // Out of descriptors is answered before anything is made, not half-way through.
            crate::fds::check_headroom("creating a session")?;
            let policy = hub.workspaces();
            let ws = policy.for_new_session(workspace.as_deref(), &id)?;
            let mut world = hub.cfg.world.clone();
            world.workspace = Some(ws.path.to_string_lossy().into_owned());
            let meta = json!({
                "workspace": ws.path,
                "model": hub.cfg.runner.model,
                "sandbox": sandbox_record(&hub.cfg.runner.sandbox),
                "system_prompt": system_prompt.or_else(|| hub.cfg.runner.system_prompt.clone()),
                "world": world,
            });
            match hub.store.create(CreateOptions {
                id: Some(id.clone()),
                meta: Some(meta),
            }) {
                Ok(s) => Ok(hub.wrap_open(id, s)),
                Err(e) => {
                    // no session: no workspace made for it either
                    policy.undo(&ws);
                    Err(e.into())
                }
            }
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))??;
        self.metrics.appended("header");
        // Kept open for its first message, unless this gateway has all the sessions open it
        // may: a new session owes no work, and a message reopens it.
        if self.open_count() < self.cfg.limits.max_open_sessions {
            self.registry.insert(actor.clone());
        }
        Ok(actor)
    }

    /// Records an input through the session's own exactly-once rule
    /// ([`Session::append_input`] / [`Session::append_control`]) and, if it was new, shows it
    /// to live tails. Runs on the blocking pool (write + fdatasync must not stall the async
    /// workers). Returns (seq, duplicate).
    async fn append_once(&self, actor: &Arc<OpenSession>, rec: Record) -> ApiResult<(u64, bool)> {
        let a = actor.clone();
        let t0 = Instant::now();
        actor.touch();
        if let Record::Input(i) = &rec
            && let Some(r) = self.append_input_deferred(actor, i).await
        {
            let r = r?;
            if !r.1 {
                self.metrics.observe_append(t0.elapsed());
            }
            return Ok(r);
        }
        let r = crate::memory::spawn_blocking(move || -> ApiResult<(u64, bool)> {
            let mut s = lock(&a.session);
            let ack = match &rec {
                Record::Input(i) => s.append_input(&i.input_id, &i.source, &i.text)?,
                Record::Control(c) => {
                    s.append_control(&c.input_id, &c.action, c.reason.as_deref())?
                }
                Record::Approval(a) => {
                    s.append_message(&lazarus_session::InboxMessage::approval(a.clone()))?
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

    /// The accept path without a thread hand-off: on this async worker, when the session is
    /// free and nothing else must be recorded first, the input is written, and the request
    /// awaits the shared `syncfs` that makes it durable (see `lazarus_ledger::shared_sync`).
    /// A resend of an input already durable is answered here too. `None`: it cannot go this
    /// way (the session is busy, its inbox holds messages, a duplicate of a record still on
    /// its way to the disk, another backend); nothing was done, take the blocking path.
    async fn append_input_deferred(
        &self,
        actor: &Arc<OpenSession>,
        i: &Input,
    ) -> Option<ApiResult<(u64, bool)>> {
        let deferred = {
            let mut s = actor.session.try_lock().ok()?;
            // a resend of what is durable already: answered here, no thread, no disk
            if let Some(ack) = s.duplicate_if_settled(&i.input_id) {
                return Some(Ok((ack.seq, true)));
            }
            match s.try_append_input_deferred(&i.input_id, &i.source, &i.text) {
                Ok(Some(d)) => d,
                Ok(None) => return None,
                Err(e) => return Some(Err(e.into())),
            }
        };
        let (ack, pending) = deferred;
        let tx = actor.tx.clone();
        let seq = ack.seq;
        let ts = ack.ts.unwrap_or_default();
        let data = Record::Input(i.clone()).data_value();
        // Shown to live tails once durable, before any later record of the session can be.
        let pending = pending.on_durable(move || {
            let _ = tx.send(Arc::new(StoredRecord {
                seq,
                ts,
                kind: "input".to_string(),
                data,
            }));
        });
        // Awaited in the request itself (a task of its own cost a spawn and a wake-up per
        // message: 18–21K/s against 21–23K/s): a request dropped by its client drops the
        // `Deferred`, whose drop waits for the batch on this worker (at most one `syncfs`).
        let r = match pending.await {
            Ok(_) => Ok((seq, false)),
            Err(e) => Err(lazarus_session::SessionError::from(e).into()),
        };
        Some(r)
    }

    /// Records a user message once per `message_id`.
    pub async fn append_input(
        &self,
        actor: &Arc<OpenSession>,
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
        actor: &Arc<OpenSession>,
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

    /// Records a decision on a call waiting for approval, once per call.
    pub async fn append_approval(
        &self,
        actor: &Arc<OpenSession>,
        approval: lazarus_session::record::Approval,
    ) -> ApiResult<(u64, bool)> {
        let r = self.append_once(actor, Record::Approval(approval)).await?;
        if !r.1 {
            self.metrics.appended("approval");
        }
        Ok(r)
    }

    /// True when the store has a session `id`; one that is there but cannot be read (damaged,
    /// not a regular file) counts. When the check itself fails (an I/O error, out of file
    /// descriptors, the database unreachable) the answer is that error, never a guess.
    pub async fn exists(self: &Arc<Self>, id: &SessionId) -> ApiResult<bool> {
        match self.summary(id).await {
            Ok(_) => Ok(true),
            Err(e) => match presence(&e) {
                Some(there) => Ok(there),
                None => Err(e.into()),
            },
        }
    }

    /// The session's summary from the store (header and tail).
    pub async fn summary(self: &Arc<Self>, id: &SessionId) -> Result<SessionSummary, SessionError> {
        let hub = self.clone();
        let idc = id.clone();
        crate::memory::spawn_blocking(move || hub.store.summary(&idc))
            .await
            .map_err(|e| SessionError::Backend(format!("summary task failed: {e}")))?
    }

    /// SIGTERM: no new runs; sessions not inside a tool call stop now, a running tool call
    /// may finish within `timeout`; then everything left is cancelled. Every stop is recorded
    /// by the runner (`interrupted`), so every session stays resumable.
    pub async fn drain(&self, timeout: Duration) {
        self.draining.store(true, Ordering::SeqCst);
        // what every run stopped from here on records: the system stopped it, not a user
        self.cfg.runner.stop_reason.set("shutdown");
        let actors = self.registry.all();
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
        let a = self.session_if_open(id)?;
        if a.is_running() {
            return Some(Status::Running);
        }
        let s = lock(&a.session);
        Some(s.state().status())
    }

    /// A copy of the state: the live one if open here, else replayed from the store.
    pub async fn state(self: &Arc<Self>, id: &SessionId) -> ApiResult<(SessionState, bool)> {
        if let Some(a) = self.session_if_open(id) {
            let running = a.is_running();
            let st = crate::memory::spawn_blocking(move || lock(&a.session).state().clone())
                .await
                .map_err(|e| ApiError::internal(e.to_string()))?;
            return Ok((st, running));
        }
        let hub = self.clone();
        let id = id.clone();
        // Not open here: another writer (a gateway, a `lazarus run`) may hold it, and then it
        // is `running`, as the listing says.
        let (st, held) = crate::memory::spawn_blocking(move || {
            let st = hub.store.load(&id)?;
            // (a session waiting for a person is not running, whoever holds it)
            let held = st.status() != Status::AwaitingApproval
                && hub
                    .store
                    .summary(&id)
                    .is_ok_and(|s| s.status == Status::Running);
            Ok::<_, SessionError>((st, held))
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))??;
        Ok((st, held))
    }

    /// Stops everything at once (tests, second signal).
    pub fn cancel_all(&self) {
        self.shutdown.cancel();
    }
}
