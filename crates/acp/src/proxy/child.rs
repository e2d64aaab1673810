//! The wrapped agent as a process, and the lines both sides send.
//!
//! The agent runs under the same reaper as Lazarus's MCP servers (`lazarus_mcp::reaper`): when
//! it dies — killed, OOM, crashed — whatever it started (the shell of a tool call it was
//! running) is killed before the proxy starts another, so a cut-off call cannot go on
//! changing things while the new agent is told its effect is unknown; and when the proxy
//! dies, the agent and everything below it die too.

use std::io;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

/// The longest message (one line) either side may send, in bytes. A longer line is dropped
/// whole (and said so on stderr): ACP messages carry embedded files, but not this many.
pub const LINE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// What the reader of one side saw.
#[derive(Debug)]
pub enum Read {
    /// A line, without its newline.
    Line(Vec<u8>),
    /// A line over [`LINE_BYTES_MAX`], dropped; its length so far.
    TooLong(usize),
    /// The end: the side closed its end, or reading failed.
    End(Option<io::Error>),
}

/// Reads `r` line by line into `tx`, tagged with `tag`, until the end.
pub async fn read_lines<R, T>(r: R, tag: T, tx: mpsc::Sender<(T, Read)>)
where
    R: AsyncRead + Unpin,
    T: Copy,
{
    let mut r = BufReader::with_capacity(64 * 1024, r);
    let mut line: Vec<u8> = Vec::new();
    let mut dropping = false;
    let mut dropped = 0usize;
    loop {
        let buf = match r.fill_buf().await {
            Ok(b) => b,
            Err(e) => {
                let _ = tx.send((tag, Read::End(Some(e)))).await;
                return;
            }
        };
        if buf.is_empty() {
            if !line.is_empty() && !dropping {
                let _ = tx.send((tag, Read::Line(std::mem::take(&mut line)))).await;
            }
            let _ = tx.send((tag, Read::End(None))).await;
            return;
        }
        let (chunk, complete) = match memchr_newline(buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if dropping {
            dropped += chunk.len();
        } else if line.len() + chunk.len() > LINE_BYTES_MAX {
            dropping = true;
            dropped = line.len() + chunk.len();
            line = Vec::new();
        } else {
            line.extend_from_slice(chunk);
        }
        let used = complete.unwrap_or(buf.len());
        r.consume(used);
        if complete.is_some() {
            let read = if dropping {
                dropping = false;
                Read::TooLong(std::mem::take(&mut dropped))
            } else {
                let mut l = std::mem::take(&mut line);
                if l.last() == Some(&b'\r') {
                    l.pop();
                }
                if l.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                Read::Line(l)
            };
            if tx.send((tag, read)).await.is_err() {
                return;
            }
        }
    }
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

/// One run of the wrapped agent.
pub struct Agent {
    /// The agent's reaper (its parent; the agent is its only child).
    pub pid: u32,
    stdin: Option<ChildStdin>,
    child: Child,
    /// Dropped: the reaper kills the agent and all below it.
    reaper: Option<lazarus_mcp::reaper::Reaper>,
}

impl Agent {
    /// Starts `argv` (standard error is the proxy's own: the editor's log); its lines arrive
    /// on `tx` tagged with its generation.
    pub fn spawn(
        argv: &[String],
        generation: u64,
        tx: mpsc::Sender<(u64, Read)>,
    ) -> io::Result<Agent> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no agent command"))?;
        let (reaper, read_end) = lazarus_mcp::reaper::pipe()?;
        let fd = lazarus_mcp::reaper::ReaperFd::of(&read_end);
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(false);
        // its own session and group first: an editor that kills the proxy's process group
        // (a power cut of that tree) must not kill the reaper with it, or what the agent
        // started would outlive it
        // SAFETY: both steps make raw, async-signal-safe system calls only.
        unsafe {
            cmd.pre_exec(|| lazarus_agent::process::detach_from_caller());
            cmd.pre_exec(move || lazarus_mcp::reaper::enter(fd));
        }
        let mut child = cmd.spawn()?;
        drop(read_end);
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("the agent's standard output was not piped"))?;
        let pid = child.id().unwrap_or(0);
        tokio::spawn(read_lines(stdout, generation, tx));
        Ok(Agent {
            pid,
            stdin: child.stdin.take(),
            child,
            reaper: Some(reaper),
        })
    }

    /// Sends one message (a newline is added). An error means the agent is gone; its end is
    /// what the reader reports next.
    pub async fn send(&mut self, line: &[u8]) -> io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or_else(|| {
            io::Error::new(io::ErrorKind::BrokenPipe, "the agent's input is closed")
        })?;
        stdin.write_all(line).await?;
        stdin.write_all(b"\n").await?;
        stdin.flush().await
    }

    /// Stops the agent and everything it started, and waits for it.
    pub async fn stop(&mut self) -> String {
        drop(self.stdin.take());
        drop(self.reaper.take());
        self.wait().await
    }

    /// Kills the agent and everything it started, without waiting: its end is what the
    /// reader reports next.
    pub fn kill(&mut self) {
        drop(self.stdin.take());
        drop(self.reaper.take());
    }

    /// Waits for the agent's end: how it ended, in words.
    pub async fn wait(&mut self) -> String {
        match self.child.wait().await {
            // the reaper exits with the agent's status, a signal as 128 + its number
            Ok(s) => match s.code() {
                Some(c) if c > 128 => format!("killed by signal {}", signal_name(c - 128)),
                Some(c) => format!("exited with status {c}"),
                None => "killed".to_string(),
            },
            Err(e) => format!("could not be waited for: {e}"),
        }
    }
}

fn signal_name(n: i32) -> String {
    let name = match n {
        9 => "SIGKILL",
        15 => "SIGTERM",
        6 => "SIGABRT",
        11 => "SIGSEGV",
        2 => "SIGINT",
        1 => "SIGHUP",
        _ => return n.to_string(),
    };
    format!("{n} ({name})")
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines_of(input: &[u8]) -> Vec<String> {
        let (tx, mut rx) = mpsc::channel(64);
        read_lines(input, 0u8, tx).await;
        let mut out = Vec::new();
        while let Some((_, r)) = rx.recv().await {
            out.push(match r {
                Read::Line(l) => String::from_utf8_lossy(&l).into_owned(),
                Read::TooLong(n) => format!("too long {n}"),
                Read::End(e) => format!("end {}", e.is_some()),
            });
        }
        out
    }

    #[tokio::test]
    async fn lines_blank_lines_crlf_and_an_unterminated_end() {
        assert_eq!(
            lines_of(b"{\"a\":1}\n\n\r\n{\"b\":2}\r\n{\"c\":3}").await,
            vec!["{\"a\":1}", "{\"b\":2}", "{\"c\":3}", "end false"]
        );
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_dropped_and_the_next_one_read() {
        let mut input = vec![b'x'; LINE_BYTES_MAX + 10];
        input.extend_from_slice(b"\n{\"ok\":true}\n");
        assert_eq!(
            lines_of(&input).await,
            vec![
                format!("too long {}", LINE_BYTES_MAX + 10),
                "{\"ok\":true}".to_string(),
                "end false".to_string()
            ]
        );
    }
}
