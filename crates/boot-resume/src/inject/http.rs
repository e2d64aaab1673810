//! HTTP(S) through reqwest's blocking client: the Lazarus gateway's resume endpoint and
//! readiness polling (which also accepts a command).
use super::{InjectError, ResumeRequest};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Largest response body read from a gateway.
const MAX_BODY: u64 = 1 << 20;

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

/// The body (at most [`MAX_BODY`] bytes), as text.
fn body_start_full(resp: reqwest::blocking::Response) -> String {
    use std::io::Read;
    let mut b = Vec::new();
    let _ = resp.take(MAX_BODY).read_to_end(&mut b);
    String::from_utf8_lossy(&b).into_owned()
}

fn body_start(resp: reqwest::blocking::Response) -> String {
    use std::io::Read;
    let mut b = Vec::new();
    let _ = resp.take(MAX_BODY).read_to_end(&mut b);
    String::from_utf8_lossy(&b).chars().take(200).collect()
}

/// Posts a resume event to a Lazarus gateway: `POST {url}/v1/sessions/{id}/events`. The
/// detail, and whether the gateway leaves the session to its owner (it recorded the event,
/// and cannot honour the session's world: `"runs_here": false`, with why and the command that
/// resumes it).
pub fn post_resume(
    base: &str,
    token: Option<&str>,
    r: &ResumeRequest,
    timeout: Duration,
) -> Result<(String, bool), InjectError> {
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
        let answer: serde_json::Value =
            serde_json::from_str(&body_start_full(resp)).unwrap_or_default();
        if answer["runs_here"] == serde_json::Value::Bool(false) {
            let n = &answer["needs_owner"];
            return Ok((
                format!(
                    "HTTP {status}: recorded; the gateway leaves it to its owner: {}; resume it with: {}",
                    n["reason"]
                        .as_str()
                        .unwrap_or("its world is not the gateway's"),
                    n["resume_with"]
                        .as_str()
                        .unwrap_or("lazarus run --session ID")
                ),
                true,
            ));
        }
        Ok((format!("HTTP {status}"), false))
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
