//! What ACP costs, measured against real processes (a custom harness: the targets are
//! percentiles and first-byte times, which criterion does not report).
//!
//! * `proxy`: the latency `lazarus acp --wrap` adds per message. One process (this bench) is
//!   the editor; the agent is this same binary started again as a minimal echo agent
//!   (`LAZARUS_ACP_BENCH_AGENT=1`). The same runs go editor → agent directly and editor →
//!   proxy → agent: request round trips (`session/set_mode`, one message each way) and
//!   streamed `session/update`s (one way, stamped with the wall clock when sent), then the
//!   end of a prompt's turn, which the proxy holds until its journal is on disk. Target:
//!   p99(proxied) − p99(direct) ≤ 1 ms per message.
//! * `load`: `session/load` of a 10,000-message session (5,000 prompts and 5,000 answers,
//!   a shell call every fourth turn) made by `lazarus acp` and filled here: the time to the
//!   first `session/update` (target ≤ 100 ms) and to the answer (target ≤ 1 s), each load a
//!   fresh `lazarus acp` process already initialized.
//!
//! Run with `scripts/bench-acp.sh` (builds the release binary; `--quick` for fewer rounds).
//! Prints `RESULT name value unit` lines.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lazarus_ledger::{Durability, Options, Writer};
use lazarus_session::record::{
    Input, Item, OutcomeStatus, Record, Response, ToolIntent, ToolOutcome, ToolStart, TurnStart,
};
use serde_json::{Value, json};

const AGENT_ENV: &str = "LAZARUS_ACP_BENCH_AGENT";

fn main() {
    if std::env::var_os(AGENT_ENV).is_some() {
        echo_agent();
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let lazarus = lazarus_bin();
    let which: Vec<&str> = ["proxy", "load"]
        .into_iter()
        .filter(|w| {
            let named: Vec<&String> = args[1..].iter().filter(|a| !a.starts_with("--")).collect();
            named.is_empty() || named.iter().any(|a| a.as_str() == *w)
        })
        .collect();
    if which.contains(&"proxy") {
        proxy(&lazarus, quick);
    }
    if which.contains(&"load") {
        load(&lazarus, quick);
    }
}

fn lazarus_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("LAZARUS") {
        return PathBuf::from(p);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let p = target.join("release/lazarus");
    assert!(
        p.exists(),
        "{} is missing: cargo build --release -p lazarus-cli, or set LAZARUS",
        p.display()
    );
    p
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The echo agent: answers `initialize` and `session/new`, any other request with `{}`; a
/// `session/prompt` whose text is `stream N GAP_US` first sends N `agent_message_chunk`s, one
/// every GAP_US microseconds, each stamped with the time it was written.
fn echo_agent() {
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout());
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(m) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (m.get("id"), m.get("method").and_then(Value::as_str))
        else {
            continue;
        };
        let result = match method {
            "initialize" => {
                json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": true},
                "agentInfo": {"name": "echo", "version": "1"}})
            }
            "session/new" => json!({"sessionId": "echo-1"}),
            "session/prompt" => {
                let text = m["params"]["prompt"][0]["text"].as_str().unwrap_or("");
                let mut w = text.split_whitespace();
                if w.next() == Some("stream") {
                    let n: u64 = w.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                    let gap: u64 = w.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                    let sid = m["params"]["sessionId"].clone();
                    for i in 0..n {
                        let u = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
                            "sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": format!("{} {i} some streamed words of an answer", now_ns())}}}});
                        let _ = writeln!(out, "{u}");
                        let _ = out.flush();
                        if gap > 0 {
                            std::thread::sleep(Duration::from_micros(gap));
                        }
                    }
                }
                json!({"stopReason": "end_turn"})
            }
            _ => json!({}),
        };
        let _ = writeln!(
            out,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        );
        let _ = out.flush();
    }
}

/// An editor on a child's stdio: lines read on a thread, each with the time it arrived.
struct Editor {
    child: Child,
    stdin: ChildStdin,
    rx: mpsc::Receiver<(u64, Instant, Value)>,
    next: u64,
}

