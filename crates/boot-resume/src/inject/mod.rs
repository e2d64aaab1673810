//! Injecting a resume: into a Lazarus gateway over HTTP(S), or through a command template run
//! without a shell. Also readiness waiting, the idempotency key, and what counts as "accepted":
//! a resume is reported only once the injection is known to have been accepted — HTTP 2xx,
//! exit status 0, or the session's own transcript recording the resume message.
use crate::format::Format;
use crate::verdict::{InterruptedCall, Verdict};
use std::time::Duration;

mod command;
mod http;
mod template;

pub use command::{TranscriptAck, command_cwd, run_command};
pub use http::{parse_url, post_resume, wait_ready};
pub use template::{Preset, Template, openclaw_params};

/// The default resume message.
pub const DEFAULT_MESSAGE: &str = "[System] Your previous turn was interrupted (the gateway restarted or the machine slept) \
while you were working. Continue from the existing transcript and finish the interrupted task. \
A tool call that was running may have half-run: check its effects before repeating it.";

/// The resume message for one session: `base`, and for a cut-off tool call, each call that
/// was running (its tool, with its MCP server where it has one, a summary of its arguments
/// and its id, as the session recorded it; or what is known when it was not recorded) and
/// that its effect is unknown and must be checked before it is run again. A bare "continue"
/// is not enough: the model must know *which* call's effect is unknown, and a program that
/// forgets an unrecorded call (Gemini CLI) lets the model run it again, so the side effect
/// happens twice.
pub fn resume_message(
    base: &str,
    verdict: Verdict,
    calls: &[InterruptedCall],
    unrecorded: Option<&str>,
) -> String {
    if verdict != Verdict::InterruptedToolCall {
        return base.to_string();
    }
    let check = "Check its effects (files, processes, remote state) before running it or anything like it again.";
    let calls = match calls {
        [] => match unrecorded {
            Some(c) => format!(
                "The tool call that was running when it stopped: {c}. Its effect is unknown: \
it may have run fully, partly or not at all. {check}"
            ),
            None => format!(
                "A tool call was running when it stopped. Its effect is unknown: it may have \
run fully, partly or not at all. {check}"
            ),
        },
        [one] => format!(
            "The tool call that was running when it stopped: {}. Its effect is unknown: it \
may have run fully, partly or not at all. {check}",
            one.describe()
        ),
        many => {
            let list: Vec<String> = many.iter().map(|c| format!("- {}", c.describe())).collect();
            format!(
                "The tool calls that were running when it stopped:\n{}\nThe effect of each \
is unknown: it may have run fully, partly or not at all. Check each one's effects (files, \
processes, remote state) before running it or anything like it again.",
                list.join("\n")
            )
        }
    };
    format!("{base}\n\n{calls}")
}

/// Default Lazarus gateway URL.
pub const DEFAULT_GATEWAY: &str = "http://127.0.0.1:7077";

/// Why an injection or readiness check failed.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// The URL does not parse or is not http(s).
    #[error("bad URL {0:?}: expected http://HOST[:PORT][/PATH] or https://…")]
    BadUrl(String),
    /// Network failure (connection refused, timeout, TLS…).
    #[error("{url}: {message} (is the gateway running? see --wait-ready)")]
    Net {
        /// The URL.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// A non-2xx answer.
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// Start of the body.
        body: String,
    },
    /// An empty template.
    #[error("empty --inject-command template")]
    EmptyTemplate,
    /// A template that does not split into words (unbalanced quotes).
    #[error("--inject-command {0:?} has unbalanced quotes")]
    BadTemplate(String),
    /// A value that must not reach a command line.
    #[error("refusing to pass {what} {value:?} to a command: {why}")]
    Unsafe {
        /// Which placeholder.
        what: &'static str,
        /// The value.
        value: String,
        /// Why.
        why: &'static str,
    },
    /// Unknown placeholder.
    #[error(
        "unknown placeholder {0} in --inject-command (known: {{session_id}} {{session_key}} {{path}} {{cwd}} {{verdict}} {{idempotency_key}} {{message}} {{permission_mode}} {{openclaw_params}})"
    )]
    UnknownPlaceholder(String),
    /// The command could not start.
    #[error("cannot run {program:?}: {source} (is it installed and on PATH?)")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The command failed.
    #[error("{program:?} exited with {status}: {output}")]
    Exit {
        /// The program.
        program: String,
        /// Exit status.
        status: String,
        /// Tail of its output.
        output: String,
    },
    /// The command neither exited nor was acknowledged by the session in time; it was
    /// stopped, and nothing is known to have been accepted.
    #[error(
        "{program:?} did not exit 0 and the session did not record the resume within {grace:?}; stopped it (raise --command-grace if the program starts slowly): {output}"
    )]
    NotAcknowledged {
        /// The program.
        program: String,
        /// How long it was given.
        grace: Duration,
        /// Tail of its output.
        output: String,
    },
    /// The session's cwd is unknown or gone, but the command must run there.
    #[error("session working directory {0:?} does not exist; cannot run the resume command there")]
    NoCwd(String),
    /// Readiness timed out.
    #[error("gateway not ready after {0:?}: {1}")]
    NotReady(Duration, String),
}

