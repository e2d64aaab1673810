//! `shell`: runs `sh -c COMMAND` in the workspace, in its own session and process group,
//! without a controlling terminal and with no descriptor of lazarus's but 0, 1 and 2
//! ([`crate::process::detach_from_caller`]).
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
//! The command runs in the sandbox in force ([`crate::sandbox`]): by default it can write only
//! in the workspace and a private `$TMPDIR`, has no network, and runs in its own PID
//! namespace, so nothing it starts outlives the call. When the sandbox cannot be enforced on
//! this machine the call is refused before anything runs (unless the sandbox is `off`).
//!
//! Timeout and cancellation terminate the whole group (SIGTERM, grace, SIGKILL). When the
//! command finishes, processes it left running in its group (background jobs) are terminated
//! too, so nothing outlives the call unrecorded. Output (stdout and stderr interleaved) keeps
//! a head and a tail with a marker saying how many bytes were cut.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::process::{ExitStatus, Stdio};
use std::sync::LazyLock;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{
    Args, Rerun, Tool, ToolContext, ToolFuture, ToolHooks, ToolLimits, ToolOutput, ToolStatus,
    duration_secs,
};
use crate::model::ToolSpec;
use crate::process::{
    ProcessGroupRef, TerminateOutcome, group_has_running_members, terminate_group,
};
use crate::sandbox::Prepared;

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
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec {
            name: "shell".into(),
            description: "Run a shell command (sh -c) in the workspace directory. Output (stdout and stderr) is returned with the exit code; long output is cut in the middle. Processes left running in the background are terminated when the command finishes. Unless the operator turned the sandbox off, commands can write only in the workspace and $TMPDIR and have no network.".into(),
            parameters: json!({"type": "object", "properties": {
                    "command": {"type": "string", "description": "The command line, run with sh -c"},
                    "timeout_secs": {"type": "integer", "minimum": 1, "description": "Time limit in seconds (default 120)"}
                }, "required": ["command"], "additionalProperties": false}),
        }
        });
        &SPEC
    }
    fn rerun(&self) -> Rerun {
        Rerun::fixed(false)
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

/// A validated shell request.
struct ShellRequest<'a> {
    command: &'a str,
    timeout_secs: u64,
}

impl<'a> ShellRequest<'a> {
    fn parse(arguments: &'a Value, limits: &ToolLimits) -> Result<Self, String> {
        let a = Args::new("shell", arguments)?;
        let command = a.string("command")?;
        if command.trim().is_empty() {
            return Err("error: command is empty".to_string());
        }
        let timeout_secs = a
            .opt_u64("timeout_secs")?
            .unwrap_or(limits.shell_default_timeout_secs);
        if timeout_secs == 0 || timeout_secs > limits.shell_max_timeout_secs {
            return Err(format!(
                "error: timeout_secs must be between 1 and {}",
                limits.shell_max_timeout_secs
            ));
        }
        Ok(ShellRequest {
            command,
            timeout_secs,
        })
    }
}

/// A shell spawned and held at its gate: nothing of the command has run yet.
struct Gated {
    child: tokio::process::Child,
    group: ProcessGroupRef,
    stdin: Option<tokio::process::ChildStdin>,
    output: Option<std::io::PipeReader>,
    /// The call's private `$TMPDIR` and what else the sandbox set up; dropped after the call.
    _sandbox: Prepared,
}

/// Refuses the call when the sandbox in force cannot be enforced here.
fn check_sandbox(ctx: &ToolContext) -> Result<(), String> {
    match &ctx.sandbox.unavailable {
        None => Ok(()),
        Some(why) => Err(format!(
            "error: shell is refused: the {} sandbox cannot be enforced on this machine ({why}); the operator can pass --sandbox off to allow unconfined commands",
            ctx.sandbox.policy.mode
        )),
    }
}

/// Spawns `sh` (sandboxed as configured) in its own process group, waiting at the gate.
async fn spawn_gated(ctx: &ToolContext, req: &ShellRequest<'_>) -> Result<Gated, String> {
    let workspace = ctx.workspace.canonicalize().map_err(|e| {
        format!(
            "error: the workspace {} cannot be used: {e}",
            ctx.workspace.display()
        )
    })?;
    let sandbox = ctx
        .sandbox
        .prepare(&workspace)
        .map_err(|e| format!("error: cannot set up the shell sandbox: {e}"))?;
    let (reader, writer) =
        std::io::pipe().map_err(|e| format!("error: cannot create a pipe: {e}"))?;
    let writer2 = writer
        .try_clone()
        .map_err(|e| format!("error: cannot create a pipe: {e}"))?;
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(GATE_SCRIPT)
        .arg("lazarus-shell")
        .arg(req.command)
        .current_dir(&workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::from(OwnedFd::from(writer)))
        .stderr(Stdio::from(OwnedFd::from(writer2)));
    // its own session (no terminal) and group, and nothing but 0, 1, 2 inherited; first, so
    // the sandbox's steps run in that session
    // SAFETY: `detach_from_caller` makes only async-signal-safe system calls.
    unsafe {
        cmd.pre_exec(|| crate::process::detach_from_caller());
    }
    // the environment the policy gives (it replaces the runner's), then the call's own
    sandbox.apply(&mut cmd);
    cmd.env("PAGER", "cat").env("GIT_PAGER", "cat");
    let spawned = cmd.spawn();
    drop(cmd); // closes the parent's copies of the output pipe's write end
    let mut child = spawned.map_err(|e| format!("error: cannot start sh: {e}"))?;
    let Some(pid) = child.id().map(|p| p as i32) else {
        return Err("error: the shell exited before it could be tracked".into());
    };
    let group = match ProcessGroupRef::of_leader(pid) {
        Ok(g) => g,
        Err(e) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(format!("error: cannot track the shell process: {e}"));
        }
    };
    let stdin = child.stdin.take();
    Ok(Gated {
        child,
        group,
        stdin,
        output: Some(reader),
        _sandbox: sandbox,
    })
}

