//! The gateway's limits against the real `lazarus serve`: cursors past the end, an existence
//! check that fails, the connection cap with its header and idle timeouts, and running out
//! of file descriptors under a small `ulimit -n`.

mod serve_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use serve_common::*;

/// A model address nobody listens on: these gateways run with `--no-run`.
const NO_MODEL: &str = "http://127.0.0.1:9/v1";

/// An answer: status, lower-cased head, body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::String(self.body.clone()))
    }
    fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
    fn has_retry_after(&self) -> bool {
        self.head.contains("\r\nretry-after: ")
    }
}

/// Sends `req` on a new connection and reads one answer (`Content-Length` bodies only: no
/// stream is expected to succeed where this is used).
fn exchange(url: &str, req: &str) -> std::io::Result<Answer> {
    let hostport = url.strip_prefix("http://").unwrap();
    let mut s = TcpStream::connect(hostport)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    s.write_all(req.as_bytes())?;
    read_answer(&mut BufReader::new(s))
}

fn read_answer(r: &mut impl BufRead) -> std::io::Result<Answer> {
    let mut head = String::new();
    loop {
        let mut l = String::new();
        if r.read_line(&mut l)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("connection closed; head so far {head:?}"),
            ));
        }
        head.push_str(&l.to_ascii_lowercase());
        if l == "\r\n" {
            break;
        }
    }
    let status: u16 = head[9..12].parse().unwrap();
    let len = head
        .split("\r\n")
        .find_map(|h| h.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    Ok(Answer {
        status,
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn req(method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> String {
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\n"
    );
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        r.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        ));
    } else {
        r.push_str("\r\n");
    }
    r
}

fn ask(url: &str, method: &str, path: &str, body: Option<Value>) -> Answer {
    let b = body.map(|v| v.to_string());
    exchange(url, &req(method, path, &[], b.as_deref()))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

const MAX: u64 = u64::MAX;

#[test]
fn cursors_past_the_last_record_are_refused_on_records_and_stream() {
    let dir = tempdir();
    let g = Gateway::start(&mut serve_cmd(dir.path(), NO_MODEL, &["--no-run"]));
    let url = g.url.as_str();
    assert_eq!(
        ask(url, "POST", "/v1/sessions", Some(json!({"id": "c"}))).status,
        201
    );
    for m in ["m1", "m2"] {
        let a = ask(
            url,
            "POST",
            "/v1/sessions/c/messages",
            Some(json!({"message_id": m, "text": "hello"})),
        );
        assert_eq!(a.status, 202, "{}", a.body);
    }
    // the records endpoint
    for after in [MAX, MAX - 1, 3] {
        let a = ask(
            url,
            "GET",
            &format!("/v1/sessions/c/records?after={after}"),
            None,
        );
        assert_eq!(a.status, 400, "after={after}: {}", a.body);
        assert_eq!(a.code(), "bad_cursor", "{}", a.body);
        assert!(
            a.body.contains("beyond the session's last record (2)"),
            "{}",
            a.body
        );
    }
    let a = ask(url, "GET", "/v1/sessions/c/records?after=2", None);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json(), json!({"records": [], "next_after": null}));
    let a = ask(
        url,
        "GET",
        &format!("/v1/sessions/c/records?after=1&limit={MAX}"),
        None,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["next_after"], json!(2), "{}", a.body);
    let a = ask(url, "GET", "/v1/sessions/c/records?limit=0", None);
    assert_eq!(
        (a.status, a.code()),
        (400, "bad_query".into()),
        "{}",
        a.body
    );
    let a = ask(
        url,
        "GET",
        "/v1/sessions/c/records?after=18446744073709551616",
        None,
    );
    assert_eq!(
        (a.status, a.code()),
        (400, "bad_query".into()),
        "{}",
        a.body
    );
    // the live tail: `?after=` and `Last-Event-ID`
    for after in [MAX, MAX - 1, 3] {
        let a = exchange(
            url,
            &req(
                "GET",
                &format!("/v1/sessions/c/stream?after={after}"),
                &[],
                None,
            ),
        )
        .unwrap();
        assert_eq!(
            (a.status, a.code()),
            (400, "bad_cursor".into()),
            "after={after}: {}",
            a.body
        );
        let id = after.to_string();
        let a = exchange(
            url,
            &req(
                "GET",
                "/v1/sessions/c/stream",
                &[("Last-Event-ID", &id)],
                None,
            ),
        )
        .unwrap();
        assert_eq!(
            (a.status, a.code()),
            (400, "bad_cursor".into()),
            "Last-Event-ID {after}: {}",
            a.body
        );
        assert!(a.body.contains("Last-Event-ID"), "{}", a.body);
    }
    let a = exchange(
        url,
        &req(
            "GET",
            "/v1/sessions/c/stream",
            &[("Last-Event-ID", "18446744073709551616")],
            None,
        ),
    )
    .unwrap();
    assert_eq!(
        (a.status, a.code()),
        (400, "bad_last_event_id".into()),
        "{}",
        a.body
    );
    // good cursors still stream, from where they say
    let ev = sse_events(
        url,
        "/v1/sessions/c/stream",
        Some(1),
        1,
        Duration::from_secs(10),
    );
    assert_eq!(ev.first().map(|e| e.0), Some(2), "{ev:?}");
    let ev = sse_events(
        url,
        "/v1/sessions/c/stream?after=0",
        None,
        2,
        Duration::from_secs(10),
    );
    assert_eq!(ev.iter().map(|e| e.0).collect::<Vec<_>>(), [1, 2]);
}

