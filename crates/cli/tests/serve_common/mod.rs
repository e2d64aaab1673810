//! Shared by the `serve_*` tests: start the real `lazarus serve` on a free loopback port,
//! talk HTTP to it (a minimal client), read its SSE stream, kill it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A session id written in the test (checked; a bad one is a bug in the test).
#[allow(dead_code)]
fn sid(id: &str) -> lazarus_session::SessionId {
    lazarus_session::SessionId::parse(id).expect("a valid session id")
}

pub const BIN: &str = env!("CARGO_BIN_EXE_lazarus");
pub const TOKEN: &str = "test-token-0123456789";

pub struct Gateway {
    pub child: Child,
    pub url: String,
    pub ready_line: String,
}

impl Gateway {
    /// Starts `lazarus serve` (port 0) and waits for its address; not for readiness.
    pub fn spawn(cmd: &mut Command) -> Gateway {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(match std::env::var_os("LAZARUS_TEST_GATEWAY_LOG") {
                Some(p) => Stdio::from(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(p)
                        .expect("open LAZARUS_TEST_GATEWAY_LOG"),
                ),
                None => Stdio::null(),
            })
            .spawn()
            .expect("spawn lazarus serve");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let url = loop {
            line.clear();
            if out.read_line(&mut line).unwrap() == 0 {
                let st = child.wait().unwrap();
                panic!("lazarus serve exited before listening: {st}");
            }
            if let Some(u) = line.trim().strip_prefix("lazarus gateway listening on ") {
                break u.to_string();
            }
        };
        // the rest of stdout: the ready line, then drain so the pipe never fills
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut l = String::new();
            while out.read_line(&mut l).map(|n| n > 0).unwrap_or(false) {
                let _ = tx.send(l.trim().to_string());
                l.clear();
            }
        });
        let ready_line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        Gateway {
            child,
            url,
            ready_line,
        }
    }

    pub fn start(cmd: &mut Command) -> Gateway {
        let g = Gateway::spawn(cmd);
        g.wait_ready(Duration::from_secs(30));
        g
    }

    pub fn wait_ready(&self, timeout: Duration) {
        let t0 = Instant::now();
        loop {
            if let Ok((200, _)) = get(&self.url, "/readyz", None) {
                return;
            }
            assert!(
                t0.elapsed() < timeout,
                "gateway not ready after {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kill9(&mut self) {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        let _ = self.child.wait();
    }

    pub fn term(&mut self) -> std::process::ExitStatus {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        self.child.wait().unwrap()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill9();
        }
    }
}

/// `lazarus serve` on 127.0.0.1:0 with the test token and a scripted model.
pub fn serve_cmd(state: &Path, model_url: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(["serve", "--listen", "127.0.0.1:0", "--max-tokens", "64"])
        .arg("--session-dir")
        .arg(state.join("sessions"))
        .arg("--workspace-root")
        .arg(state.join("workspaces"))
        .arg("--token-file")
        .arg(state.join("gateway.token"))
        .args(["--base-url", model_url])
        .args(extra)
        .env("LAZARUS_TOKEN", TOKEN)
        .env("OPENAI_API_KEY", "test")
        .env("XDG_STATE_HOME", state.join("xdg"))
        .env_remove("NOTIFY_SOCKET");
    c
}

/// `lazarus serve` on a shared (PostgreSQL) store, no `--session-dir`: gateway `name` has
/// its own token file and state directory under `state`.
pub fn serve_pg(state: &Path, store: &str, model_url: &str, name: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(["serve", "--listen", "127.0.0.1:0", "--max-tokens", "64"])
        .args(["--store", store])
        .arg("--workspace-root")
        .arg(state.join("workspaces"))
        .arg("--token-file")
        .arg(state.join(format!("{name}.token")))
        .args(["--base-url", model_url])
        .args(extra)
        .env("LAZARUS_TOKEN", TOKEN)
        .env("OPENAI_API_KEY", "test")
        .env("XDG_STATE_HOME", state.join(format!("xdg-{name}")))
        .env_remove("LAZARUS_SESSION_DIR")
        .env_remove("LAZARUS_STORE")
        .env_remove("NOTIFY_SOCKET");
    c
}