impl InjectError {
    /// Whether trying again may succeed: network trouble, a 5xx/429/408 answer, a command
    /// whose output says the service was unreachable, readiness timing out. A missing
    /// directory, a refused value, a rejected request or a failing command is permanent: it
    /// is recorded and not retried until the session changes.
    pub fn is_transient(&self) -> bool {
        match self {
            InjectError::Net { .. } | InjectError::NotReady(..) => true,
            InjectError::Status { status, .. } => {
                matches!(status, 408 | 425 | 429 | 500..=599)
            }
            InjectError::Exit { output, .. } | InjectError::NotAcknowledged { output, .. } => {
                let o = output.to_ascii_lowercase();
                [
                    "econnrefused",
                    "connection refused",
                    "gateway not reachable",
                    "gateway closed",
                    "timed out",
                    "timeout",
                    "overloaded",
                    "temporarily unavailable",
                ]
                .iter()
                .any(|n| o.contains(n))
            }
            _ => false,
        }
    }
}

/// Everything a resume needs to know about one session.
#[derive(Debug, Clone)]
pub struct ResumeRequest {
    /// Format.
    pub format: Format,
    /// Session id.
    pub session_id: String,
    /// Session key (OpenClaw), if known.
    pub session_key: Option<String>,
    /// Transcript path.
    pub path: String,
    /// Working directory, if known.
    pub cwd: Option<String>,
    /// The permission mode the session ran in (Claude Code), if known.
    pub permission_mode: Option<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// The reason.
    pub reason: String,
    /// Deterministic idempotency key.
    pub idempotency_key: String,
    /// Resume message.
    pub message: String,
}

/// Deterministic idempotency key from format, session and tail fingerprint.
pub fn idempotency_key(
    format: Format,
    session: &str,
    size: u64,
    mtime_ns: i64,
    last_record_id: Option<&str>,
) -> String {
    const NS: uuid::Uuid = uuid::Uuid::from_u128(0x6c61_7a61_7275_7300_b007_7265_7375_6d65);
    let name = format!(
        "{}\0{session}\0{size}\0{mtime_ns}\0{}",
        format.as_str(),
        last_record_id.unwrap_or("")
    );
    uuid::Uuid::new_v5(&NS, name.as_bytes()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_message_names_each_interrupted_call_and_its_unknown_effect() {
        let a = InterruptedCall::new("mcp__side__bump", None, Some("c1"));
        let b = InterruptedCall::new("Bash", Some(&serde_json::json!({"command": "make"})), None);
        let one = resume_message(
            "BASE",
            Verdict::InterruptedToolCall,
            std::slice::from_ref(&a),
            None,
        );
        assert!(one.starts_with("BASE\n\n"), "{one}");
        assert!(
            one.contains(&a.describe()) && one.contains("Its effect is unknown"),
            "{one}"
        );
        let two = resume_message(
            "BASE",
            Verdict::InterruptedToolCall,
            &[a.clone(), b.clone()],
            None,
        );
        assert!(
            two.contains(&format!("- {}\n- {}", a.describe(), b.describe())),
            "{two}"
        );
        assert!(two.contains("The effect of each is unknown"), "{two}");
        let none = resume_message(
            "BASE",
            Verdict::InterruptedToolCall,
            &[],
            Some("not recorded"),
        );
        assert!(
            none.contains("not recorded") && none.contains("effect is unknown"),
            "{none}"
        );
        assert_eq!(
            resume_message("BASE", Verdict::PendingInput, &[a], None),
            "BASE"
        );
    }
}
