//! Load and recovery benchmark for `lazarus serve` (driven by `scripts/bench-gateway.sh`).
//!
//! `load accept --bin PATH --dir DIR [--clients 64] [--sessions 64] [--seconds 5] [--run]`:
//! durable message accepts per second and latency percentiles with N concurrent keep-alive
//! clients over M sessions; beside it the bare write+fdatasync rate of the same disk (one
//! file in a loop, and 64 files by 64 threads). Without `--run` the gateway is started with
//! `--no-run` (inputs are recorded durably, sessions are not driven) so the figure is the
//! accept path alone; with `--run` a scripted model answers instantly and every message is
//! also run to idle (a turn start and a response appended per message, too).
//!
//! `--gateway-arg ARG` (repeated) passes ARG on to `lazarus serve`. The model is
//! `scripted-model-server` (beside `--bin`), a process of its own.
//!
//! `load recover --bin PATH --dir DIR [--sessions 1000]`: writes N interrupted sessions (an
//! input and an open turn each), starts the gateway and prints the time to ready (every
//! interrupted session re-queued) and until all are idle.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lazarus_ledger::Durability;
use lazarus_session::record::TurnStart;
use lazarus_session::{CreateOptions, LocalStore, Record, SessionId, Status, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const TOKEN: &str = "bench-token";

struct Args {
    mode: String,
    bin: PathBuf,
    dir: PathBuf,
    clients: usize,
    sessions: usize,
    seconds: u64,
    run: bool,
    /// More arguments for `lazarus serve` (`--gateway-arg=--http-threads=1`).
    gateway_args: Vec<String>,
}

fn args() -> Args {
    let mut a = Args {
        mode: String::new(),
        bin: PathBuf::from("target/release/lazarus"),
        dir: std::env::temp_dir().join("lazarus-bench-gateway"),
        clients: 64,
        sessions: 0,
        seconds: 5,
        run: false,
        gateway_args: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--bin" => a.bin = it.next().unwrap().into(),
            "--dir" => a.dir = it.next().unwrap().into(),
            "--clients" => a.clients = it.next().unwrap().parse().unwrap(),
            "--sessions" => a.sessions = it.next().unwrap().parse().unwrap(),
            "--seconds" => a.seconds = it.next().unwrap().parse().unwrap(),
            "--run" => a.run = true,
            "--gateway-arg" => a.gateway_args.push(it.next().unwrap()),
            m if a.mode.is_empty() => a.mode = m.to_string(),
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

fn main() {
    let a = args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    match a.mode.as_str() {
        "accept" => rt.block_on(accept(a)),
        "recover" => rt.block_on(recover(a)),
        m => panic!("mode must be accept or recover, not {m:?}"),
    }
}

struct Gw {
    child: std::process::Child,
    url: String,
    ready_line: String,
    ready_after: Duration,
}

impl Drop for Gw {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

fn start_gateway(a: &Args, model_url: &str, extra: &[&str]) -> Gw {
    use std::io::BufRead;
    let t0 = Instant::now();
    let mut child = Command::new(&a.bin)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .arg("--session-dir")
        .arg(a.dir.join("sessions"))
        .arg("--workspace-root")
        .arg(a.dir.join("workspaces"))
        .arg("--token-file")
        .arg(a.dir.join("token"))
        .args(["--base-url", model_url, "--max-tokens", "16"])
        .args(extra)
        .args(&a.gateway_args)
        .env("LAZARUS_TOKEN", TOKEN)
        .env("OPENAI_API_KEY", "bench")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start lazarus serve");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut url = String::new();
    let mut ready_line = String::new();
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 {
        let l = line.trim().to_string();
        line.clear();
        if let Some(u) = l.strip_prefix("lazarus gateway listening on ") {
            url = u.to_string();
        } else if l.starts_with("ready:") {
            ready_line = l;
            break;
        }
    }
    let ready_after = t0.elapsed();
    std::thread::spawn(move || {
        let mut l = String::new();
        while out.read_line(&mut l).map(|n| n > 0).unwrap_or(false) {
            l.clear();
        }
    });
    Gw {
        child,
        url,
        ready_line,
        ready_after,
    }
}

/// A keep-alive HTTP/1.1 connection.
struct Conn {
    r: BufReader<TcpStream>,
    host: String,
}

impl Conn {
    async fn new(url: &str) -> Conn {
        let host = url.strip_prefix("http://").unwrap().to_string();
        let s = TcpStream::connect(&host).await.unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            r: BufReader::new(s),
            host,
        }
    }

    async fn post(&mut self, path: &str, body: &str) -> (u16, String) {
        self.request("POST", path, body).await
    }

    async fn request(&mut self, method: &str, path: &str, body: &str) -> (u16, String) {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.r.get_mut().write_all(req.as_bytes()).await.unwrap();
        let mut line = String::new();
        self.r.read_line(&mut line).await.unwrap();
        let status: u16 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        let mut len = 0usize;
        loop {
            line.clear();
            self.r.read_line(&mut line).await.unwrap();
            let l = line.trim_end().to_ascii_lowercase();
            if l.is_empty() {
                break;
            }
            if let Some(v) = l.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut b = vec![0; len];
        self.r.read_exact(&mut b).await.unwrap();
        (status, String::from_utf8_lossy(&b).into_owned())
    }
}

/// The instant model in a process of its own (`scripted-model-server` beside `--bin`), as a
/// real model server would be: its work is not counted in the load client's latencies.
struct ModelProcess {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl ModelProcess {
    fn start(a: &Args) -> ModelProcess {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script.json");
        std::fs::write(
            &script,
            r#"{"steps": [{"repeat": true, "reply": {"kind": "response", "text": "ok"}}]}"#,
        )
        .unwrap();
        let bin = a.bin.with_file_name("scripted-model-server");
        let mut child = Command::new(&bin)
            .arg("--script")
            .arg(&script)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e} (cargo build --release -p lazarus-testkit --bin scripted-model-server)", bin.display()));
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("scripted-model-server said {line:?}"))
            .to_string();
        ModelProcess {
            child,
            url: format!("{url}/v1"),
            _dir: dir,
        }
    }
}

impl Drop for ModelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn instant_model() -> ScriptedServer {
    ScriptedServer::start(Script::new([
        Step::reply(ScriptedResponse::text("ok")).repeat()
    ]))
    .await
    .unwrap()
}

/// Bare write+fdatasync of 200-byte lines: one file in a loop, and `threads` files by as
/// many threads (the same parallelism the gateway sees).
fn bare_fsync(dir: &Path, threads: usize, secs: f64) -> (f64, f64) {
    fn one(p: PathBuf, secs: f64) -> u64 {
        use std::io::Write;
        let mut f = std::fs::File::create(&p).unwrap();
        let line = [b'x'; 199];
        let t0 = Instant::now();
        let mut n = 0u64;
        while t0.elapsed().as_secs_f64() < secs {
            f.write_all(&line).unwrap();
            f.write_all(b"\n").unwrap();
            f.sync_data().unwrap();
            n += 1;
        }
        let _ = std::fs::remove_file(&p);
        n
    }
    let single = one(dir.join("bare-single.bin"), secs) as f64 / secs;
    let hs: Vec<_> = (0..threads)
        .map(|i| {
            let p = dir.join(format!("bare-{i}.bin"));
            std::thread::spawn(move || one(p, secs))
        })
        .collect();
    let total: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    (single, total as f64 / secs)
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

/// 64 keep-alive clients posting messages for `a.seconds`: latencies of the accepted ones,
/// the errors, and the time taken. `resend`: after its first message every client sends that
/// one again, answered from the session's memory (no disk): the HTTP path's own ceiling.
async fn drive(url: &str, a: &Args, resend: bool) -> (Vec<Duration>, u64, f64) {
    let deadline = Instant::now() + Duration::from_secs(a.seconds);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    let url = Arc::new(url.to_string());
    for client in 0..a.clients {
        let url = url.clone();
        let session = client % a.sessions;
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::new(&url).await;
            let mut lat = Vec::new();
            let mut errors = 0u64;
            let mut k = 0u64;
            while Instant::now() < deadline {
                let m = if resend { 0 } else { k };
                let body = format!(
                    "{{\"message_id\":\"c{client}-{m}-{resend}\",\"text\":\"hello from client {client}, message {m}\"}}"
                );
                let t = Instant::now();
                let (st, _) = c
                    .post(&format!("/v1/sessions/s{session}/messages"), &body)
                    .await;
                if st == 202 || (resend && st == 200) {
                    lat.push(t.elapsed());
                } else {
                    errors += 1;
                }
                k += 1;
            }
            (lat, errors)
        }));
    }
    let mut lat = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.unwrap();
        lat.extend(l);
        errors += e;
    }
    (lat, errors, t0.elapsed().as_secs_f64())
}

