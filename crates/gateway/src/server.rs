//! The HTTP/1.1 server loop (hyper): connections under a cap, with a header timeout and an
//! idle timeout, so that neither idle nor slow clients can use up the process's file
//! descriptors.
//!
//! - At most `max_connections` connections are served. A few more
//!   ([`crate::fds::overflow_for`]) are still read, one request each: `/healthz` is answered
//!   and everything else gets `429 too_many_connections` with `Retry-After`. Beyond those, a
//!   new connection is closed at once. No descriptor is held for a connection the gateway will
//!   not serve.
//! - `header_timeout`: a request head must arrive within it, counted from when the server
//!   starts waiting for one: so a keep-alive connection waiting for its next request is closed
//!   after it too (hyper's `header_read_timeout`).
//! - `idle_timeout`: a connection on which no byte moves either way for that long is closed
//!   (a stalled request body, a live tail whose client stopped reading). Live tails send a
//!   comment well within it.
//! - Running out of descriptors in `accept` pauses accepting briefly instead of spinning.

use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{ApiError, out_of_descriptors};
use crate::hub::Hub;

/// How connections are limited (from [`crate::Limits`]).
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
}

/// Requests on a connection over the cap get at most this long for their head.
const OVERFLOW_HEADER_TIMEOUT: Duration = Duration::from_secs(2);

/// Pause after `accept` failed for want of descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// What connections over the cap are answered: health, and 429 for everything else.
fn overflow_router() -> Router {
    Router::new()
        .route("/healthz", get(crate::api::healthz))
        .fallback(|| async {
            ApiError::busy(
                "too_many_connections",
                "too many connections are open to this gateway (limit --max-connections); retry, or reuse a keep-alive connection",
                1,
            )
        })
}

/// Serves `app` on `listener` until `stop`; then stops accepting, lets every connection
/// finish its request in flight (keep-alive ones close after it), and returns once all are
/// closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    hub: Arc<Hub>,
    stop: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let overflow = Arc::new(Semaphore::new(crate::fds::overflow_for(
        limits.max_connections,
    )));
    let refuse = overflow_router();
    let conns = TaskTracker::new();
    let mut last_warned: Option<Instant> = None;
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => break,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    if out_of_descriptors(&e) {
                        if last_warned.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                            tracing::warn!(error = %e, "cannot accept connections: out of file descriptors (raise `ulimit -n`, or lower --max-connections / --max-open-sessions)");
                            last_warned = Some(Instant::now());
                        }
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                    continue;
                }
            },
        };
        let (service, permit, header_timeout, keep_alive) =
            if let Ok(p) = slots.clone().try_acquire_owned() {
                (app.clone(), p, limits.header_timeout, true)
            } else if let Ok(p) = overflow.clone().try_acquire_owned() {
                hub.metrics.connection_refused("answered");
                (
                    refuse.clone(),
                    p,
                    limits.header_timeout.min(OVERFLOW_HEADER_TIMEOUT),
                    false,
                )
            } else {
                hub.metrics.connection_refused("closed");
                drop(stream);
                continue;
            };
        let _ = stream.set_nodelay(true);
        let stop = stop.clone();
        let hub = hub.clone();
        conns.spawn(async move {
            let _permit = permit;
            hub.metrics.connection_open(1);
            let io = Watched::new(stream);
            let activity = io.activity.clone();
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(keep_alive);
            let mut conn =
                pin!(builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service)));
            let mut idle = pin!(activity.idle_for(limits.idle_timeout));
            let mut stopping = false;
            loop {
                tokio::select! {
                    r = conn.as_mut() => {
                        if let Err(e) = r {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                        break;
                    }
                    _ = &mut idle => {
                        hub.metrics.connection_idle_closed();
                        break;
                    }
                    _ = stop.cancelled(), if !stopping => {
                        stopping = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
            hub.metrics.connection_open(-1);
        });
    }
    drop(listener);
    conns.close();
    conns.wait().await;
}

/// When bytes last moved on a connection.
struct Activity {
    start: Instant,
    /// Milliseconds after `start`.
    last_ms: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Resolves once nothing has moved for `idle`.
    async fn idle_for(self: Arc<Self>, idle: Duration) {
        loop {
            let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = last + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// A TCP stream that notes every byte read or written.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl Watched {
    fn new(inner: TcpStream) -> Self {
        Watched {
            inner,
            activity: Arc::new(Activity {
                start: Instant::now(),
                last_ms: AtomicU64::new(0),
            }),
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
