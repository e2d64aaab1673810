//! Injecting a resume: into a Lazarus gateway over HTTP(S), or through a command template run
//! without a shell. Also readiness waiting, the idempotency key, and what counts as "accepted":
//! a resume is reported only once the injection is known to have been accepted — HTTP 2xx,
//! exit status 0, or the session's own transcript recording the resume message.
use crate::classify::Format;
use crate::verdict::Verdict;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The default resume message.
pub const DEFAULT_MESSAGE: &str = "[System] Your previous turn was interrupted (the gateway restarted or the machine slept) \
while you were working. Continue from the existing transcript and finish the interrupted task. \
A tool call that was running may have half-run: check its effects before repeating it.";

/// Default Lazarus gateway URL.
pub const DEFAULT_GATEWAY: &str = "http://127.0.0.1:7077";

/// Largest response body read from a gateway.
const MAX_BODY: u64 = 1 << 20;

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
        }
    }

    /// The preset for a format, if there is one.
    pub fn for_format(f: Format) -> Option<Preset> {
        match f {
            Format::Openclaw => Some(Preset::Openclaw),
            Format::ClaudeCode => Some(Preset::Claude),
            Format::Codex => Some(Preset::Codex),
            Format::Pi => Some(Preset::Pi),
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

/// How a running command's success can also be seen: the session transcript at `path`
/// grows past `from` with a line holding `needle` (the JSON-escaped start of the message).
#[derive(Debug, Clone)]
pub struct TranscriptAck {
    /// The transcript.
    pub path: PathBuf,
    /// Its size before the command started.
    pub from: u64,
    /// What the new part must contain.
    pub needle: Vec<u8>,
}

impl TranscriptAck {
    /// Watches `path` (its current size is the start) for `message`.
    pub fn new(path: &Path, message: &str) -> TranscriptAck {
        let from = std::fs::metadata(path).map_or(0, |m| m.len());
        // The first words are enough and avoid characters a program may escape its own way.
        let start: String = message
            .chars()
            .take_while(|c| *c != '\n')
            .take(48)
            .collect();
        let json = serde_json::to_string(&start).unwrap_or_default();
        let needle = json
            .trim_start_matches('"')
            .trim_end_matches('"')
            .as_bytes()
            .to_vec();
        TranscriptAck {
            path: path.to_path_buf(),
            from,
            needle,
        }
    }

    /// Whether the session recorded the message since.
    pub fn seen(&self) -> bool {
        use std::os::unix::fs::FileExt;
        let Ok(f) = crate::fsutil::open_regular(&self.path) else {
            return false;
        };
        let Ok(len) = f.metadata().map(|m| m.len()) else {
            return false;
        };
        if len <= self.from || self.needle.is_empty() {
            return false;
        }
        let n = (len - self.from).min(16 << 20) as usize;
        let mut buf = vec![0u8; n];
        let mut got = 0;
        while got < n {
            match f.read_at(&mut buf[got..], self.from + got as u64) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(_) => return false,
            }
        }
        crate::lines::contains(&buf[..got], &self.needle)
    }
}

fn output_tail(log: &Path) -> String {
    let text = crate::fsutil::read_small(log, 64 << 20).unwrap_or_default();
    String::from_utf8_lossy(&text[text.len().saturating_sub(400)..])
        .trim()
        .to_string()
}

/// Runs `argv` (no shell) in its own process group in `cwd`, output to `log` (0600).
/// Accepted: exit 0; or, with `ack`, the session recording the resume message while the
/// command still runs (it is left running to finish the resumed turn). A non-zero exit is a
/// failure; so is neither happening within `grace`, and the command is then stopped.
pub fn run_command(
    argv: &[String],
    cwd: Option<&Path>,
    log: &Path,
    grace: Duration,
    ack: Option<&TranscriptAck>,
) -> Result<String, InjectError> {
    let program = argv.first().ok_or(InjectError::EmptyTemplate)?.clone();
    let spawn_err = |source| InjectError::Spawn {
        program: program.clone(),
        source,
    };
    if let Some(d) = log.parent() {
        crate::fsutil::private_dir(d).map_err(spawn_err)?;
    }
    let out = crate::fsutil::open_private(log, true).map_err(spawn_err)?;
    let err = out.try_clone().map_err(spawn_err)?;
    let mut cmd = Command::new(&program);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let mut child = cmd.spawn().map_err(spawn_err)?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(format!("{program} exited 0")),
            Ok(Some(st)) => {
                return Err(InjectError::Exit {
                    program,
                    status: st.to_string(),
                    output: output_tail(log),
                });
            }
            Ok(None) if ack.is_some_and(TranscriptAck::seen) => {
                return Ok(format!(
                    "the session recorded the resume message; {program} left running (pid {}) to finish the turn",
                    child.id()
                ));
            }
            Ok(None) if start.elapsed() >= grace => {
                if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
                }
                std::thread::sleep(Duration::from_millis(200));
                let _ = child.kill();
                let _ = child.wait();
                return Err(InjectError::NotAcknowledged {
                    program,
                    grace,
                    output: output_tail(log),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(source) => return Err(InjectError::Spawn { program, source }),
        }
    }
}

/// Resolves the directory a command runs in.
pub fn command_cwd(t: &Template, r: &ResumeRequest) -> Result<Option<PathBuf>, InjectError> {
    if !t.in_session_cwd {
        return Ok(None);
    }
    match &r.cwd {
        Some(c) if Path::new(c).is_dir() => Ok(Some(PathBuf::from(c))),
        other => Err(InjectError::NoCwd(other.clone().unwrap_or_default())),
    }
}

/// Parses and checks an http(s) base URL.
pub fn parse_url(u: &str) -> Result<url::Url, InjectError> {
    let url = url::Url::parse(u).map_err(|_| InjectError::BadUrl(u.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(InjectError::BadUrl(u.to_string()));
    }
    Ok(url)
}

fn client(timeout: Duration) -> Result<reqwest::blocking::Client, InjectError> {
    reqwest::blocking::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .user_agent("lazarus-boot-resume")
        .build()
        .map_err(|e| InjectError::Net {
            url: String::new(),
            message: e.to_string(),
        })
}

fn net(url: &url::Url, e: reqwest::Error) -> InjectError {
    let mut message = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        message.push_str(": ");
        message.push_str(&s.to_string());
        src = s.source();
    }
    InjectError::Net {
        url: url.to_string(),
        message,
    }
}

fn body_start(resp: reqwest::blocking::Response) -> String {
    use std::io::Read;
    let mut b = Vec::new();
    let _ = resp.take(MAX_BODY).read_to_end(&mut b);
    String::from_utf8_lossy(&b).chars().take(200).collect()
}

/// Posts a resume event to a Lazarus gateway: `POST {url}/v1/sessions/{id}/events`.
pub fn post_resume(
    base: &str,
    token: Option<&str>,
    r: &ResumeRequest,
    timeout: Duration,
) -> Result<String, InjectError> {
    let mut url = parse_url(base)?;
    url.path_segments_mut()
        .map_err(|_| InjectError::BadUrl(base.to_string()))?
        .pop_if_empty()
        .extend(["v1", "sessions", r.session_id.as_str(), "events"]);
    let body = serde_json::json!({
        "type": "resume",
        "reason": format!("{}: {}", r.verdict.as_str(), r.reason),
        "idempotency_key": r.idempotency_key,
    });
    let mut req = client(timeout)?.post(url.clone()).json(&body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().map_err(|e| net(&url, e))?;
    let status = resp.status().as_u16();
    if resp.status().is_success() {
        Ok(format!("HTTP {status}"))
    } else {
        Err(InjectError::Status {
            url: url.to_string(),
            status,
            body: body_start(resp),
        })
    }
}

fn probe(target: &str) -> Result<(), InjectError> {
    if target.starts_with("http://") || target.starts_with("https://") {
        let url = parse_url(target)?;
        let resp = client(Duration::from_secs(2))?
            .get(url.clone())
            .send()
            .map_err(|e| net(&url, e))?;
        if resp.status().is_success() {
            return Ok(());
        }
        return Err(InjectError::Status {
            url: target.to_string(),
            status: resp.status().as_u16(),
            body: body_start(resp).chars().take(100).collect(),
        });
    }
    let argv = shlex::split(target).ok_or_else(|| InjectError::BadTemplate(target.into()))?;
    let (p, rest) = argv.split_first().ok_or(InjectError::EmptyTemplate)?;
    match Command::new(p)
        .args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(InjectError::Exit {
            program: p.to_string(),
            status: s.to_string(),
            output: String::new(),
        }),
        Err(source) => Err(InjectError::Spawn {
            program: p.to_string(),
            source,
        }),
    }
}

/// Waits until `target` is ready: an http(s) URL answering 2xx, or a command exiting 0.
/// Polls with backoff (100 ms doubling to 2 s) until `timeout`.
pub fn wait_ready(target: &str, timeout: Duration) -> Result<Duration, InjectError> {
    use backon::{BlockingRetryable, ExponentialBuilder};
    let start = Instant::now();
    let policy = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_total_delay(Some(timeout))
        .without_max_times();
    (|| probe(target))
        .retry(policy)
        .when(|e| !matches!(e, InjectError::BadUrl(_) | InjectError::BadTemplate(_)))
        .call()
        .map(|()| start.elapsed())
        .map_err(|e| InjectError::NotReady(timeout, e.to_string()))
}
