//! The accept path under kill -9: many clients post messages to a `--no-run` gateway while it
//! is SIGKILLed at a random moment, round after round, alternating `--sync shared` (the
//! default: deferred appends made durable by overlapping `syncfs` batches) and `--sync
//! per-file`. Afterwards every message answered 202 is recorded exactly once, nothing is
//! recorded that nobody sent, and a resend of each acknowledged id is answered as a duplicate
//! with the same seq. `LAZARUS_ACCEPT_KILL_ROUNDS` sets the rounds (default 6).

mod serve_common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lazarus_session::{LocalStore, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};
use serde_json::json;
use serve_common::*;

const SESSIONS: usize = 6;
const CLIENTS: usize = 12;

fn session(k: usize) -> String {
    format!("acc{k}")
}

/// A model that answers "ok" at once, on a runtime of its own (kept alive by the caller).
fn instant_model() -> (tokio::runtime::Runtime, ScriptedServer) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::text("ok"),
        )
        .repeat()])))
        .unwrap();
    (rt, server)
}

#[test]
fn acknowledged_messages_survive_kill_9_exactly_once() {
    let rounds: usize = std::env::var("LAZARUS_ACCEPT_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let (_rt, server) = instant_model();
    let dir = tempdir();
    // message id -> (session, seq) of every 202; every id ever sent
    let acked: Arc<Mutex<HashMap<String, (usize, u64)>>> = Arc::default();
    let sent: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut seed = 0x5eed_u64;
    for round in 0..rounds {
        let sync = if round % 2 == 0 { "shared" } else { "per-file" };
        let mut g = Gateway::start(&mut serve_cmd(
            dir.path(),
            &server.base_url(),
            &["--no-run", "--sync", sync],
        ));
        if round == 0 {
            for k in 0..SESSIONS {
                let (st, v) = call(
                    &g.url,
                    "POST",
                    "/v1/sessions",
                    Some(json!({"id": session(k)})),
                );
                assert_eq!(st, 201, "{v}");
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (url, acked, sent, stop) =
                    (g.url.clone(), acked.clone(), sent.clone(), stop.clone());
                std::thread::spawn(move || {
                    let k = c % SESSIONS;
                    let mut n = 0u64;
                    let mut ok = 0u64;
                    let mut failed_after_kill = false;
                    let mut last: Option<(String, u64)> = None;
                    while !stop.load(Ordering::SeqCst) || !failed_after_kill {
                        // now and then the last acknowledged id again: the same gateway must
                        // answer it as a duplicate with its seq (the exactly-once rule on the
                        // fast path)
                        if n % 7 == 6
                            && let Some((id, seq)) = last.take()
                        {
                            let body = json!({"message_id": id, "text": "again"});
                            let path = format!("/v1/sessions/{}/messages", session(k));
                            let b = body.to_string();
                            if let Ok((st, text)) =
                                request(&url, "POST", &path, Some(TOKEN), &[], Some(b.as_bytes()))
                            {
                                assert_eq!(st, 200, "{id} resent: {text}");
                                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                                assert_eq!(v["seq"].as_u64(), Some(seq), "{id} resent: {text}");
                            }
                        }
                        let id = format!("r{round}-c{c}-{n}");
                        n += 1;
                        sent.lock().unwrap().insert(id.clone());
                        let body = json!({"message_id": id, "text": format!("message {id}")});
                        let path = format!("/v1/sessions/{}/messages", session(k));
                        match request(
                            &url,
                            "POST",
                            &path,
                            Some(TOKEN),
                            &[],
                            Some(body.to_string().as_bytes()),
                        ) {
                            Ok((202, text)) => {
                                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                                let seq = v["seq"].as_u64().expect("a 202 names its seq");
                                acked.lock().unwrap().insert(id.clone(), (k, seq));
                                last = Some((id, seq));
                                ok += 1;
                            }
                            Ok((st, text)) => panic!("{id}: {st} {text}"),
                            Err(_) => {
                                if stop.load(Ordering::SeqCst) {
                                    failed_after_kill = true;
                                } else {
                                    std::thread::sleep(Duration::from_millis(5));
                                }
                            }
                        }
                    }
                    ok
                })
            })
            .collect();
        // Kill at a random moment once the clients are under way (a first sync on a busy
        // file system can take a while: wait for some acknowledgements, not a fixed time).
        let before = acked.lock().unwrap().len();
        let t0 = std::time::Instant::now();
        while acked.lock().unwrap().len() < before + 10 && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        std::thread::sleep(Duration::from_millis((seed >> 33) % 300));
        stop.store(true, Ordering::SeqCst);
        g.kill9();
        let accepted: u64 = clients.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(
            accepted > 0,
            "round {round} ({sync}): no message was accepted before the kill, so nothing was tested"
        );
    }

    // Every acknowledged id once, at the seq it was acknowledged with; nothing unknown.
    let store = LocalStore::open(&dir.path().join("sessions")).unwrap();
    let acked = acked.lock().unwrap().clone();
    let sent = sent.lock().unwrap().clone();
    let mut recorded: HashMap<String, (usize, u64)> = HashMap::new();
    for k in 0..SESSIONS {
        let id = lazarus_session::SessionId::parse(&session(k)).unwrap();
        for r in store.records(&id, 0, usize::MAX).unwrap() {
            if r.kind != "input" {
                continue;
            }
            let mid = r.data["input_id"].as_str().unwrap().to_string();
            assert!(sent.contains(&mid), "{mid}: recorded, never sent");
            assert!(
                recorded.insert(mid.clone(), (k, r.seq)).is_none(),
                "{mid}: recorded twice"
            );
        }
    }
    for (mid, at) in &acked {
        assert_eq!(
            recorded.get(mid),
            Some(at),
            "{mid}: acknowledged at {at:?}, recorded at {:?}",
            recorded.get(mid)
        );
    }
    // A resend of an acknowledged id is a duplicate, answered with the original seq.
    let g = Gateway::start(&mut serve_cmd(
        dir.path(),
        &server.base_url(),
        &["--no-run"],
    ));
    for (mid, (k, seq)) in acked.iter().take(50) {
        let (st, v) = call(
            &g.url,
            "POST",
            &format!("/v1/sessions/{}/messages", session(*k)),
            Some(json!({"message_id": mid, "text": "again"})),
        );
        assert_eq!(st, 200, "{mid}: {v}");
        assert_eq!(v["duplicate"], true, "{v}");
        assert_eq!(v["seq"].as_u64(), Some(*seq), "{v}");
    }
    eprintln!(
        "{rounds} kills: {} messages acknowledged, {} recorded, {} sent",
        acked.len(),
        recorded.len(),
        sent.len()
    );
}

/// A live tail opened before a message is accepted sees its input record, with the seq the
/// 202 named: the fast path shows it once durable (`Deferred::on_durable`), not never.
#[test]
fn a_live_tail_sees_an_input_accepted_on_the_fast_path() {
    let (_rt, server) = instant_model();
    let dir = tempdir();
    let g = Gateway::start(&mut serve_cmd(
        dir.path(),
        &server.base_url(),
        &["--no-run"],
    ));
    let (st, v) = call(&g.url, "POST", "/v1/sessions", Some(json!({"id": "tail"})));
    assert_eq!(st, 201, "{v}");
    let url = g.url.clone();
    let tail = std::thread::spawn(move || {
        sse_events(
            &url,
            "/v1/sessions/tail/stream?after=0",
            None,
            1,
            Duration::from_secs(20),
        )
    });
    std::thread::sleep(Duration::from_millis(300));
    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/tail/messages",
        Some(json!({"message_id": "live-1", "text": "hello"})),
    );
    assert_eq!(st, 202, "{v}");
    let evs = tail.join().unwrap();
    assert_eq!(evs.len(), 1, "the live tail saw no input record: {evs:?}");
    assert_eq!(evs[0].0, v["seq"].as_u64().unwrap());
    assert_eq!(evs[0].1["kind"], "input");
}