/// One HTTP/1.1 request with `Connection: close`; returns (status, body text).
pub fn request(
    url: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> std::io::Result<(u16, String)> {
    let hostport = url.strip_prefix("http://").unwrap();
    let mut s = TcpStream::connect(hostport)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or(b"");
    if !body.is_empty() || method == "POST" {
        req.push_str("Content-Type: application/json\r\n");
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    // a server may answer (413) before reading a large body
    let _ = s.write_all(body);
    let mut r = BufReader::new(s);
    let mut status_line = String::new();
    r.read_line(&mut status_line)?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {status_line:?}")))?;
    let mut len = None;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        r.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let lower = h.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            len = v.trim().parse::<usize>().ok();
        }
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
    let mut out = Vec::new();
    if chunked {
        loop {
            let mut l = String::new();
            r.read_line(&mut l)?;
            let n = usize::from_str_radix(l.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            let mut buf = vec![0; n + 2];
            r.read_exact(&mut buf)?;
            out.extend_from_slice(&buf[..n]);
        }
    } else if let Some(n) = len {
        out.resize(n, 0);
        r.read_exact(&mut out)?;
    } else {
        r.read_to_end(&mut out)?;
    }
    Ok((status, String::from_utf8_lossy(&out).into_owned()))
}

pub fn get(url: &str, path: &str, token: Option<&str>) -> std::io::Result<(u16, String)> {
    request(url, "GET", path, token, &[], None)
}

/// Authorized JSON call; panics on transport errors.
pub fn call(url: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let b = body.map(|v| v.to_string());
    let (st, text) = request(
        url,
        method,
        path,
        Some(TOKEN),
        &[],
        b.as_deref().map(str::as_bytes),
    )
    .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (st, v)
}

/// Polls `GET /v1/sessions/{id}` until `pred` holds.
pub fn wait_session(
    url: &str,
    id: &str,
    timeout: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let t0 = Instant::now();
    loop {
        let (st, v) = call(url, "GET", &format!("/v1/sessions/{id}"), None);
        if st == 200 && pred(&v) {
            return v;
        }
        assert!(
            t0.elapsed() < timeout,
            "session {id}: condition not met after {timeout:?}; last: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads SSE events `(id, data)` from the stream until `n` arrived or `timeout`.
pub fn sse_events(
    url: &str,
    path: &str,
    last_event_id: Option<u64>,
    n: usize,
    timeout: Duration,
) -> Vec<(u64, Value)> {
    let hostport = url.strip_prefix("http://").unwrap();
    let mut s = TcpStream::connect(hostport).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    let mut req = format!(
        "GET {path} HTTP/1.1\r\nHost: {hostport}\r\nAuthorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n"
    );
    if let Some(id) = last_event_id {
        req.push_str(&format!("Last-Event-ID: {id}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains(" 200 "), "stream: {line}");
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
    }
    // de-chunk into a text buffer, split events on blank lines
    let t0 = Instant::now();
    let mut text = String::new();
    let mut events = Vec::new();
    while events.len() < n && t0.elapsed() < timeout {
        let mut l = String::new();
        if r.read_line(&mut l).unwrap_or(0) == 0 {
            break;
        }
        let size = usize::from_str_radix(l.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let mut buf = vec![0; size + 2];
        if r.read_exact(&mut buf).is_err() {
            break;
        }
        text.push_str(&String::from_utf8_lossy(&buf[..size]));
        while let Some(end) = text.find("\n\n") {
            let ev: String = text.drain(..end + 2).collect();
            let mut id = None;
            let mut data = String::new();
            for l in ev.lines() {
                if let Some(v) = l.strip_prefix("id:") {
                    id = v.trim().parse::<u64>().ok();
                } else if let Some(v) = l.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            if let Some(id) = id {
                events.push((id, serde_json::from_str(&data).unwrap_or(Value::Null)));
            }
        }
    }
    events
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

pub fn session_path(state: &Path, id: &str) -> PathBuf {
    state.join("sessions").join(format!("{id}.jsonl"))
}

/// Input records stored for `id`, counted one by one from the store (not from a map keyed
/// by input id, which would hide a duplicate).
pub fn input_records(store: &dyn lazarus_session::Store, id: &str) -> usize {
    store
        .records(&sid(id), 0, usize::MAX)
        .unwrap()
        .iter()
        .filter(|r| r.kind == "input")
        .count()
}
