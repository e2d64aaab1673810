//! Server-sent events: one event (`event:` name and `data:`), and a streaming body that plays
//! events with pauses and then finishes, hangs, breaks the connection or sends an error event.
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::Response;
use tokio::sync::watch;

/// One SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (chat completions sends none).
    pub event: Option<String>,
    /// The `data:` payload (one line of JSON, or `[DONE]`).
    pub data: String,
}

impl SseEvent {
    /// A `data:`-only event.
    pub fn data(data: impl Into<String>) -> Self {
        SseEvent {
            event: None,
            data: data.into(),
        }
    }

    /// An event with a name.
    pub fn named(event: &str, data: impl Into<String>) -> Self {
        SseEvent {
            event: Some(event.to_string()),
            data: data.into(),
        }
    }

    /// The bytes on the wire.
    pub fn encode(&self) -> String {
        match &self.event {
            Some(e) => format!("event: {e}\ndata: {}\n\n", self.data),
            None => format!("data: {}\n\n", self.data),
        }
    }
}

/// What happens after the scripted events are sent.
pub enum Then {
    /// The response ends normally.
    Finish,
    /// Nothing more is sent until the server shuts down.
    Hang,
    /// The connection breaks (no terminating chunk).
    Drop,
    /// One more event (an API error), then the response ends.
    Error(SseEvent),
}

/// A `text/event-stream` response playing `events`, `delay_ms` apart, then `then`.
pub fn stream(
    events: Vec<SseEvent>,
    then: Then,
    delay_ms: u64,
    shutdown: watch::Receiver<bool>,
) -> Response {
    struct St {
        events: std::vec::IntoIter<SseEvent>,
        then: Option<Then>,
        first: bool,
        delay_ms: u64,
        shutdown: watch::Receiver<bool>,
    }
    let st = St {
        events: events.into_iter(),
        then: Some(then),
        first: true,
        delay_ms,
        shutdown,
    };
    let body = futures_util::stream::unfold(st, |mut st| async move {
        if let Some(ev) = st.events.next() {
            if !st.first && st.delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(st.delay_ms)).await;
            }
            st.first = false;
            let item: Result<Bytes, std::io::Error> = Ok(Bytes::from(ev.encode()));
            return Some((item, st));
        }
        match st.then.take()? {
            Then::Finish => None,
            Then::Error(ev) => {
                let item: Result<Bytes, std::io::Error> = Ok(Bytes::from(ev.encode()));
                Some((item, st))
            }
            Then::Hang => {
                let _ = st.shutdown.wait_for(|s| *s).await;
                let item: Result<Bytes, std::io::Error> =
                    Err(std::io::Error::other("server shut down"));
                Some((item, st))
            }
            Then::Drop => {
                let item: Result<Bytes, std::io::Error> =
                    Err(std::io::Error::other("scripted connection drop"));
                Some((item, st))
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| {
            let mut r = Response::new(Body::from("cannot build the event stream"));
            *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            r
        })
}