/// The nice value in a `/proc/…/stat` line: after "(comm) ", state is field 3; nice is 19.
fn nice_in(stat: &str) -> i64 {
    let rest = &stat[stat.rfind(')').expect("stat has a comm") + 2..];
    rest.split(' ')
        .nth(16)
        .expect("nice field")
        .parse()
        .unwrap()
}

/// The nice value of every thread of `pid` named `name` (from /proc).
fn thread_nices(pid: u32, name: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the gateway's threads") {
        let t = t.expect("a thread entry").path();
        let Ok(comm) = std::fs::read_to_string(t.join("comm")) else {
            continue; // gone meanwhile
        };
        if !comm.trim().starts_with(name) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(t.join("stat")) else {
            continue;
        };
        // after "(comm) ": state is field 3; nice is field 19
        let rest = &stat[stat.rfind(')').expect("stat has a comm") + 2..];
        let nice: i64 = rest
            .split(' ')
            .nth(16)
            .expect("nice field")
            .parse()
            .unwrap();
        out.push(nice);
    }
    out
}

/// The threads that drive sessions are scheduled below those that accept messages (nice 10
/// more than the process's by default, `--run-nice 0` for the same), so that accepting stays
/// fast while sessions run. Relative to the nice value the gateway was started with (a test
/// run under `nice` included).
#[test]
fn the_threads_that_run_sessions_yield_to_those_that_accept() {
    for (args, gap) in [(&[][..], 10), (&["--run-nice", "0"][..], 0)] {
        let dir = tempdir();
        let mut cmd = serve_cmd(dir.path(), "http://127.0.0.1:9/v1", args);
        let g = Gateway::start(cmd.args(["--model", "scripted", "--no-run"]));
        let pid = g.child.id();
        let run = thread_nices(pid, "lazarus-run");
        let http = thread_nices(pid, "lazarus-http");
        assert!(
            !run.is_empty() && !http.is_empty(),
            "run {run:?}, http {http:?}"
        );
        let base = nice_in(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap());
        let want = (base + gap).min(19);
        assert!(
            run.iter().all(|&n| n == want),
            "{args:?}: the run threads' nice values are {run:?}, not {want} (the process's: {base})"
        );
        assert!(
            http.iter().all(|&n| n == base),
            "http threads at nice {http:?}, not the process's {base}"
        );
    }
}
