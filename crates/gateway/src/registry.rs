//! Which sessions are open in this gateway: one [`OpenSession`] per session, holding its
//! writer for the life of this process (or until closed), opened on first use.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use lazarus_agent::runner::SharedSession;
use lazarus_session::{Session, SessionState};
use tokio::sync::{OnceCell, broadcast};

use crate::error::{ApiError, ApiResult};

use crate::hub::{Hub, Live};
use crate::scheduler::RunFlags;

/// One open session.
pub struct OpenSession {
    pub id: String,
    pub session: SharedSession,
    pub workspace: PathBuf,
    pub(crate) tx: broadcast::Sender<Live>,
    pub(crate) run: Mutex<RunFlags>,
    /// Serialises resume-event decisions.
    pub event_lock: tokio::sync::Mutex<()>,
}

impl OpenSession {
    pub fn is_running(&self) -> bool {
        lock(&self.run).running
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Hub {
    pub fn open_count(&self) -> usize {
        lock(&self.actors).len()
    }

    /// The open session `id`, opening it (taking its writer lock) if needed.
    pub async fn session(self: &Arc<Self>, id: &str) -> ApiResult<Arc<OpenSession>> {
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
                tokio::task::spawn_blocking(move || h.store.open(&idc).map(|s| h.wrap_open(s)))
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
    pub fn session_if_open(&self, id: &str) -> Option<Arc<OpenSession>> {
        lock(&self.actors).get(id).and_then(|c| c.get().cloned())
    }

    pub(crate) fn wrap_open(&self, s: Session) -> Arc<OpenSession> {
        let id = s.id().to_string();
        let workspace = self
            .workspaces()
            .for_existing_session(s.state().header.meta.as_ref(), &id);
        Arc::new(OpenSession {
            tx: self.channel(&id),
            id,
            session: Arc::new(Mutex::new(s)),
            workspace,
            run: Mutex::new(RunFlags::default()),
            event_lock: tokio::sync::Mutex::new(()),
        })
    }

    /// Locks the session (for a short read).
    pub fn with_state<R>(actor: &OpenSession, f: impl FnOnce(&SessionState) -> R) -> R {
        f(lock(&actor.session).state())
    }
}
