//! Standard input and output as the protocol's lines, written in batches.
//!
//! The SDK's own `Stdio` writes each message through `blocking::Unblock` and waits for its
//! flush: two thread hand-offs per message. A `session/load` of 10,000 messages spent most of
//! its 1.1 s in those wake-ups. Here a writer thread owns stdout ([`Stdout`], for `lazarus
//! acp` and the proxy alike): a write hands it the bytes through a channel and goes on; the
//! thread writes whatever has queued and flushes when the queue is empty, so a burst of
//! updates becomes a few large writes and a lone message still leaves at once.

use std::io::{self, BufRead, Write};
use std::sync::mpsc;
use std::time::Duration;

use agent_client_protocol::Lines;
use futures_util::{Sink, Stream};

/// Lines read from stdin ahead of the protocol.
const READ_AHEAD_LINES: usize = 256;

/// Standard input, and standard output through `out`, as a transport for [`crate::serve`]
/// (keep `out`'s [`Drained`] and wait on it before exiting).
pub fn lines(
    out: Stdout,
) -> Lines<
    impl Sink<String, Error = io::Error> + Send + 'static,
    impl Stream<Item = io::Result<String>> + Send + 'static,
> {
    Lines::new(line_sink(out), stdin_stream())
}

/// The writer thread's end: it has written everything queued, or failed.
pub struct Drained(mpsc::Receiver<()>);

impl Drained {
    /// Waits up to `limit` for the writer to finish (its [`Stdout`] must be dropped, so that
    /// nothing more is queued); whether it did.
    pub fn wait(self, limit: Duration) -> bool {
        !matches!(
            self.0.recv_timeout(limit),
            Err(mpsc::RecvTimeoutError::Timeout)
        )
    }
}

/// Each line and its newline, written to `out`.
fn line_sink(out: Stdout) -> impl Sink<String, Error = io::Error> + Send + 'static {
    futures_util::sink::unfold(out, |mut out, line: String| async move {
        use tokio::io::AsyncWriteExt;
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        out.write_all(&bytes).await?;
        Ok(out)
    })
}

fn stdin_stream() -> impl Stream<Item = io::Result<String>> + Send + 'static {
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<String>>(READ_AHEAD_LINES);
    let spawned = std::thread::Builder::new()
        .name("acp-stdin".into())
        .spawn(move || {
            for line in io::stdin().lock().lines() {
                let stop = line.is_err();
                if tx.blocking_send(line).is_err() || stop {
                    return;
                }
            }
        });
    let first = spawned
        .err()
        .map(|e| io::Error::other(format!("starting the stdin reader: {e}")));
    futures_util::stream::unfold((rx, first), |(mut rx, first)| async move {
        if let Some(e) = first {
            return Some((Err(e), (rx, None)));
        }
        rx.recv().await.map(|line| (line, (rx, None)))
    })
}

/// Bytes queued for stdout before [`Stdout`] makes its writer wait.
pub const QUEUED_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Standard output as a tokio writer whose writes hand the bytes to a writer thread and
/// return (a flush returns at once too: the thread writes and flushes whenever its queue runs
/// empty). The proxy's messages to the editor go through it: tokio's own `stdout()` waits
/// on a blocking-pool round trip for every write and every flush.
pub struct Stdout {
    tx: mpsc::Sender<Vec<u8>>,
    shared: std::sync::Arc<Queue>,
}

#[derive(Default)]
struct Queue {
    bytes: std::sync::atomic::AtomicUsize,
    waker: std::sync::Mutex<Option<std::task::Waker>>,
    failed: std::sync::atomic::AtomicBool,
}

impl Stdout {
    /// Starts the writer thread on this process's standard output; the [`Drained`] says
    /// when everything written before the `Stdout` was dropped is out.
    pub fn new() -> io::Result<(Stdout, Drained)> {
        Self::over(io::stdout())
    }

    fn over(out: impl Write + Send + 'static) -> io::Result<(Stdout, Drained)> {
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let (done_tx, done_rx) = mpsc::channel();
        let shared = std::sync::Arc::new(Queue::default());
        let q = shared.clone();
        std::thread::Builder::new()
            .name("stdout".into())
            .spawn(move || {
                use std::sync::atomic::Ordering;
                let mut out = io::BufWriter::with_capacity(256 * 1024, out);
                let wake = |q: &Queue| {
                    if let Some(w) = q.waker.lock().ok().and_then(|mut w| w.take()) {
                        w.wake();
                    }
                };
                'outer: while let Ok(first) = rx.recv() {
                    let mut next = Some(first);
                    while let Some(chunk) = next {
                        let ok = out.write_all(&chunk).is_ok();
                        q.bytes.fetch_sub(chunk.len(), Ordering::AcqRel);
                        if !ok {
                            q.failed.store(true, Ordering::Release);
                            wake(&q);
                            break 'outer;
                        }
                        next = rx.try_recv().ok();
                    }
                    if out.flush().is_err() {
                        q.failed.store(true, Ordering::Release);
                        wake(&q);
                        break;
                    }
                    wake(&q);
                }
                let _ = out.flush();
                let _ = done_tx.send(());
            })?;
        Ok((Stdout { tx, shared }, Drained(done_rx)))
    }
}

impl tokio::io::AsyncWrite for Stdout {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        use std::sync::atomic::Ordering;
        use std::task::Poll;
        let this = self.get_mut();
        let closed = || {
            Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "standard output is closed (the editor is gone)",
            )))
        };
        if this.shared.failed.load(Ordering::Acquire) {
            return closed();
        }
        if this.shared.bytes.load(Ordering::Acquire) > QUEUED_BYTES_MAX {
            if let Ok(mut w) = this.shared.waker.lock() {
                *w = Some(cx.waker().clone());
            }
            // the writer may have drained between the look and the registration
            if this.shared.bytes.load(Ordering::Acquire) > QUEUED_BYTES_MAX {
                return Poll::Pending;
            }
        }
        this.shared.bytes.fetch_add(buf.len(), Ordering::AcqRel);
        if this.tx.send(buf.to_vec()).is_err() {
            return closed();
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer into shared memory, standing in for stdout.
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn lines_leave_in_order_each_with_its_newline() {
        use futures_util::SinkExt;
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (w, drained) = Stdout::over(Shared(out.clone())).unwrap();
        let mut sink = Box::pin(line_sink(w));
        for i in 0..3 {
            sink.send(format!("{{\"n\":{i}}}")).await.unwrap();
        }
        drop(sink);
        assert!(drained.wait(Duration::from_secs(10)));
        assert_eq!(
            String::from_utf8(out.lock().unwrap().clone()).unwrap(),
            "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n"
        );
    }

    #[tokio::test]
    async fn the_stdout_writer_writes_everything_before_it_finishes() {
        use tokio::io::AsyncWriteExt;
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (mut w, drained) = Stdout::over(Shared(out.clone())).unwrap();
        let mut want = Vec::new();
        for i in 0..1000 {
            let line = format!("{{\"n\":{i}}}\n");
            w.write_all(line.as_bytes()).await.unwrap();
            w.flush().await.unwrap();
            want.extend_from_slice(line.as_bytes());
        }
        drop(w);
        assert!(drained.wait(Duration::from_secs(10)));
        assert_eq!(*out.lock().unwrap(), want);
    }
}
