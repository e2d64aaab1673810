//! The live tail of `lazarus ui` (read-only: no gateway to announce records): polls the
//! store for records after the last one sent. Same events as the gateway's
//! `GET /v1/sessions/{id}/stream` (`id: <seq>`, `event: record`, the record as data), and the
//! same resumption: `Last-Event-ID` (or `?after=`) names the last record the client has.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use lazarus_session::{SessionError, SessionId, StoredRecord};
use serde::Deserialize;

use crate::{Mode, WebState};

/// Records read per poll at most.
const POLL_PAGE: usize = 500;

#[derive(Debug, Deserialize)]
pub struct LiveQuery {
    after: Option<u64>,
}

struct Tail {
    web: WebState,
    id: SessionId,
    last: u64,
    buf: VecDeque<StoredRecord>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Tail {
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        loop {
            if let Some(r) = self.buf.pop_front() {
                if r.seq <= self.last {
                    continue;
                }
                self.last = r.seq;
                let ev = Event::default()
                    .id(r.seq.to_string())
                    .event("record")
                    .data(serde_json::to_string(&r).unwrap_or_default());
                return Some((Ok(ev), self));
            }
            let store = self.web.cfg.store.clone();
            let (id, after) = (self.id.clone(), self.last);
            let recs = tokio::task::spawn_blocking(move || store.records(&id, after, POLL_PAGE))
                .await
                .ok()?
                .ok()?;
            if recs.is_empty() {
                tokio::select! {
                    _ = self.web.cfg.stop.cancelled() => return None,
                    _ = tokio::time::sleep(self.web.cfg.limits.poll_interval) => {}
                }
            }
            self.buf.extend(recs);
        }
    }
}

pub async fn stream(
    State(web): State<WebState>,
    id: Result<Path<String>, PathRejection>,
    q: Result<Query<LiveQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    if let Mode::Gateway(_) = web.cfg.mode {
        return (
            StatusCode::NOT_FOUND,
            "the gateway's live tail is GET /v1/sessions/{id}/stream\n",
        )
            .into_response();
    }
    let id = match id
        .map_err(|e| e.body_text())
        .and_then(|Path(raw)| SessionId::parse(&raw).map_err(|e| e.to_string()))
    {
        Ok(id) => id,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    };
    let after = match headers.get("last-event-id") {
        Some(v) => match v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()) {
            Some(n) => n,
            None => {
                return (
                    StatusCode::BAD_REQUEST,
                    "Last-Event-ID must be a record seq\n",
                )
                    .into_response();
            }
        },
        None => match q {
            Ok(Query(q)) => q.after.unwrap_or(0),
            Err(e) => return (StatusCode::BAD_REQUEST, e.body_text()).into_response(),
        },
    };
    let store = web.cfg.store.clone();
    let idc = id.clone();
    match tokio::task::spawn_blocking(move || store.summary(&idc)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e @ SessionError::NotFound { .. })) => {
            return (StatusCode::NOT_FOUND, format!("{e}\n")).into_response();
        }
        Ok(Err(e)) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
    let Ok(permit) = web.streams.clone().try_acquire_owned() else {
        let mut r = (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live tails are open; try again shortly\n",
        )
            .into_response();
        r.headers_mut()
            .insert("retry-after", axum::http::HeaderValue::from_static("5"));
        return r;
    };
    let tail = Tail {
        web,
        id,
        last: after,
        buf: VecDeque::new(),
        _permit: permit,
    };
    let s = futures_util::stream::unfold(tail, |t| t.next());
    Sse::new(s)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
