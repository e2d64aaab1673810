//! Injecting a resume: into a Lazarus gateway over HTTP, or through a command template run
//! without a shell. Also readiness waiting and the idempotency key.
use crate::classify::Format;
use crate::verdict::Verdict;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The default resume message.
pub const DEFAULT_MESSAGE: &str = "[System] Your previous turn was interrupted (the gateway restarted or the machine slept) \
while you were working. Continue from the existing transcript and finish the interrupted task. \
A tool call that was running may have half-run: check its effects before repeating it.";

/// Default Lazarus gateway URL.
pub const DEFAULT_GATEWAY: &str = "http://127.0.0.1:7077";

/// Why an injection or readiness check failed.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// The URL is not `http://host[:port][/path]`.
    #[error(
        "unsupported URL {0:?}: only http://HOST[:PORT][/PATH] is supported (use a loopback gateway address)"
    )]
    BadUrl(String),
    /// Network failure.
    #[error("{url}: {source} (is the gateway running? see --wait-ready)")]
    Net {
        /// The URL.
        url: String,
        /// The I/O error.
        source: std::io::Error,
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
    /// Reply was not HTTP.
    #[error("{url}: malformed HTTP reply")]
    BadReply {
        /// The URL.
        url: String,
    },
    /// An empty template.
    #[error("empty --inject-command template")]
    EmptyTemplate,
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
        "unknown placeholder {0} in --inject-command (known: {{session_id}} {{session_key}} {{path}} {{cwd}} {{verdict}} {{idempotency_key}} {{message}} {{openclaw_params}})"
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
    /// The session's cwd is unknown or gone, but the command must run there.
    #[error("session working directory {0:?} does not exist; cannot run the resume command there")]
    NoCwd(String),
    /// Readiness timed out.
    #[error("gateway not ready after {0:?}: {1}")]
    NotReady(Duration, String),
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

/// A command template: argv split by whitespace, placeholders substituted per element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// The argv with placeholders.
    pub argv: Vec<String>,
    /// Run the command in the session's working directory.
    pub in_session_cwd: bool,
}

