//! Messages that reach a session through its inbox rather than through this gateway's own
//! API: delivered by `lazarus sessions send`, boot-resume, or another gateway while this one
//! holds the session (see the session crate's `inbox`). The runner drains the inbox at every
//! step of a run; this pass starts a run for an idle session here whose inbox has mail.

use std::sync::Arc;
use std::time::Duration;

use lazarus_session::{InboxMessage, SessionId};

use crate::error::{ApiError, ApiResult};
use crate::hub::Hub;

/// How often the sessions open here (and not running) are checked for mail.
pub const INBOX_POLL: Duration = Duration::from_millis(250);

impl Hub {
    /// Delivers a message to the inbox of a session another writer holds: durable when this
    /// returns; that writer records it (exactly once per message id). Returns whether a
    /// message with this id was waiting already.
    pub async fn deliver(self: &Arc<Self>, id: &SessionId, msg: InboxMessage) -> ApiResult<bool> {
        let hub = self.clone();
        let id = id.clone();
        tokio::task::spawn_blocking(move || {
            crate::fds::check_headroom("delivering a message")?;
            Ok(hub.store.deliver(&id, &msg)?.duplicate)
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
    }

    /// One pass: every session open here and idle whose inbox has a message is driven
    /// (trigger `inbox`). Returns how many were started.
    pub async fn inbox_tick(self: &Arc<Self>) -> usize {
        if self.is_draining() || self.cfg.no_run {
            return 0;
        }
        let idle: Vec<_> = self
            .registry
            .all()
            .into_iter()
            .filter(|a| !a.is_running())
            .collect();
        if idle.is_empty() {
            return 0;
        }
        let hub = self.clone();
        let ids: Vec<SessionId> = idle.iter().map(|a| a.id.clone()).collect();
        let with_mail = tokio::task::spawn_blocking(move || {
            ids.into_iter()
                .filter(|id| match hub.store.inbox(id, 1) {
                    Ok(m) => !m.is_empty(),
                    Err(e) => {
                        tracing::warn!(session = %id, error = %e, "cannot read the inbox");
                        false
                    }
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        let mut started = 0;
        for id in with_mail {
            if let Some(actor) = self.registry.get(id.as_str())
                && self.schedule(&actor, "inbox")
            {
                started += 1;
            }
        }
        started
    }

    /// Runs [`Hub::inbox_tick`] every [`INBOX_POLL`] until `stop` (or the drain).
    pub fn spawn_inbox_watch(
        self: &Arc<Self>,
        stop: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let hub = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(INBOX_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                if hub.is_draining() {
                    return;
                }
                hub.inbox_tick().await;
            }
        })
    }
}
