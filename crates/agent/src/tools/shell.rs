//! `shell`: runs `sh -c COMMAND` in the workspace, in its own process group.
//!
//! The command must not start before the runner has recorded the start with the process
//! group. `std::process::Command::spawn` waits for the child to exec (it reads the exec-error
//! pipe), so a gate that blocks in `pre_exec` would deadlock the parent. The gate is therefore
//! the first thing the spawned shell does: `sh` (already the group leader, pid = pgid) reads
//! one line from its stdin pipe and only if it is `go` execs the real command (same pid, same
//! start time) with stdin from /dev/null. The parent calls `hooks.started(group)` and only
//! then writes `go`. If the pipe closes without it — the hook refused, or the runner died —
//! the gate exits with status 125 and the command never runs.
//!
//! Timeout and cancellation terminate the whole group (SIGTERM, grace, SIGKILL). When the
//! command finishes, processes it left running in its group (background jobs) are terminated
//! too, so nothing outlives the call unrecorded. Output (stdout and stderr interleaved) keeps
//! a head and a tail with a marker saying how many bytes were cut.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{
    Args, Tool, ToolContext, ToolFuture, ToolHooks, ToolOutput, ToolStatus, duration_secs,
};
use crate::process::{
    ProcessGroupRef, TerminateOutcome, group_has_running_members, terminate_group,
};

/// Exit status of the gate when the command was never started.
pub const GATE_REFUSED_EXIT: i32 = 125;

const GATE_SCRIPT: &str = r#"IFS= read -r lazarus_gate && [ "$lazarus_gate" = go ] || exit 125; exec sh -c "$1" </dev/null"#;

/// `shell`: not idempotent (a command's effects are arbitrary).
#[derive(Debug, Default, Clone, Copy)]
pub struct ShellTool;

/// Keeps the first `head` and the last `tail` bytes.
#[derive(Debug)]
struct Capped {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_max: usize,
    tail_max: usize,
    total: u64,
}

impl Capped {
    fn new(head_max: usize, tail_max: usize) -> Self {
        Capped {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_max,
            tail_max,
            total: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_max.saturating_sub(self.head.len());
        let n = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..n]);
        bytes = &bytes[n..];
        if self.tail_max == 0 {
            return;
        }
        if bytes.len() >= self.tail_max {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_max..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_max);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    fn render(&self) -> String {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let mut s = String::from_utf8_lossy(&self.head).into_owned();
        if self.total > kept {
            s.push_str(&format!(
                "\n[... {} bytes of output cut ...]\n",
                self.total - kept
            ));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        s.push_str(&String::from_utf8_lossy(&tail));
        s
    }
}

/// Kills the group with SIGKILL if the call is abandoned (its future dropped) mid-run.
struct GroupGuard(Option<ProcessGroupRef>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(g) = self.0.take()
            && let Some(pid) = rustix::process::Pid::from_raw(g.pgid)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

fn describe_exit(status: &ExitStatus) -> (String, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => (format!("[exit code {c}]"), Some(c)),
        (None, Some(sig)) => (format!("[killed by signal {sig}]"), None),
        _ => ("[exit status unknown]".into(), None),
    }
}

fn outcome_text(o: TerminateOutcome) -> &'static str {
    match o {
        TerminateOutcome::AlreadyGone => "it had already exited",
        TerminateOutcome::PidReused => "it had already exited",
        TerminateOutcome::Terminated => "terminated with SIGTERM",
        TerminateOutcome::Killed => "killed with SIGKILL after the grace period",
        TerminateOutcome::Failed => "signalling it failed; it may still run",
    }
}

async fn terminate(group: ProcessGroupRef, grace: Duration) -> TerminateOutcome {
    tokio::task::spawn_blocking(move || terminate_group(&group, grace))
        .await
        .unwrap_or(TerminateOutcome::Failed)
}

impl Tool for ShellTool {
    fn name(&self) -> &'static str {
        "shell"
    }
    fn description(&self) -> &'static str {
        "Run a shell command (sh -c) in the workspace directory. Output (stdout and stderr) is returned with the exit code; long output is cut in the middle. Processes left running in the background are terminated when the command finishes."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "command": {"type": "string", "description": "The command line, run with sh -c"},
            "timeout_secs": {"type": "integer", "minimum": 1, "description": "Time limit in seconds (default 120)"}
        }, "required": ["command"], "additionalProperties": false})
    }
    fn idempotent(&self) -> bool {
        false
    }
    fn run<'a>(
        &'a self,
        ctx: &'a ToolContext,
        arguments: &'a Value,
        hooks: &'a mut dyn ToolHooks,
    ) -> ToolFuture<'a> {
        Box::pin(run_shell(ctx, arguments, hooks))
    }
}

