//! A call that waits for approval, as `lazarus run` meets it: on a terminal the person is
//! asked (y / n / s / a) and the answer is recorded before the call can start; off a terminal
//! the run prints the commands that answer and exits with [`EXIT_AWAITING_APPROVAL`].
//!
//! What the person reads is what runs: the argument the tool executes first and whole, every
//! argument escaped (`term::arguments_block`), and what `[a]` grants said before it is
//! chosen. What the prompt reads is what the person typed: it opens the terminal itself
//! (`/dev/tty`, never an inherited descriptor), throws away whatever input is pending before
//! each question (`tcflush(TCIFLUSH)`: text pushed into the terminal earlier, by anything,
//! is not an answer), and Ctrl-C cancels it at once.

use std::io::{IsTerminal, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, anyhow};
use lazarus_agent::provider::CancellationToken;
use lazarus_session::InboxMessage;
use lazarus_session::approval::REASON_BYTES_MAX;
use lazarus_session::record::{Approval, Decision, Interrupted, Record, Scope, approval_input_id};
use serde_json::json;

use super::live::print_line;
use crate::args::StoreArgs;
use crate::term::{escape, shell_quote};

/// Exit code when the run stopped because a tool call waits for a person's decision.
pub const EXIT_AWAITING_APPROVAL: i32 = 3;

/// What became of the question.
pub(super) enum Asked {
    /// A decision is recorded (by this prompt, or one that arrived meanwhile): drive again.
    Decided,
    /// No terminal, or the person left (end of input): the run ends, the request stays.
    Left,
    /// Ctrl-C at the prompt: the run stops at once (recorded as a stop by `sigint`); the
    /// request stays.
    Cancelled,
}

/// Whether the person at this terminal can be asked.
pub(super) fn can_ask() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// What the run knows of the call's tool, for the question.
pub(super) struct ToolFacts {
    /// The tool is an MCP server's: an `always` grant holds that server.
    pub keyed: bool,
}

/// The call `call_id` waits: ask on the terminal and record the answer, or say how to answer.
/// `cancel`: the run's Ctrl-C (or SIGTERM), which ends the question at once, and why it
/// fired.
pub(super) fn ask(
    session: &Arc<Mutex<lazarus_session::Session>>,
    id: &str,
    call_id: &str,
    (store, workspace): (&StoreArgs, &std::path::Path),
    json_out: bool,
    (cancel, why): (&CancellationToken, &lazarus_agent::runner::StopReason),
    facts: impl Fn(&str) -> ToolFacts,
) -> Result<Asked> {
    let (tool, arguments, reason, mode, turn) = {
        let s = session
            .lock()
            .map_err(|_| anyhow!("session lock poisoned"))?;
        let call = s
            .state()
            .call(call_id)
            .ok_or_else(|| anyhow!("call {call_id} of session {id} vanished"))?;
        let a = call.approval.as_ref();
        (
            call.name.clone(),
            call.arguments.clone(),
            a.map(|a| a.reason.clone()).unwrap_or_default(),
            a.map(|a| a.mode.clone()).unwrap_or_default(),
            call.turn,
        )
    };
    eprint!(
        "approval needed: {} (call {} of session {id})\n{}  why: {} (--ask-for-approval {mode})\n",
        escape(&tool),
        escape(call_id),
        crate::term::arguments_block(&tool, &arguments, "  "),
        escape(&reason)
    );
    if !can_ask() {
        print_how_to_answer(id, call_id, store, workspace);
        return Ok(Asked::Left);
    }
    let tty = Tty::open()?;
    let answer = match read_answer(&tty, id, &tool, facts(&tool).keyed, cancel)? {
        Read::Answer(a) => a,
        Read::End => {
            print_how_to_answer(id, call_id, store, workspace);
            return Ok(Asked::Left);
        }
        Read::Cancelled => {
            // a stop like any other of a run (`sigint`, `sigterm`): recorded, the request
            // left waiting
            let reason = why.get();
            session
                .lock()
                .map_err(|_| anyhow!("session lock poisoned"))?
                .append(Record::Interrupted(Interrupted {
                    reason: reason.to_string(),
                    turn: Some(turn),
                }))?;
            eprintln!(
                "\napproval cancelled ({}): call {} still waits; nothing of it ran",
                if reason == "sigterm" {
                    "SIGTERM"
                } else {
                    "Ctrl-C"
                },
                escape(call_id)
            );
            print_how_to_answer(id, call_id, store, workspace);
            return Ok(Asked::Cancelled);
        }
    };
    let (decision, scope, why) = answer;
    if scope == Scope::Always {
        crate::approvals::grant_always(&tool, "cli", id, call_id)?;
        eprintln!(
            "`always` grant for {} written to {} (revoke: lazarus approvals revoke {})",
            escape(&tool),
            crate::approvals::policy_path().display(),
            escape(&tool)
        );
    }
    let approval = Approval {
        input_id: approval_input_id(call_id),
        call_id: call_id.to_string(),
        decision,
        scope,
        reason: why,
        by: "cli".into(),
        decided_at: lazarus_ledger::clock::now_ts(),
    };
    let msg = InboxMessage::approval(approval);
    let ack = session
        .lock()
        .map_err(|_| anyhow!("session lock poisoned"))?
        .append_message(&msg)?;
    if ack.duplicate {
        eprintln!(
            "a decision on call {} was recorded meanwhile (seq {}); it stands",
            escape(call_id),
            ack.seq
        );
    } else if json_out {
        print_line(
            &json!({"seq": ack.seq, "ts": ack.ts, "kind": "approval", "data": msg.record().data_value()})
                .to_string(),
        );
    }
    Ok(Asked::Decided)
}

