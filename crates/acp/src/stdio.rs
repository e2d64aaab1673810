//! Standard input and output as the protocol's lines, written in batches.
//!
//! The SDK's own `Stdio` writes each message through `blocking::Unblock` and waits for its
//! flush: two thread hand-offs per message. A `session/load` of 10,000 messages spent most of
//! its 1.1 s in those wake-ups. Here a writer thread owns stdout: the protocol hands it each
//! line through a channel and goes on; the thread writes whatever has queued and flushes
//! when the queue is empty, so a burst of updates becomes a few large writes and a lone
//! message still leaves at once.

use std::io::{self, BufRead, Write};
use std::sync::mpsc::{self, TrySendError};
use std::time::Duration;

use agent_client_protocol::Lines;
use futures_util::{Sink, Stream};

/// Lines queued for stdout before the protocol waits for the writer: the backpressure of
/// an editor that reads slowly.
pub const QUEUED_LINES_MAX: usize = 16 * 1024;

/// Lines read from stdin ahead of the protocol.
const READ_AHEAD_LINES: usize = 256;

/// Standard input and output as a transport for [`crate::serve`], and the means to wait
/// until what was queued for stdout is written (call [`Drained::wait`] before exiting).
pub fn lines() -> (
    Lines<
        impl Sink<String, Error = io::Error> + Send + 'static,
        impl Stream<Item = io::Result<String>> + Send + 'static,
    >,
    Drained,
) {
    let (sink, drained) = stdout_sink();
    (Lines::new(sink, stdin_stream()), drained)
}

/// The stdout writer's end: it has written every queued line, or failed.
pub struct Drained(mpsc::Receiver<()>);

impl Drained {
    /// Waits up to `limit` for the writer to finish (the connection must be over, so that
    /// nothing more is queued); whether it did.
    pub fn wait(self, limit: Duration) -> bool {
        !matches!(
            self.0.recv_timeout(limit),
            Err(mpsc::RecvTimeoutError::Timeout)
        )
    }
}

fn stdout_sink() -> (
    impl Sink<String, Error = io::Error> + Send + 'static,
    Drained,
) {
    let (tx, rx) = mpsc::sync_channel::<String>(QUEUED_LINES_MAX);
    let (done_tx, done_rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("acp-stdout".into())
        .spawn(move || {
            write_lines(rx, io::stdout().lock());
            let _ = done_tx.send(());
        });
    let spawn_error = spawned.err().map(|e| e.to_string());
    let sink = futures_util::sink::unfold(tx, move |tx, line: String| {
        let spawn_error = spawn_error.clone();
        async move {
            if let Some(e) = spawn_error {
                return Err(io::Error::other(format!("starting the stdout writer: {e}")));
            }
            let mut line = line;
            loop {
                match tx.try_send(line) {
                    Ok(()) => return Ok(tx),
                    Err(TrySendError::Full(back)) => {
                        line = back;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    Err(TrySendError::Disconnected(_)) => {
                        return Err(io::Error::new(
                            io::ErrorKind::BrokenPipe,
                            "standard output is closed (the editor is gone)",
                        ));
                    }
                }
            }
        }
    });
    (sink, Drained(done_rx))
}

/// The writer thread: each line and its newline, a flush whenever nothing more is queued.
fn write_lines(rx: mpsc::Receiver<String>, out: impl Write) {
    let mut out = io::BufWriter::with_capacity(256 * 1024, out);
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(line) = next {
            if out
                .write_all(line.as_bytes())
                .and_then(|()| out.write_all(b"\n"))
                .is_err()
            {
                return;
            }
            next = rx.try_recv().ok();
        }
        if out.flush().is_err() {
            return;
        }
    }
    let _ = out.flush();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_leave_in_order_each_with_its_newline() {
        let (tx, rx) = mpsc::sync_channel(4);
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
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
        let w = Shared(out.clone());
        let t = std::thread::spawn(move || write_lines(rx, w));
        for i in 0..3 {
            tx.send(format!("{{\"n\":{i}}}")).unwrap();
        }
        drop(tx);
        t.join().unwrap();
        assert_eq!(
            String::from_utf8(out.lock().unwrap().clone()).unwrap(),
            "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n"
        );
    }
}