/// `cmd` as an unprivileged user when this test runs as root (so that a mode-000 file is
/// really unreadable), with `dir` given to that user and the binary copied into it (the
/// build directory may not be reachable for that user). `None` when not root.
fn unprivileged(cmd: &Command, dir: &Path) -> Option<Command> {
    use std::os::unix::process::CommandExt;
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    let bin = dir.join("lazarus");
    std::fs::copy(cmd.get_program(), &bin).unwrap();
    fn chown_all(p: &Path) {
        std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
        if p.is_dir() {
            for e in std::fs::read_dir(p).unwrap() {
                chown_all(&e.unwrap().path());
            }
        }
    }
    chown_all(dir);
    let mut c = Command::new(&bin);
    c.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.uid(65534).gid(65534);
    Some(c)
}

#[test]
fn an_existence_check_that_fails_is_an_error_not_a_verdict() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let sessions = dir.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::create_dir_all(dir.path().join("workspaces")).unwrap();
    std::fs::create_dir_all(dir.path().join("xdg")).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let plain = serve_cmd(dir.path(), NO_MODEL, &["--no-run"]);
    let (mut cmd, dropped) = match unprivileged(&plain, dir.path()) {
        Some(c) => (c, true),
        None => (serve_cmd(dir.path(), NO_MODEL, &["--no-run"]), false),
    };
    // `x.jsonl` is there, but the gateway cannot read it: whether session x exists is unknown
    let x = sessions.join("x.jsonl");
    std::fs::write(&x, b"whatever\n").unwrap();
    if dropped {
        std::os::unix::fs::chown(&x, Some(0), Some(0)).unwrap();
    }
    std::fs::set_permissions(&x, std::fs::Permissions::from_mode(0o000)).unwrap();
    let g = Gateway::start(&mut cmd);
    let url = g.url.as_str();
    let a = ask(url, "POST", "/v1/sessions", Some(json!({"id": "x"})));
    assert_eq!(a.status, 500, "not 409 already_exists: {}", a.body);
    assert!(
        a.body.contains("ermission denied"),
        "the cause is named: {}",
        a.body
    );
    let a = exchange(url, &req("GET", "/v1/sessions/x/stream", &[], None)).unwrap();
    assert_eq!(a.status, 500, "not 404: {}", a.body);
    assert!(a.body.contains("ermission denied"), "{}", a.body);
    let a = ask(url, "GET", "/v1/sessions/x/records", None);
    assert_eq!(a.status, 500, "not 404: {}", a.body);
    // nothing was made for the refused creation
    let mut names: Vec<String> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["x.jsonl"]);
    assert!(!dir.path().join("workspaces/x").exists());
    // a session that is really missing is still 404, and a new one is still created
    let a = exchange(url, &req("GET", "/v1/sessions/y/stream", &[], None)).unwrap();
    assert_eq!(a.status, 404, "{}", a.body);
    assert_eq!(
        ask(url, "POST", "/v1/sessions", Some(json!({"id": "y"}))).status,
        201
    );
}