/// What the terminal gave.
enum Read<T> {
    Answer(T),
    /// End of input (Ctrl-D, the terminal gone).
    End,
    /// Ctrl-C.
    Cancelled,
}

/// The terminal, opened by the prompt itself: never an inherited descriptor, never standard
/// input (which a pipe or anything else may stand for).
struct Tty {
    fd: OwnedFd,
}

impl Tty {
    fn open() -> Result<Tty> {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NOCTTY: opening a terminal never makes it ours to control
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open("/dev/tty")
            .context("opening the terminal (/dev/tty) to ask")?;
        Ok(Tty { fd: f.into() })
    }

    /// One line typed after the question was asked: pending input (typed, or pushed into
    /// the terminal before) is thrown away first. Ctrl-C (the run's `cancel`) ends it.
    fn line(&self, cancel: &CancellationToken) -> Result<Read<String>> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: tcflush on a terminal descriptor this function owns.
        unsafe {
            libc::tcflush(fd, libc::TCIFLUSH);
        }
        let mut line: Vec<u8> = Vec::new();
        loop {
            if cancel.is_cancelled() {
                return Ok(Read::Cancelled);
            }
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd on this stack frame.
            let r = unsafe { libc::poll(&mut p, 1, 100) };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(anyhow::Error::from(e).context("waiting for the terminal"));
            }
            if r == 0 {
                continue;
            }
            let mut buf = [0u8; 1024];
            // SAFETY: reading into a stack buffer of its size.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(anyhow::Error::from(e).context("reading the terminal"));
            }
            if n == 0 {
                return Ok(if line.is_empty() {
                    Read::End
                } else {
                    Read::Answer(String::from_utf8_lossy(&line).into_owned())
                });
            }
            line.extend_from_slice(&buf[..n as usize]);
            if let Some(end) = line.iter().position(|b| *b == b'\n') {
                line.truncate(end);
                return Ok(Read::Answer(String::from_utf8_lossy(&line).into_owned()));
            }
            if line.len() > 64 * 1024 {
                line.clear();
            }
        }
    }
}

/// What each answer allows, said before it is chosen.
fn choices(session: &str, tool: &str, keyed: bool) -> String {
    let tool = escape(tool);
    let always = if keyed {
        format!(
            "every {tool} call to this MCP server as configured now (the same command and arguments, or URL; another program of that name is asked again), in every session and workspace, until `lazarus approvals revoke {tool}`"
        )
    } else {
        format!(
            "every {tool} call, in every session and every workspace, until `lazarus approvals revoke {tool}`"
        )
    };
    format!(
        "  [y] yes, once: this call only\n  [s] yes, for this session: this call and every later {tool} call of session {session}\n  [a] yes, always: {always}\n  [n] no: this call does not run (you may give the model a reason)\n"
    )
}

/// Reads y / n / s / a (and a reason for n) from the terminal.
fn read_answer(
    tty: &Tty,
    session: &str,
    tool: &str,
    keyed: bool,
    cancel: &CancellationToken,
) -> Result<Read<(Decision, Scope, Option<String>)>> {
    eprint!("{}", choices(session, tool, keyed));
    loop {
        eprint!("allow it? [y/s/a/n] > ");
        std::io::stderr().flush()?;
        let line = match tty.line(cancel)? {
            Read::Answer(l) => l,
            Read::End => {
                eprintln!();
                return Ok(Read::End);
            }
            Read::Cancelled => return Ok(Read::Cancelled),
        };
        let answer = match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => (Decision::Allow, Scope::Once),
            "s" | "session" => (Decision::Allow, Scope::Session),
            "a" | "always" => (Decision::Allow, Scope::Always),
            "n" | "no" => (Decision::Deny, Scope::Once),
            _ => {
                eprintln!("answer y, s, a or n");
                continue;
            }
        };
        let mut reason = None;
        if answer.0 == Decision::Deny {
            eprint!("reason, for the model (Enter for none) > ");
            std::io::stderr().flush()?;
            let line = match tty.line(cancel)? {
                Read::Answer(l) => l,
                Read::End => String::new(),
                Read::Cancelled => return Ok(Read::Cancelled),
            };
            let mut r = line.trim().to_string();
            if r.len() > REASON_BYTES_MAX {
                let mut end = REASON_BYTES_MAX;
                while !r.is_char_boundary(end) {
                    end -= 1;
                }
                r.truncate(end);
            }
            reason = (!r.is_empty()).then_some(r);
        }
        return Ok(Read::Answer((answer.0, answer.1, reason)));
    }
}

/// The commands that answer a waiting call, for a run without a terminal.
fn print_how_to_answer(id: &str, call_id: &str, store: &StoreArgs, workspace: &std::path::Path) {
    let mut flags = String::new();
    if let Some(d) = &store.session_dir {
        flags.push_str(&format!(
            " --session-dir {}",
            shell_quote(&d.display().to_string())
        ));
    }
    if store.store.is_some() {
        flags.push_str(" --store URL");
    }
    let quoted = shell_quote(call_id);
    let call = escape(&quoted);
    // a resumed run works in the session's recorded world: its workspace, tools and model
    let _ = workspace;
    eprintln!(
        "the session waits for a decision; answer with one of:\n  lazarus sessions approve{flags} {id} {call} [--scope once|session|always]\n  lazarus sessions deny{flags} {id} {call} [--reason TEXT]\nthen continue it in its world: lazarus run{flags} --session {id}"
    );
}