async fn accept(mut a: Args) {
    if a.sessions == 0 {
        a.sessions = 64;
    }
    let _ = std::fs::remove_dir_all(&a.dir);
    std::fs::create_dir_all(&a.dir).unwrap();
    let model = ModelProcess::start(&a);
    let mut extra = vec!["--max-running", "64"];
    if !a.run {
        extra.push("--no-run");
    }
    let gw = start_gateway(&a, &model.url, &extra);
    let mut c = Conn::new(&gw.url).await;
    for s in 0..a.sessions {
        let (st, b) = c
            .post("/v1/sessions", &format!("{{\"id\":\"s{s}\"}}"))
            .await;
        assert_eq!(st, 201, "{b}");
    }
    let (mut lat, errors, took) = drive(&gw.url, &a, false).await;
    lat.sort();
    // how much the runs did meanwhile (they yield to accepts: fewer turns, more inputs each)
    let (_, metrics) = c.request("GET", "/metrics", "").await;
    let count = |kind: &str| -> u64 {
        let key = format!("lazarus_appends_total{{kind=\"{kind}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let (turns, inputs) = (count("turn_start"), count("input"));
    let rate = lat.len() as f64 / took;
    let dir = a.dir.join("sessions");
    let (single, parallel) = tokio::task::spawn_blocking(move || bare_fsync(&dir, 64, 2.0))
        .await
        .unwrap();
    println!(
        "gateway accepts ({}): {} clients over {} sessions for {:.1} s",
        if a.run {
            "sessions also run to idle by an instant model"
        } else {
            "--no-run: accept path only"
        },
        a.clients,
        a.sessions,
        took
    );
    println!(
        "  durable accepts/s: {rate:.0}   (202s: {}, errors: {errors})",
        lat.len()
    );
    if a.run {
        println!(
            "  turns started meanwhile: {turns} for {inputs} inputs ({:.1} inputs per turn)",
            inputs as f64 / turns.max(1) as f64
        );
    }
    println!(
        "  latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        pct(&lat, 0.50),
        pct(&lat, 0.90),
        pct(&lat, 0.99),
        pct(&lat, 1.0)
    );
    println!(
        "bare write+fdatasync on the same disk ({}):",
        a.dir.display()
    );
    println!("  one file, one thread:     {single:.0} /s");
    println!("  64 files, 64 threads:     {parallel:.0} /s");
    println!(
        "  gateway / one-file loop:  {:.2}x   gateway / 64-file parallel: {:.2}x",
        rate / single,
        rate / parallel
    );
    // issue 48's targets: the accept path alone at 0.8x the 64-file loop, and at 0.5x while
    // every message also runs its session; p99 under 20 ms for both
    let (which, target) = if a.run {
        ("accept_and_run", 0.5)
    } else {
        ("accept", 0.8)
    };
    println!(
        "RESULT {which}_vs_64_file_fdatasync_loop {:.2} >={target}",
        rate / parallel
    );
    println!("RESULT {which}_p99_ms {:.2} <20", pct(&lat, 0.99));
    if !a.run {
        // the same requests without the disk: what HTTP, routing and the session's memory
        // cost on these cores with this client beside them
        let (resent, _, took) = drive(&gw.url, &a, true).await;
        let ceiling = resent.len() as f64 / took;
        println!(
            "  HTTP ceiling (the same posts as resends, answered from memory, no disk): {ceiling:.0} /s; accepts / ceiling: {:.2}x; ceiling / 64-file loop: {:.2}x",
            rate / ceiling,
            ceiling / parallel
        );
    }
    drop(gw);
    drop(model);
}

async fn recover(mut a: Args) {
    if a.sessions == 0 {
        a.sessions = 1000;
    }
    let _ = std::fs::remove_dir_all(&a.dir);
    std::fs::create_dir_all(&a.dir).unwrap();
    let n = a.sessions;
    let dir = a.dir.clone();
    let t0 = Instant::now();
    tokio::task::spawn_blocking(move || {
        let store = LocalStore::with_durability(&dir.join("sessions"), Durability::None).unwrap();
        for i in 0..n {
            let id = SessionId::parse(&format!("r{i:05}")).unwrap();
            let ws = dir.join("workspaces").join(id.as_str());
            let s = store
                .create(CreateOptions {
                    id: Some(id),
                    meta: Some(serde_json::json!({"workspace": ws, "system_prompt": null})),
                })
                .unwrap();
            let mut s = s;
            let ack = s.append_input("m1", "user", "hello").unwrap();
            s.append(Record::TurnStart(TurnStart {
                turn: 1,
                prev_seq: None,
                inputs: vec![ack.seq],
            }))
            .unwrap();
        }
    })
    .await
    .unwrap();
    println!(
        "wrote {n} interrupted sessions in {} ms",
        t0.elapsed().as_millis()
    );
    let model = instant_model().await;
    let gw = start_gateway(&a, &model.base_url(), &["--max-running", "64"]);
    println!("recovery: {}", gw.ready_line);
    println!(
        "  process start to ready (all {n} interrupted sessions re-queued): {} ms",
        gw.ready_after.as_millis()
    );
    let store = LocalStore::open(&a.dir.join("sessions")).unwrap();
    let t1 = Instant::now();
    loop {
        // the gateway holds every lock, so listings say "running": replay each instead
        let ids: Vec<SessionId> = store.list().unwrap().into_iter().map(|s| s.id).collect();
        let idle = ids
            .iter()
            .filter(|id| {
                store
                    .load(id)
                    .map(|st| st.status() == Status::Idle)
                    .unwrap_or(false)
            })
            .count();
        let interrupted = n - idle;
        if idle == n {
            break;
        }
        if t1.elapsed() > Duration::from_secs(120) {
            println!("  not all finished after 120 s: {interrupted} not idle yet");
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "  all {n} resumed and run to idle (instant model, 64 at a time) {} ms after ready",
        t1.elapsed().as_millis()
    );
    drop(gw);
    model.shutdown().await;
}
