//! Which sessions are open in this gateway: one [`OpenSession`] per session, holding its
//! writer for the life of this process (or until closed), opened on first use; and the live
//! channel of every session. Knows nothing of how sessions are opened or run.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use lazarus_agent::provider::CancellationToken;
use lazarus_agent::runner::SharedSession;
use lazarus_session::{SessionId, StoredRecord};
use tokio::sync::{OnceCell, broadcast};

/// What the gateway does with a session.
#[derive(Debug, Clone)]
pub enum WorldVerdict {
    /// Run it in `workspace`, in `world` (recorded by the runner when the session has none).
    Run {
        workspace: PathBuf,
        world: Box<lazarus_session::record::World>,
    },
    /// Leave it alone: the `needs_owner` record says why.
    Leave(lazarus_session::record::NeedsOwner),
}

impl WorldVerdict {
    pub fn leaves(&self) -> Option<&lazarus_session::record::NeedsOwner> {
        match self {
            WorldVerdict::Leave(n) => Some(n),
            WorldVerdict::Run { .. } => None,
        }
    }
}

/// A record as broadcast to live tails.
pub type Live = Arc<StoredRecord>;

/// Records a live channel holds for tails that have not read them yet.
const LIVE_RING: usize = 64;

/// Whether a session runs, and what to do when its run ends.
#[derive(Default)]
pub(crate) struct RunFlags {
    pub(crate) running: bool,
    pub(crate) again: bool,
    pub(crate) in_tool: bool,
    pub(crate) cancel: Option<CancellationToken>,
}

/// One open session.
pub struct OpenSession {
    pub id: SessionId,
    pub session: SharedSession,
    pub workspace: PathBuf,
    /// Whether its world lets it run here (and in which), or why it is left alone.
    pub verdict: WorldVerdict,
    pub(crate) tx: broadcast::Sender<Live>,
    pub(crate) run: Mutex<RunFlags>,
    /// Serialises resume-event decisions.
    pub event_lock: tokio::sync::Mutex<()>,
    /// When it was last used (an input, the end of a run): idle sessions are closed.
    pub(crate) last_active: Mutex<Instant>,
}

impl OpenSession {
    pub fn is_running(&self) -> bool {
        lock(&self.run).running
    }

    /// Marks the session used now.
    pub(crate) fn touch(&self) {
        *lock(&self.last_active) = Instant::now();
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A place for a session being opened: filled once the store has opened it.
pub(crate) type Slot = Arc<OnceCell<Arc<OpenSession>>>;

/// The open sessions and the live channels.
#[derive(Default)]
pub(crate) struct Registry {
    open: Mutex<HashMap<SessionId, Slot>>,
    channels: Mutex<HashMap<SessionId, broadcast::Sender<Live>>>,
}

impl Registry {
    /// Sessions open (or being opened).
    pub(crate) fn count(&self) -> usize {
        lock(&self.open).len()
    }

    /// The open session `id`, if it is open here.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<OpenSession>> {
        lock(&self.open).get(id).and_then(|c| c.get().cloned())
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        lock(&self.open).contains_key(id)
    }

    /// Every session open here.
    pub(crate) fn all(&self) -> Vec<Arc<OpenSession>> {
        lock(&self.open)
            .values()
            .filter_map(|c| c.get().cloned())
            .collect()
    }

    /// The slot of `id`, made if missing; `Err(open)` when `max` sessions are open already.
    pub(crate) fn slot(&self, id: &SessionId, max: usize) -> Result<Slot, usize> {
        let mut m = lock(&self.open);
        if let Some(c) = m.get(id) {
            return Ok(c.clone());
        }
        if m.len() >= max {
            return Err(m.len());
        }
        let c = Slot::default();
        m.insert(id.clone(), c.clone());
        Ok(c)
    }

    /// Forgets `slot` of `id` if opening it failed (nobody filled it).
    pub(crate) fn forget_failed(&self, id: &SessionId, slot: &Slot) {
        let mut m = lock(&self.open);
        if m.get(id)
            .is_some_and(|c| Arc::ptr_eq(c, slot) && !c.initialized())
        {
            m.remove(id);
        }
    }

    /// Forgets `open` (its writer goes once the last request using it is done).
    pub(crate) fn remove(&self, open: &Arc<OpenSession>) {
        let mut m = lock(&self.open);
        if m.get(&open.id)
            .and_then(|c| c.get())
            .is_some_and(|a| Arc::ptr_eq(a, open))
        {
            m.remove(&open.id);
        }
    }

    /// Keeps `open` (a session just created here).
    pub(crate) fn insert(&self, open: Arc<OpenSession>) {
        lock(&self.open).insert(
            open.id.clone(),
            Arc::new(OnceCell::new_with(Some(open.clone()))),
        );
    }

    /// Takes out of the registry every session idle for `idle` or longer: not running, not
    /// used by anyone but the registry (a request holding it keeps it open). Returns them,
    /// for the caller to drop (which releases their writers) off the async workers. Their
    /// live channels go too when nobody listens.
    pub(crate) fn take_idle(&self, idle: Duration) -> Vec<Arc<OpenSession>> {
        let mut out = Vec::new();
        let mut m = lock(&self.open);
        m.retain(|_, slot| {
            let Some(a) = slot.get() else { return true };
            // 2: the slot's own Arc, and the one `slot` in this closure borrows through
            // the map (none other: no request, run or stream holds it)
            let unused = Arc::strong_count(a) == 1 && Arc::strong_count(slot) == 1;
            if unused && !a.is_running() && lock(&a.last_active).elapsed() >= idle {
                out.push(a.clone());
                false
            } else {
                true
            }
        });
        drop(m);
        if !out.is_empty() {
            let mut ch = lock(&self.channels);
            for a in &out {
                if ch.get(&a.id).is_some_and(|t| t.receiver_count() == 0) {
                    ch.remove(&a.id);
                }
            }
        }
        out
    }

    /// The live channel of a session (made on first use). Its ring is allocated whole when
    /// the channel is made, for every open session, so it is small: a tail that falls
    /// further behind is told it lagged and reads the records from the store instead.
    pub(crate) fn channel(&self, id: &SessionId) -> broadcast::Sender<Live> {
        lock(&self.channels)
            .entry(id.clone())
            .or_insert_with(|| broadcast::channel(LIVE_RING).0)
            .clone()
    }
}