/// Waits until the server closes `s` (EOF or reset); false if it is still open after `max`.
fn closed_by_server(s: &mut TcpStream, max: Duration) -> bool {
    s.set_read_timeout(Some(max)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

fn connect(url: &str) -> TcpStream {
    TcpStream::connect(url.strip_prefix("http://").unwrap()).unwrap()
}

#[test]
fn connections_over_the_cap_get_429_health_answers_and_idle_ones_are_closed() {
    let dir = tempdir();
    let g = Gateway::start(&mut serve_cmd(
        dir.path(),
        NO_MODEL,
        &[
            "--no-run",
            "--max-connections",
            "4",
            // long enough that the four idle connections are still open when the fifth
            // comes, on a loaded machine
            "--header-timeout",
            "3s",
            "--idle-timeout",
            "4s",
        ],
    ));
    let url = g.url.as_str();
    assert_eq!(
        ask(url, "POST", "/v1/sessions", Some(json!({"id": "s"}))).status,
        201
    );
    // four connections that send nothing take every place
    let mut idle: Vec<TcpStream> = (0..4).map(|_| connect(url)).collect();
    // The gateway accepts them in its own time (a loaded machine may take a while): ask
    // until the answer says the places are taken, well within the header timeout.
    let asked = std::time::Instant::now();
    let a = loop {
        let a = exchange(url, &req("GET", "/v1/sessions", &[], None)).unwrap();
        if a.status != 200 || asked.elapsed() > Duration::from_millis(2500) {
            break a;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(a.status, 429, "{}", a.body);
    assert_eq!(a.code(), "too_many_connections");
    assert!(a.has_retry_after(), "{}", a.head);
    let a = exchange(url, &req("GET", "/healthz", &[], None)).unwrap();
    assert_eq!(a.status, 200, "/healthz answers over the cap: {}", a.body);
    // the header timeout closes them, and the places are free again
    for s in &mut idle {
        assert!(
            closed_by_server(s, Duration::from_secs(15)),
            "a connection that sent no request head was not closed"
        );
    }
    let a = exchange(url, &req("GET", "/v1/sessions", &[], None)).unwrap();
    assert_eq!(a.status, 200, "{}", a.body);

    // a head sent a byte at a time (slowloris): bytes keep moving, so only the header
    // timeout can close it
    let mut s = connect(url);
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut closed = false;
    for b in head.iter() {
        if s.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(_) => panic!("answered a request whose head never ended"),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    assert!(
        closed,
        "a head trickling in for {} bytes was kept open",
        head.len()
    );
    // a keep-alive connection after its answer: closed after the header timeout too
    let mut s = connect(url);
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    assert_eq!(read_answer(&mut r).unwrap().status, 200);
    assert!(
        closed_by_server(&mut s, Duration::from_secs(15)),
        "idle keep-alive kept open"
    );
    // a body that stops half-way: closed after the idle timeout
    let mut s = connect(url);
    s.write_all(
        format!(
            "POST /v1/sessions/s/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"text\":"
        )
        .as_bytes(),
    )
    .unwrap();
    assert!(
        closed_by_server(&mut s, Duration::from_secs(15)),
        "stalled body kept open"
    );
    // a live tail that is read is never idle: keep-alive comments come within the timeout
    let mut s = connect(url);
    s.write_all(
        format!("GET /v1/sessions/s/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    let t0 = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while t0.elapsed() < Duration::from_secs(5) {
        match s.read(&mut buf) {
            Ok(0) => panic!(
                "the live tail was closed after {:?}: {}",
                t0.elapsed(),
                String::from_utf8_lossy(&got)
            ),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("live tail: {e}"),
        }
    }
    assert!(String::from_utf8_lossy(&got).contains(" 200 "));
}

/// `lazarus serve` under `ulimit -n N` (soft and hard).
fn with_ulimit(n: u32, cmd: &Command) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c
}

/// Every `.lock` has its ledger, no temporary file is left, every workspace belongs to a
/// session.
fn assert_nothing_left_behind(state: &Path) {
    let sessions = state.join("sessions");
    let names: Vec<String> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for n in &names {
        if let Some(id) = n.strip_suffix(".lock") {
            assert!(
                names.contains(&format!("{id}.jsonl")),
                "{n} left without its session: {names:?}"
            );
        } else {
            assert!(n.ends_with(".jsonl"), "stray file {n}: {names:?}");
        }
    }
    for e in std::fs::read_dir(state.join("workspaces")).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            names.contains(&format!("{n}.jsonl")),
            "workspace {n} left without its session"
        );
    }
}

#[test]
fn out_of_file_descriptors_is_overload_and_leaves_nothing_behind() {
    let dir = tempdir();
    // sessions made before, with plenty of descriptors
    {
        let mut g = Gateway::start(&mut serve_cmd(dir.path(), NO_MODEL, &["--no-run"]));
        for i in 0..40 {
            let a = ask(
                &g.url,
                "POST",
                "/v1/sessions",
                Some(json!({"id": format!("p{i}")})),
            );
            assert_eq!(a.status, 201, "{}", a.body);
        }
        assert!(g.term().success());
    }
    // 64 descriptors: each open session holds two, each connection one
    let base = serve_cmd(dir.path(), NO_MODEL, &["--no-run"]);
    let g = Gateway::start(&mut with_ulimit(64, &base));
    let url = g.url.as_str();
    // idle connections: pressure that can be released
    let held: Vec<TcpStream> = (0..8).map(|_| connect(url)).collect();
    std::thread::sleep(Duration::from_millis(200));
    // messages to existing sessions open them, until the descriptors run short
    let mut first_refused = None;
    for i in 0..40 {
        let a = ask(
            url,
            "POST",
            &format!("/v1/sessions/p{i}/messages"),
            Some(json!({"message_id": "m", "text": "hi"})),
        );
        match a.status {
            202 => {}
            429 => {
                assert_eq!(a.code(), "overloaded", "{}", a.body);
                assert!(a.has_retry_after(), "{}", a.head);
                assert!(a.body.contains("file descriptors"), "{}", a.body);
                first_refused = Some(i);
                break;
            }
            s => panic!("message to p{i}: {s} {}", a.body),
        }
    }
    let opened = first_refused.expect("64 descriptors never ran short for 40 sessions");
    eprintln!("{opened} sessions opened under `ulimit -n 64` before the first 429");
    assert!(opened > 0, "not a single session could be opened");
    // creating a session now is overload too, and makes nothing
    for i in 0..5 {
        let a = ask(
            url,
            "POST",
            "/v1/sessions",
            Some(json!({"id": format!("n{i}")})),
        );
        assert_eq!(a.status, 429, "create n{i}: {}", a.body);
        assert_eq!(a.code(), "overloaded", "{}", a.body);
        assert!(a.has_retry_after(), "{}", a.head);
    }
    assert_nothing_left_behind(dir.path());
    let a = exchange(url, &req("GET", "/healthz", &[], None)).unwrap();
    assert_eq!(a.status, 200, "/healthz under pressure: {}", a.body);
    // release the pressure: the gateway serves again
    drop(held);
    let t0 = Instant::now();
    let created = loop {
        let a = ask(url, "POST", "/v1/sessions", Some(json!({"id": "after"})));
        if a.status == 201 {
            break true;
        }
        assert_eq!(a.status, 429, "{}", a.body);
        if t0.elapsed() > Duration::from_secs(20) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        created,
        "no session could be created after the pressure was released"
    );
    let a = exchange(url, &req("GET", "/healthz", &[], None)).unwrap();
    assert_eq!(a.status, 200);
    let a = ask(url, "GET", "/v1/sessions/p0", None);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_nothing_left_behind(dir.path());
}