async fn run_shell(ctx: &ToolContext, arguments: &Value, hooks: &mut dyn ToolHooks) -> ToolOutput {
    let limits = &ctx.limits;
    let prep = (|| {
        let a = Args::new("shell", arguments)?;
        let command = a.string("command")?;
        if command.trim().is_empty() {
            return Err("error: command is empty".to_string());
        }
        let timeout = a
            .opt_u64("timeout_secs")?
            .unwrap_or(limits.shell_default_timeout_secs);
        if timeout == 0 || timeout > limits.shell_max_timeout_secs {
            return Err(format!(
                "error: timeout_secs must be between 1 and {}",
                limits.shell_max_timeout_secs
            ));
        }
        Ok((command, timeout))
    })();
    let (command, timeout_secs) = match prep {
        Ok(p) => p,
        Err(e) => return ToolOutput::rejected(e),
    };
    let workspace = match ctx.workspace.canonicalize() {
        Ok(w) => w,
        Err(e) => {
            return ToolOutput::rejected(format!(
                "error: the workspace {} cannot be used: {e}",
                ctx.workspace.display()
            ));
        }
    };
    let (reader, writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return ToolOutput::rejected(format!("error: cannot create a pipe: {e}")),
    };
    let writer2 = match writer.try_clone() {
        Ok(w) => w,
        Err(e) => return ToolOutput::rejected(format!("error: cannot create a pipe: {e}")),
    };
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(GATE_SCRIPT)
        .arg("lazarus-shell")
        .arg(command)
        .current_dir(&workspace)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::from(OwnedFd::from(writer)))
        .stderr(Stdio::from(OwnedFd::from(writer2)))
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat");
    let spawned = cmd.spawn();
    drop(cmd); // closes the parent's copies of the output pipe's write end
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return ToolOutput::rejected(format!("error: cannot start sh: {e}")),
    };
    let Some(pid) = child.id().map(|p| p as i32) else {
        return ToolOutput::rejected("error: the shell exited before it could be tracked");
    };
    let group = match ProcessGroupRef::of_leader(pid) {
        Ok(g) => g,
        Err(e) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return ToolOutput::rejected(format!("error: cannot track the shell process: {e}"));
        }
    };
    let mut stdin = child.stdin.take();
    if let Err(reason) = hooks.started(Some(group)) {
        drop(stdin); // the gate sees EOF and exits 125 without running the command
        let _ = child.wait().await;
        return ToolOutput::rejected(format!("error: not started: {reason}"));
    }
    let mut guard = GroupGuard(Some(group));
    let gate_open = match stdin.as_mut() {
        Some(s) => s.write_all(b"go\n").await.and(s.flush().await),
        None => Err(std::io::Error::other("no stdin pipe")),
    };
    drop(stdin);
    if let Err(e) = gate_open {
        tracing::warn!(pgid = group.pgid, error = %e, "cannot open the shell gate");
    }

    let receiver = match tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader)) {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the shell output pipe");
            None
        }
    };
    let (head, tail) = (limits.output_head_bytes, limits.output_tail_bytes);
    let reader_task = tokio::spawn(async move {
        let mut buf = Capped::new(head, tail);
        if let Some(mut r) = receiver {
            let mut chunk = vec![0u8; 16 * 1024];
            loop {
                match r.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.push(&chunk[..n]),
                }
            }
        }
        buf
    });

    let grace = Duration::from_millis(limits.shell_kill_grace_ms);
    enum End {
        Exited(std::io::Result<ExitStatus>),
        Timeout,
        Cancelled,
    }
    let end = tokio::select! {
        s = child.wait() => End::Exited(s),
        _ = tokio::time::sleep(duration_secs(timeout_secs)) => End::Timeout,
        _ = ctx.cancel.cancelled() => End::Cancelled,
    };
    let (status, note, exit_code) = match end {
        End::Exited(Ok(st)) => {
            if group_has_running_members(group.pgid) {
                let outcome = terminate(group, grace).await;
                tracing::info!(
                    pgid = group.pgid,
                    ?outcome,
                    "terminated processes left by a shell command"
                );
            }
            let (note, code) = describe_exit(&st);
            let status = if code == Some(0) {
                ToolStatus::Ok
            } else {
                ToolStatus::Error
            };
            (status, note, code)
        }
        End::Exited(Err(e)) => {
            terminate(group, grace).await;
            (
                ToolStatus::Error,
                format!("[cannot wait for the command: {e}]"),
                None,
            )
        }
        End::Timeout => {
            let outcome = terminate(group, grace).await;
            let _ = child.wait().await;
            (
                ToolStatus::Timeout,
                format!(
                    "[timed out after {timeout_secs} s; the command was stopped ({})]",
                    outcome_text(outcome)
                ),
                None,
            )
        }
        End::Cancelled => {
            let _ = terminate(group, grace).await;
            let _ = child.wait().await;
            (
                ToolStatus::Cancelled,
                "[cancelled; the command was stopped]".to_string(),
                None,
            )
        }
    };
    guard.0 = None;
    let output = match tokio::time::timeout(Duration::from_secs(2), reader_task).await {
        Ok(Ok(buf)) => buf.render(),
        _ => String::from("[output unavailable]"),
    };
    let mut text = output;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&note);
    ToolOutput {
        status,
        text,
        exit_code,
        effect_started: true,
    }
}

#[cfg(test)]
mod tests {
    use super::Capped;

    #[test]
    fn capped_keeps_head_and_tail() {
        let mut c = Capped::new(4, 4);
        c.push(b"01");
        c.push(b"23456");
        c.push(b"789abcdef");
        assert_eq!(c.total, 16);
        assert_eq!(c.render(), "0123\n[... 8 bytes of output cut ...]\ncdef");
        let mut small = Capped::new(4, 4);
        small.push(b"0123456");
        assert_eq!(small.render(), "0123456");
    }
}
