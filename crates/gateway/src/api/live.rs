//! The live tail of a session (SSE): catch up from the store, then follow the hub's channel,
//! reading the store again on a gap.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use lazarus_session::{SessionId, StoredRecord};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::AppState;
use super::helpers::{blocking, check_cursor, path_id};
use crate::error::{ApiError, ApiResult};
use crate::hub::Hub;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StreamQuery {
    after: Option<u64>,
}

struct Tail {
    hub: Arc<Hub>,
    id: SessionId,
    rx: broadcast::Receiver<Arc<StoredRecord>>,
    last: u64,
    buf: VecDeque<Arc<StoredRecord>>,
    /// The store may hold more than the last catch-up page.
    more: bool,
    stop: CancellationToken,
    /// An event owed right after the last one (the status a record brings about).
    then: Option<Event>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Tail {
    async fn catch_up(&mut self) -> ApiResult<()> {
        let hub = self.hub.clone();
        let id = self.id.clone();
        let after = self.last;
        let page = hub.cfg.limits.max_page;
        let recs = blocking(move || Ok(hub.store.records(&id, after, page)?)).await?;
        self.more = recs.len() == page;
        self.buf.extend(recs.into_iter().map(Arc::new));
        Ok(())
    }

    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        loop {
            if let Some(ev) = self.then.take() {
                return Some((Ok(ev), self));
            }
            if let Some(r) = self.buf.pop_front() {
                if r.seq <= self.last {
                    continue;
                }
                self.last = r.seq;
                let ev = Event::default()
                    .id(r.seq.to_string())
                    .event("record")
                    .data(serde_json::to_string(&*r).unwrap_or_default());
                if r.kind == "approval_request" {
                    // the session now waits for a person: said as a status too
                    self.then = Some(
                        Event::default().id(r.seq.to_string()).event("status").data(
                            serde_json::json!({
                                "status": lazarus_session::Status::AwaitingApproval,
                                "seq": r.seq,
                                "call_id": r.data["call_id"],
                                "tool": r.data["tool"],
                            })
                            .to_string(),
                        ),
                    );
                }
                return Some((Ok(ev), self));
            }
            if self.more {
                self.catch_up().await.ok()?;
                continue;
            }
            tokio::select! {
                _ = self.stop.cancelled() => return None,
                m = self.rx.recv() => match m {
                    Ok(r) if Some(r.seq) == self.last.checked_add(1) => self.buf.push_back(r),
                    Ok(r) if r.seq <= self.last => {}
                    // a gap (records reported out of order, or before we subscribed): read
                    // the durable records from the store
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.catch_up().await.ok()?;
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    }
}

pub(super) async fn stream(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    q: Result<Query<StreamQuery>, QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let Query(q) = q.map_err(|e| ApiError::bad_query(e.body_text()))?;
    let (after, what) = match headers.get("last-event-id") {
        Some(v) => (
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "bad_last_event_id",
                        "Last-Event-ID must be a record seq (a decimal number below 2^64)",
                    )
                })?,
            "Last-Event-ID",
        ),
        None => (q.after.unwrap_or(0), "after"),
    };
    // Not found, unreadable, or the check failed: each says so (404, 422, 5xx).
    let last = st.hub.summary(&id).await?.records;
    check_cursor(after, last, what)?;
    let permit = st.hub.streams.clone().try_acquire_owned().map_err(|_| {
        ApiError::busy(
            "too_many_streams",
            "too many live tails are open (limit --max-streams)",
            5,
        )
    })?;
    let rx = st.hub.channel(&id).subscribe();
    let mut tail = Tail {
        hub: st.hub.clone(),
        id,
        rx,
        last: after,
        buf: VecDeque::new(),
        more: false,
        stop: st.stop.clone(),
        then: None,
        _permit: permit,
    };
    tail.catch_up().await?;
    let s = futures_util::stream::unfold(tail, |t| t.next());
    Ok(sse(s, st.hub.cfg.limits.idle_timeout).into_response())
}

/// A live tail; its keep-alive comments come well within the idle timeout, so a client that
/// reads is never taken for idle.
fn sse<S: Stream<Item = Result<Event, Infallible>> + Send + 'static>(
    s: S,
    idle_timeout: Duration,
) -> impl IntoResponse {
    let every = Duration::from_secs(15)
        .min(idle_timeout / 3)
        .max(Duration::from_millis(100));
    Sse::new(s).keep_alive(KeepAlive::new().interval(every))
}