impl Editor {
    fn spawn(mut cmd: Command) -> Editor {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::with_capacity(1 << 16, stdout).lines() {
                let Ok(line) = line else { return };
                let (t, at) = (now_ns(), Instant::now());
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if tx.send((t, at, v)).is_err() {
                    return;
                }
            }
        });
        Editor {
            child,
            stdin,
            rx,
            next: 0,
        }
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let m = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        writeln!(self.stdin, "{m}").expect("write");
        self.stdin.flush().expect("flush");
        self.next
    }

    /// Waits for the answer to `id`; `on_update` sees every notification before it.
    fn answer(&mut self, id: u64, mut on_update: impl FnMut(u64, Instant, &Value)) -> Value {
        loop {
            let (t, at, v) = self
                .rx
                .recv_timeout(Duration::from_secs(60))
                .expect("an answer within 60 s");
            if v.get("id").and_then(Value::as_u64) == Some(id) && v.get("method").is_none() {
                assert!(v.get("error").is_none(), "request {id} failed: {v}");
                return v["result"].clone();
            }
            on_update(t, at, &v);
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.answer(id, |_, _, _| {})
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn result(name: &str, value: f64, unit: &str) {
    println!("RESULT {name} {value:.3} {unit}");
}

struct Latencies {
    rtt_us: Vec<f64>,
    one_way_us: Vec<f64>,
    turn_end_us: Vec<f64>,
}

fn measure(cmd: Command, ws: &Path, rounds: usize, streamed: u64) -> Latencies {
    let mut ed = Editor::spawn(cmd);
    ed.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let sid = ed.call("session/new", json!({"cwd": ws, "mcpServers": []}))["sessionId"].clone();
    let mut rtt_us = Vec::with_capacity(rounds);
    for i in 0..rounds + rounds / 10 {
        let t = Instant::now();
        ed.call(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": format!("m{}", i % 3)}),
        );
        if i >= rounds / 10 {
            rtt_us.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    let mut one_way_us = Vec::new();
    let mut turn_end_us = Vec::new();
    for _ in 0..5 {
        let id = ed.send(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": format!("stream {streamed} 200")}]}),
        );
        let mut last = Instant::now();
        ed.answer(id, |t, at, v| {
            if let Some(text) = v["params"]["update"]["content"]["text"].as_str()
                && let Some(sent) = text.split(' ').next().and_then(|s| s.parse::<u64>().ok())
            {
                one_way_us.push(t.saturating_sub(sent) as f64 / 1e3);
                last = at;
            }
        });
        turn_end_us.push(last.elapsed().as_secs_f64() * 1e6);
    }
    Latencies {
        rtt_us,
        one_way_us,
        turn_end_us,
    }
}

fn proxy(lazarus: &Path, quick: bool) {
    let me = std::env::current_exe().expect("the bench's own path");
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let (rounds, streamed) = if quick { (1000, 1000) } else { (10_000, 4000) };
    let agent = || {
        let mut c = Command::new(&me);
        c.env(AGENT_ENV, "1");
        c
    };
    let direct = measure(agent(), &ws, rounds, streamed);
    let mut wrapped = Command::new(lazarus);
    wrapped
        .env(AGENT_ENV, "1")
        .env("RUST_LOG", "error")
        .arg("acp")
        .arg("--session-dir")
        .arg(tmp.path().join("journal"))
        .arg("--wrap")
        .arg("--")
        .arg(&me);
    let proxied = measure(wrapped, &ws, rounds, streamed);
    let report = |what: &str, d: &mut Vec<f64>, p: &mut Vec<f64>, per: f64| {
        for q in [0.5, 0.99] {
            let (a, b) = (percentile(d, q), percentile(p, q));
            let tag = if q == 0.5 { "p50" } else { "p99" };
            result(&format!("acp_proxy_{what}_direct_{tag}"), a, "us");
            result(&format!("acp_proxy_{what}_proxied_{tag}"), b, "us");
            result(
                &format!("acp_proxy_{what}_added_per_message_{tag}"),
                (b - a) / per,
                "us",
            );
        }
    };
    let (mut d, mut p) = (direct, proxied);
    report("request_rtt", &mut d.rtt_us, &mut p.rtt_us, 2.0);
    report("update_one_way", &mut d.one_way_us, &mut p.one_way_us, 1.0);
    report("turn_end", &mut d.turn_end_us, &mut p.turn_end_us, 1.0);
    result(
        "acp_proxy_messages_measured",
        p.rtt_us.len() as f64 * 2.0 + p.one_way_us.len() as f64,
        "messages",
    );
}

/// Makes a session with `lazarus acp` (so its world and header are the real ones), then
/// appends `turns` prompts and answers to it directly.
fn make_session(lazarus: &Path, dir: &Path, ws: &Path, turns: u64) -> String {
    let mut ed = Editor::spawn(acp_cmd(lazarus, dir));
    ed.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let sid = ed.call("session/new", json!({"cwd": ws, "mcpServers": []}))["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    drop(ed);
    let opts = Options {
        durability: Durability::None,
        ..Options::default()
    };
    let (w, _) = Writer::open(dir, &sid, opts).expect("open the session's ledger");
    let put = |r: Record| {
        w.append_json(r.kind(), &r.data_json().expect("encode"))
            .expect("append")
            .seq
    };
    let words =
        "the test fails because the config file is read before the build step sets the path; ";
    let mut prev = None;
    let mut turn = 0;
    for i in 0..turns {
        let input = put(Record::Input(Input {
            input_id: format!("in-{i}"),
            source: "acp".into(),
            text: format!("prompt {i}: {}", words.repeat(1 + (i % 4) as usize)),
        }));
        turn += 1;
        prev = Some(put(Record::TurnStart(TurnStart {
            turn,
            prev_seq: prev,
            inputs: vec![input],
        })));
        if i % 4 == 3 {
            let call_id = format!("call-{i}");
            put(Record::Response(Response {
                turn,
                items: vec![Item::ToolCall {
                    call_id: call_id.clone(),
                    name: "shell".into(),
                    arguments: r#"{"command":"cargo test -q"}"#.into(),
                }],
                usage: None,
                stop_reason: Some("tool_calls".into()),
                failure: None,
                model: None,
                provider_extra: None,
                attempts: Vec::new(),
            }));
            put(Record::ToolIntent(ToolIntent {
                call_id: call_id.clone(),
                turn,
                tool: "shell".into(),
                arguments: r#"{"command":"cargo test -q"}"#.into(),
                idempotent: false,
                idempotency_key: format!("{sid}:{call_id}"),
                rerun_basis: None,
            }));
            put(Record::ToolStart(ToolStart {
                call_id: call_id.clone(),
                process: None,
            }));
            put(Record::ToolOutcome(ToolOutcome {
                call_id,
                status: OutcomeStatus::Ok,
                result: "test result: ok. 12 passed; 0 failed\n".repeat(4),
                exit_code: Some(0),
                duration_ms: Some(1200),
            }));
            turn += 1;
            prev = Some(put(Record::TurnStart(TurnStart {
                turn,
                prev_seq: prev,
                inputs: Vec::new(),
            })));
        }
        put(Record::Response(Response {
            turn,
            items: vec![Item::Text {
                text: format!("answer {i}: {}", words.repeat(2 + (i % 6) as usize)),
            }],
            usage: None,
            stop_reason: Some("stop".into()),
            failure: None,
            model: None,
            provider_extra: None,
            attempts: Vec::new(),
        }));
    }
    drop(w);
    sid
}

fn acp_cmd(lazarus: &Path, dir: &Path) -> Command {
    let mut c = Command::new(lazarus);
    // a model name, so nothing asks a model server which models it has: a load asks no model
    c.env("RUST_LOG", "error")
        .arg("acp")
        .arg("--model")
        .arg("bench-model")
        .arg("--session-dir")
        .arg(dir);
    c
}

fn load(lazarus: &Path, quick: bool) {
    let tmp = tempfile::tempdir().expect("tempdir");
    // LAZARUS_ACP_BENCH_DIR keeps the session there (to profile one load by hand)
    let root = std::env::var_os("LAZARUS_ACP_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let (dir, ws) = (root.join("sessions"), root.join("ws"));
    std::fs::create_dir_all(&ws).expect("ws");
    let sid = make_session(lazarus, &dir, &ws, 5000);
    eprintln!("load: session {sid} in {}", dir.display());
    let size = std::fs::metadata(dir.join(format!("{sid}.jsonl")))
        .map(|m| m.len())
        .unwrap_or(0);
    result("acp_load_session_bytes", size as f64, "bytes");
    let (mut first_ms, mut whole_ms) = (Vec::new(), Vec::new());
    let mut updates = 0;
    for _ in 0..if quick { 3 } else { 10 } {
        let mut ed = Editor::spawn(acp_cmd(lazarus, &dir));
        ed.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        let t = Instant::now();
        let id = ed.send(
            "session/load",
            json!({"sessionId": sid, "cwd": ws, "mcpServers": []}),
        );
        let mut first = None;
        let mut n = 0;
        ed.answer(id, |_, at, v| {
            if v.get("method").and_then(Value::as_str) == Some("session/update") {
                first.get_or_insert(at);
                n += 1;
            }
        });
        whole_ms.push(t.elapsed().as_secs_f64() * 1e3);
        first_ms.push(first.map_or(f64::NAN, |f| (f - t).as_secs_f64() * 1e3));
        updates = n;
    }
    assert!(
        updates >= 10_000,
        "the load replayed {updates} updates, fewer than the 10,000 messages"
    );
    result("acp_load_updates", updates as f64, "updates");
    for (name, v) in [("first_update", &mut first_ms), ("whole", &mut whole_ms)] {
        result(&format!("acp_load_{name}_median"), percentile(v, 0.5), "ms");
        result(&format!("acp_load_{name}_max"), percentile(v, 1.0), "ms");
    }
}