impl Template {
    /// Parses a template string (split by whitespace; no shell quoting).
    pub fn parse(s: &str) -> Result<Template, InjectError> {
        let argv: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        if argv.is_empty() {
            return Err(InjectError::EmptyTemplate);
        }
        Ok(Template {
            argv,
            in_session_cwd: false,
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
    /// `openclaw gateway call agent --params <json with sessionKey, message, idempotencyKey>`
    Openclaw,
    /// `claude -p --resume <id> <message>`, run in the session's cwd
    Claude,
    /// `codex exec resume <id> <message>`, run in the session's cwd
    Codex,
}

impl Preset {
    /// The template.
    pub fn template(self) -> Template {
        let (s, cwd) = match self {
            Preset::Openclaw => (
                "openclaw gateway call agent --params {openclaw_params}",
                false,
            ),
            Preset::Claude => ("claude -p --resume {session_id} {message}", true),
            Preset::Codex => ("codex exec resume {session_id} {message}", true),
        };
        let argv = s.split_whitespace().map(str::to_string).collect();
        Template {
            argv,
            in_session_cwd: cwd,
        }
    }

    /// The format the preset resumes.
    pub fn format(self) -> Format {
        match self {
            Preset::Openclaw => Format::Openclaw,
            Preset::Claude => Format::ClaudeCode,
            Preset::Codex => Format::Codex,
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

fn openclaw_params(r: &ResumeRequest) -> String {
    let mut m = serde_json::Map::new();
    match &r.session_key {
        Some(k) => m.insert("sessionKey".into(), k.clone().into()),
        None => m.insert("sessionId".into(), r.session_id.clone().into()),
    };
    m.insert("message".into(), r.message.clone().into());
    m.insert("idempotencyKey".into(), r.idempotency_key.clone().into());
    m.insert("deliver".into(), true.into());
    serde_json::Value::Object(m).to_string()
}

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
            "openclaw_params" => checked("params", &openclaw_params(r))?.to_string(),
            other => return Err(InjectError::UnknownPlaceholder(format!("{{{other}}}"))),
        };
        out.push_str(&v);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Runs `argv` (no shell) in `cwd`, output to `log`. Success: exit 0, or still running
/// after `grace` (a resumed agent turn may take long; it is left running).
pub fn run_command(
    argv: &[String],
    cwd: Option<&Path>,
    log: &Path,
    grace: Duration,
) -> Result<String, InjectError> {
    let program = argv.first().ok_or(InjectError::EmptyTemplate)?.clone();
    let out = std::fs::File::create(log).map_err(|source| InjectError::Spawn {
        program: program.clone(),
        source,
    })?;
    let err = out.try_clone().map_err(|source| InjectError::Spawn {
        program: program.clone(),
        source,
    })?;
    let mut cmd = Command::new(&program);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let mut child = cmd.spawn().map_err(|source| InjectError::Spawn {
        program: program.clone(),
        source,
    })?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(format!("{program} exited 0")),
            Ok(Some(st)) => {
                let text = std::fs::read(log).unwrap_or_default();
                let tail = String::from_utf8_lossy(&text[text.len().saturating_sub(400)..])
                    .trim()
                    .to_string();
                return Err(InjectError::Exit {
                    program,
                    status: st.to_string(),
                    output: tail,
                });
            }
            Ok(None) if start.elapsed() >= grace => {
                return Ok(format!(
                    "{program} still running after {grace:?} (left running, pid {})",
                    child.id()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
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

struct Url {
    host: String,
    port: u16,
    path: String,
}

fn parse_url(u: &str) -> Result<Url, InjectError> {
    let rest = u
        .strip_prefix("http://")
        .ok_or_else(|| InjectError::BadUrl(u.to_string()))?;
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (
            h.to_string(),
            p.parse().map_err(|_| InjectError::BadUrl(u.to_string()))?,
        ),
        _ => (hostport.to_string(), 80),
    };
    if host.is_empty() {
        return Err(InjectError::BadUrl(u.to_string()));
    }
    Ok(Url {
        host,
        port,
        path: path.trim_end_matches('/').to_string(),
    })
}

/// Percent-encodes a path segment (everything but unreserved characters).
pub fn encode_segment(s: &str) -> String {
    let mut o = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

/// A minimal HTTP/1.1 request; returns (status, body).
pub fn http(
    method: &str,
    url: &str,
    extra_path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<(u16, String), InjectError> {
    let u = parse_url(url)?;
    let full = format!("{url}{extra_path}");
    let net = |source| InjectError::Net {
        url: full.clone(),
        source,
    };
    let addr = (u.host.trim_start_matches('[').trim_end_matches(']'), u.port)
        .to_socket_addrs()
        .map_err(net)?
        .next()
        .ok_or_else(|| InjectError::BadUrl(url.to_string()))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(net)?;
    s.set_read_timeout(Some(timeout)).map_err(net)?;
    s.set_write_timeout(Some(timeout)).map_err(net)?;
    let path = format!("{}{}", u.path, extra_path);
    let path = if path.is_empty() {
        "/".to_string()
    } else {
        path
    };
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\nUser-Agent: lazarus-boot-resume\r\n",
        u.host, u.port
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or(b"");
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(req.as_bytes()).map_err(net)?;
    s.write_all(body).map_err(net)?;
    let mut resp = Vec::new();
    let _ = s.take(1 << 20).read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp);
    let status = text
        .strip_prefix("HTTP/1.")
        .and_then(|r| r.get(2..5))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or(InjectError::BadReply { url: full.clone() })?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// Posts a resume event to a Lazarus gateway: `POST {url}/v1/sessions/{id}/events`.
pub fn post_resume(
    url: &str,
    token: Option<&str>,
    r: &ResumeRequest,
    timeout: Duration,
) -> Result<String, InjectError> {
    let body = serde_json::json!({
        "type": "resume",
        "reason": format!("{}: {}", r.verdict.as_str(), r.reason),
        "idempotency_key": r.idempotency_key,
    })
    .to_string();
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("Authorization", a.as_str()));
    }
    let extra = format!("/v1/sessions/{}/events", encode_segment(&r.session_id));
    let (status, resp) = http(
        "POST",
        url,
        &extra,
        &headers,
        Some(body.as_bytes()),
        timeout,
    )?;
    if (200..300).contains(&status) {
        Ok(format!("HTTP {status}"))
    } else {
        Err(InjectError::Status {
            url: format!("{url}{extra}"),
            status,
            body: resp.chars().take(200).collect(),
        })
    }
}

/// Waits until `target` is ready: an `http://` URL answering 2xx, or a command exiting 0.
/// Polls with backoff (100 ms doubling to 2 s) until `timeout`.
pub fn wait_ready(target: &str, timeout: Duration) -> Result<Duration, InjectError> {
    let start = Instant::now();
    let mut delay = Duration::from_millis(100);
    let mut last_err;
    loop {
        let r = if target.starts_with("http://") {
            http("GET", target, "", &[], None, Duration::from_secs(2)).and_then(|(st, b)| {
                if (200..300).contains(&st) {
                    Ok(())
                } else {
                    Err(InjectError::Status {
                        url: target.to_string(),
                        status: st,
                        body: b.chars().take(100).collect(),
                    })
                }
            })
        } else {
            let argv: Vec<&str> = target.split_whitespace().collect();
            match argv.split_first() {
                None => Err(InjectError::EmptyTemplate),
                Some((p, rest)) => match Command::new(p)
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
                },
            }
        };
        match r {
            Ok(()) => return Ok(start.elapsed()),
            Err(e) => last_err = e.to_string(),
        }
        if start.elapsed() + delay > timeout {
            return Err(InjectError::NotReady(timeout, last_err));
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}
