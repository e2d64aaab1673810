//! Housekeeping of open sessions, every [`INBOX_POLL`]: messages that reach a session
//! through its inbox rather than this gateway's own API (delivered by `lazarus sessions
//! send`, boot-resume, or another gateway; see the session crate's `inbox`) get a run —
//! the runner drains the inbox at every step — and sessions idle for `--idle-close` are
//! closed, so memory, descriptors and database leases follow the *active* sessions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lazarus_session::{InboxMessage, SessionId};

use crate::error::{ApiError, ApiResult};
use crate::hub::Hub;
use crate::registry::lock;

/// How often the sessions open here (and not running) are checked for mail.
pub const INBOX_POLL: Duration = Duration::from_millis(250);

/// Sessions with mail opened at once by one pass (each open is a replay and a drain).
const MAIL_OPENS: usize = 32;

impl Hub {
    /// Delivers a message to the inbox of a session another writer holds: durable when this
    /// returns; that writer records it (exactly once per message id). Returns whether a
    /// message with this id was waiting already.
    pub async fn deliver(self: &Arc<Self>, id: &SessionId, msg: InboxMessage) -> ApiResult<bool> {
        let hub = self.clone();
        let id = id.clone();
        crate::memory::spawn_blocking(move || {
            crate::fds::check_headroom("delivering a message")?;
            Ok(hub.store.deliver(&id, &msg)?.duplicate)
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
    }

    /// One pass: every session with mail is driven (trigger `inbox`): one open here and idle
    /// at once (a running one drains its inbox itself), one open nowhere after opening it
    /// here — opening records what waits, before anything else — up to [`MAIL_OPENS`] at a
    /// time; one another writer holds is left to that writer (and, for a lease, not knocked
    /// at again before it runs out). Returns how many were started.
    pub async fn inbox_tick(self: &Arc<Self>) -> usize {
        if self.is_draining() || self.cfg.no_run {
            return 0;
        }
        let hub = self.clone();
        let with_mail =
            match crate::memory::spawn_blocking(move || hub.store.sessions_with_mail()).await {
                Ok(Ok(ids)) => ids,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot look for inbox mail; trying again");
                    return 0;
                }
                Err(_) => return 0,
            };
        let now = Instant::now();
        {
            let mut wait = lock(&self.mail_not_before);
            wait.retain(|id, until| *until > now && with_mail.contains(id));
        }
        let mut set = tokio::task::JoinSet::new();
        let opens = Arc::new(tokio::sync::Semaphore::new(MAIL_OPENS));
        let mut started = 0;
        for id in with_mail {
            if self.is_draining() {
                break;
            }
            if lock(&self.mail_not_before).contains_key(&id) {
                continue;
            }
            match self.registry.get(id.as_str()) {
                Some(a) if a.is_running() => continue,
                Some(a) => {
                    if self.schedule(&a, "inbox") {
                        started += 1;
                    }
                    continue;
                }
                None => {}
            }
            let hub = self.clone();
            let Ok(permit) = opens.clone().acquire_owned().await else {
                break;
            };
            set.spawn(async move {
                let _permit = permit;
                let r = hub.session(&id).await;
                (id, r)
            });
        }
        // Opening records what waits; the runs start once every open of the pass is done,
        // so that recording comes first when many sessions have mail at once (a takeover).
        let mut opened = Vec::new();
        while let Some(j) = set.join_next().await {
            let Ok((id, r)) = j else { continue };
            match r {
                Ok(actor) => opened.push(actor),
                // held by another writer: it drains its own inbox; a lease, until it runs out
                Err(e) if e.code == "locked" => {
                    if let Some(ms) = e.lease_ends_ms {
                        let until = Instant::now() + Duration::from_millis(ms);
                        lock(&self.mail_not_before).insert(id, until);
                    }
                }
                Err(e) if e.code == "not_found" => {}
                // no slot: the mail waits, durable, until idle sessions close
                Err(e) if e.code == "too_many_open_sessions" => {}
                Err(e) => {
                    tracing::warn!(session = %id, error = %e.message, "cannot open a session with mail");
                }
            }
        }
        for actor in opened {
            if self.schedule(&actor, "inbox") {
                started += 1;
            }
        }
        started
    }

    /// Closes the sessions idle for `--idle-close`: their writers (locks, leases), descriptors
    /// and memory are released, off the async workers. Returns how many were closed.
    pub async fn close_idle(self: &Arc<Self>) -> usize {
        let Some(idle) = self.cfg.limits.idle_close else {
            return 0;
        };
        let closed = self.registry.take_idle(idle);
        let n = closed.len();
        if n > 0 {
            let _ = crate::memory::spawn_blocking(move || {
                drop(closed);
                crate::memory::freed();
            })
            .await;
            tracing::debug!(closed = n, "closed idle sessions");
        }
        n
    }

    /// Runs [`Hub::inbox_tick`] and [`Hub::close_idle`] every [`INBOX_POLL`] until `stop`
    /// (or the drain), and at once when the store signals a delivery (PostgreSQL's
    /// LISTEN/NOTIFY; the poll stays as the fallback for a signal lost or not sent).
    pub fn spawn_inbox_watch(
        self: &Arc<Self>,
        stop: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let hub = self.clone();
        let rang = Arc::new(tokio::sync::Notify::new());
        let ring = rang.clone();
        let signalled = self
            .store
            .watch_mail(Arc::new(move |_id: Option<&str>| ring.notify_one()));
        tracing::debug!(signalled, "inbox watch started");
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(INBOX_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => {}
                    _ = rang.notified() => hub.metrics.inbox_woken(),
                }
                if hub.is_draining() {
                    return;
                }
                hub.inbox_tick().await;
                if hub.close_idle().await == 0 && crate::memory::trim_owed() {
                    // the last closes of a wave: their frees, trimmed once the rate allows
                    let _ = crate::memory::spawn_blocking(crate::memory::trim_if_owed).await;
                }
            }
        })
    }
}