impl Gated {
    /// The hook refused: close the gate (the shell sees EOF and exits 125 unrun).
    async fn refuse(mut self, reason: String) -> ToolOutput {
        drop(self.stdin.take());
        let _ = self.child.wait().await;
        ToolOutput::rejected(format!("error: not started: {reason}"))
    }

    /// Lets the command run.
    async fn open_gate(&mut self) {
        let opened = match self.stdin.as_mut() {
            Some(s) => s.write_all(b"go\n").await.and(s.flush().await),
            None => Err(std::io::Error::other("no stdin pipe")),
        };
        drop(self.stdin.take());
        if let Err(e) = opened {
            tracing::warn!(pgid = self.group.pgid, error = %e, "cannot open the shell gate");
        }
    }
}

/// Reads the output pipe into a head-and-tail buffer until every writer has closed it.
fn collect_output(
    reader: Option<std::io::PipeReader>,
    limits: &ToolLimits,
) -> tokio::task::JoinHandle<Capped> {
    let receiver = reader.and_then(|r| {
        tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(r))
            .map_err(|e| tracing::warn!(error = %e, "cannot read the shell output pipe"))
            .ok()
    });
    let (head, tail) = (limits.output_head_bytes, limits.output_tail_bytes);
    tokio::spawn(async move {
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
    })
}

enum End {
    Exited(std::io::Result<ExitStatus>),
    Timeout,
    Cancelled,
}

/// Waits for the command to exit, the timeout, or cancellation.
async fn wait_for_end(
    child: &mut tokio::process::Child,
    timeout_secs: u64,
    cancel: &tokio_util::sync::CancellationToken,
) -> End {
    tokio::select! {
        s = child.wait() => End::Exited(s),
        _ = tokio::time::sleep(duration_secs(timeout_secs)) => End::Timeout,
        _ = cancel.cancelled() => End::Cancelled,
    }
}

/// Stops what is left of the group and says how the call ended.
///
/// `contained`: the command ran in its own PID namespace, whose leader exits only after the
/// namespace's init, and the kernel kills everything in the namespace when its init exits:
/// once the leader is reaped nothing of the call is left to look for.
async fn settle(
    end: End,
    child: &mut tokio::process::Child,
    group: ProcessGroupRef,
    grace: Duration,
    timeout_secs: u64,
    contained: bool,
) -> (ToolStatus, String, Option<i32>) {
    match end {
        End::Exited(Ok(st)) => {
            if !contained && group_has_running_members(group.pgid) {
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
    }
}

/// The text the model sees: the kept output, then the note on how the call ended.
async fn render(output: tokio::task::JoinHandle<Capped>, note: &str) -> String {
    let mut text = match tokio::time::timeout(Duration::from_secs(2), output).await {
        Ok(Ok(buf)) => buf.render(),
        _ => String::from("[output unavailable]"),
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(note);
    text
}

async fn run_shell(ctx: &ToolContext, arguments: &Value, hooks: &mut dyn ToolHooks) -> ToolOutput {
    let req = match ShellRequest::parse(arguments, &ctx.limits) {
        Ok(r) => r,
        Err(e) => return ToolOutput::rejected(e),
    };
    if let Err(e) = check_sandbox(ctx) {
        return ToolOutput::rejected(e);
    }
    let mut gated = match spawn_gated(ctx, &req).await {
        Ok(g) => g,
        Err(e) => return ToolOutput::rejected(e),
    };
    let group = gated.group;
    if let Err(reason) = hooks.started(Some(group)) {
        return gated.refuse(reason).await;
    }
    let mut guard = GroupGuard(Some(group));
    gated.open_gate().await;
    let output = collect_output(gated.output.take(), &ctx.limits);
    let grace = Duration::from_millis(ctx.limits.shell_kill_grace_ms);
    let end = wait_for_end(&mut gated.child, req.timeout_secs, &ctx.cancel).await;
    let contained = gated._sandbox.contained();
    let (status, note, exit_code) = settle(
        end,
        &mut gated.child,
        group,
        grace,
        req.timeout_secs,
        contained,
    )
    .await;
    guard.0 = None;
    ToolOutput {
        status,
        text: render(output, &note).await,
        exit_code,
        effect_started: true,
        settled: false,
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
