//! Download a session's exact JSON Lines (what `lazarus sessions export` writes), streamed.

use std::io::Write;

use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use lazarus_session::{SessionError, SessionId};
use tokio::sync::mpsc;

use crate::WebState;

/// Bytes per chunk sent to the client.
const CHUNK: usize = 64 * 1024;

/// A `Write` that hands chunks to the response body; blocks while the client is slow.
struct ToBody {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buf: Vec<u8>,
}

impl ToBody {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "client went away"))
    }
}

impl Write for ToBody {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

pub async fn download(
    State(web): State<WebState>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let id = match id
        .map_err(|e| e.body_text())
        .and_then(|Path(raw)| SessionId::parse(&raw).map_err(|e| e.to_string()))
    {
        Ok(id) => id,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
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
    let (tx, mut rx) = mpsc::channel(4);
    let store = web.cfg.store.clone();
    let idc = id.clone();
    tokio::task::spawn_blocking(move || {
        let mut w = ToBody {
            tx,
            buf: Vec::with_capacity(CHUNK),
        };
        let r = store.export_to(&idc, &mut w);
        match r {
            Ok(_) => {
                let _ = w.flush();
            }
            // the body ends with an error: the client sees a failed download, never a short
            // file that looks whole
            Err(e) => {
                tracing::warn!(session = %idc, error = %e, "export for the web view failed");
                let _ =
                    w.tx.blocking_send(Err(std::io::Error::other(e.to_string())));
            }
        }
    });
    let body = Body::from_stream(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let disposition = format!("attachment; filename=\"{id}.jsonl\"");
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/jsonl"),
    );
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    resp
}
