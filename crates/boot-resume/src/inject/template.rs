//! Command templates (shell-like word splitting, placeholders substituted per argument, never
//! a shell) and the built-in presets for each agent.
use super::{InjectError, ResumeRequest};
use crate::format::Format;

/// A command template: argv split like a POSIX shell would (quotes group words; nothing is
/// expanded), placeholders substituted per element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// The argv with placeholders.
    pub argv: Vec<String>,
    /// Run the command in the session's working directory.
    pub in_session_cwd: bool,
    /// Success may also be the session recording the resume message while the command
    /// still runs (programs that run the whole resumed turn before exiting).
    pub ack_by_transcript: bool,
}

impl Template {
    /// Parses a template string with shell-like word splitting (`'a b'` is one argument).
    pub fn parse(s: &str) -> Result<Template, InjectError> {
        let argv = shlex::split(s).ok_or_else(|| InjectError::BadTemplate(s.to_string()))?;
        if argv.is_empty() {
            return Err(InjectError::EmptyTemplate);
        }
        Ok(Template {
            argv,
            in_session_cwd: false,
            ack_by_transcript: false,
        })
    }

    /// Builds the argv for one session.
    pub fn build(&self, r: &ResumeRequest) -> Result<Vec<String>, InjectError> {
        self.argv.iter().map(|a| substitute(a, r)).collect()
    }
}

/// Built-in command templates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// `openclaw gateway call agent --params <json: sessionKey, message, idempotencyKey, bestEffortDeliver>`
    Openclaw,
    /// `claude -p --resume <id> --permission-mode <the session's mode> <message>`, in the session's cwd
    Claude,
    /// `codex exec resume --skip-git-repo-check <id> <message>`, in the session's cwd
    Codex,
    /// `pi -p --session <file> <message>`, in the session's cwd
    Pi,
    /// `gemini --resume <session uuid> -p <message>`, in the session's project directory
    Gemini,
    /// `opencode run --session <id> <message>`, in the session's directory (PWD set too)
    Opencode,
}

impl Preset {
    /// The template.
    pub fn template(self) -> Template {
        let (argv, cwd, ack): (&[&str], bool, bool) = match self {
            // Exits once the gateway accepted the run (it then runs in the gateway).
            Preset::Openclaw => (
                &[
                    "openclaw",
                    "gateway",
                    "call",
                    "agent",
                    "--json",
                    "--params",
                    "{openclaw_params}",
                ],
                false,
                false,
            ),
            Preset::Claude => (
                &[
                    "claude",
                    "-p",
                    "--resume",
                    "{session_id}",
                    "--permission-mode",
                    "{permission_mode}",
                    "{message}",
                ],
                true,
                true,
            ),
            // The session already ran in that directory: the git-repository check that
            // guards new sessions would only refuse to continue it.
            Preset::Codex => (
                &[
                    "codex",
                    "exec",
                    "resume",
                    "--skip-git-repo-check",
                    "{session_id}",
                    "{message}",
                ],
                true,
                true,
            ),
            Preset::Pi => (
                &["pi", "-p", "--session", "{path}", "{message}"],
                true,
                true,
            ),
            // Gemini CLI finds a session by id among the project's recordings, so it must run
            // in that project. No approval flag: the user's own default applies (yolo can
            // only be given on the command line; add it with --inject-command if wanted).
            Preset::Gemini => (
                &["gemini", "--resume", "{session_id}", "-p", "{message}"],
                true,
                true,
            ),
            // OpenCode writes to its database, not a transcript file: success is its exit
            // after the resumed turn.
            Preset::Opencode => (
                &["opencode", "run", "--session", "{session_id}", "{message}"],
                true,
                false,
            ),
        };
        Template {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            in_session_cwd: cwd,
            ack_by_transcript: ack,
        }
    }

    /// The format the preset resumes.
    pub fn format(self) -> Format {
        match self {
            Preset::Openclaw => Format::Openclaw,
            Preset::Claude => Format::ClaudeCode,
            Preset::Codex => Format::Codex,
            Preset::Pi => Format::Pi,
            Preset::Gemini => Format::GeminiCli,
            Preset::Opencode => Format::Opencode,
        }
    }

    /// The preset for a format, if there is one.
    pub fn for_format(f: Format) -> Option<Preset> {
        match f {
            Format::Openclaw => Some(Preset::Openclaw),
            Format::ClaudeCode => Some(Preset::Claude),
            Format::Codex => Some(Preset::Codex),
            Format::Pi => Some(Preset::Pi),
            Format::GeminiCli => Some(Preset::Gemini),
            Format::Opencode => Some(Preset::Opencode),
            Format::Lazarus => None,
        }
    }
}

fn checked<'a>(what: &'static str, v: &'a str) -> Result<&'a str, InjectError> {
    let bad = |why| {
        Err(InjectError::Unsafe {
            what,
            value: v.to_string(),
            why,
        })
    };
    if v.contains('\0') {
        return bad("it contains a NUL byte");
    }
    if v.starts_with('-') && what != "message" {
        return bad("it starts with '-' and would be read as an option");
    }
    Ok(v)
}

/// The `--params` of `openclaw gateway call agent`. `bestEffortDeliver` rather than
/// `deliver`: with no channel configured (or a session without a route) OpenClaw 2026.9
/// rejects `deliver: true` ("Channel is required") and the resume never runs.
pub fn openclaw_params(r: &ResumeRequest) -> String {
    let mut m = serde_json::Map::new();
    match &r.session_key {
        Some(k) => m.insert("sessionKey".into(), k.clone().into()),
        None => m.insert("sessionId".into(), r.session_id.clone().into()),
    };
    m.insert("message".into(), r.message.clone().into());
    m.insert("idempotencyKey".into(), r.idempotency_key.clone().into());
    m.insert("bestEffortDeliver".into(), true.into());
    serde_json::Value::Object(m).to_string()
}

/// Claude Code permission modes a resume may run in.
const PERMISSION_MODES: &[&str] = &[
    "default",
    "acceptEdits",
    "plan",
    "bypassPermissions",
    "dontAsk",
    "auto",
];

fn substitute(arg: &str, r: &ResumeRequest) -> Result<String, InjectError> {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let Some(end) = after.find('}') else {
            out.push_str(after);
            return Ok(out);
        };
        let name = &after[1..end];
        let v: String = match name {
            "session_id" => checked("session id", &r.session_id)?.to_string(),
            "session_key" => checked(
                "session key",
                r.session_key.as_deref().unwrap_or(&r.session_id),
            )?
            .to_string(),
            "path" => checked("path", &r.path)?.to_string(),
            "cwd" => checked("cwd", r.cwd.as_deref().unwrap_or(""))?.to_string(),
            "verdict" => r.verdict.as_str().to_string(),
            "idempotency_key" => r.idempotency_key.clone(),
            "message" => checked("message", &r.message)?.to_string(),
            "permission_mode" => {
                let m = r.permission_mode.as_deref().unwrap_or("default");
                if !PERMISSION_MODES.contains(&m) {
                    return Err(InjectError::Unsafe {
                        what: "permission mode",
                        value: m.to_string(),
                        why: "not a known Claude Code permission mode",
                    });
                }
                m.to_string()
            }
            "openclaw_params" => checked("params", &openclaw_params(r))?.to_string(),
            other => return Err(InjectError::UnknownPlaceholder(format!("{{{other}}}"))),
        };
        out.push_str(&v);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
