//! Compaction on demand over the gateway: `POST /v1/sessions/{id}/compact` writes one
//! `compaction` record (seen live by the session's readers), the next request carries the
//! summary instead of the summarised turns, and a running session or one that owes work is
//! refused with 409 and nothing written.

mod serve_common;

use std::time::Duration;

use lazarus_agent::runner::COMPACTED_PREFIX;
use lazarus_session::record::{Record, Response, TurnStart};
use lazarus_session::{CreateOptions, LocalStore, SessionId, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};
use serve_common::*;

const SUMMARY: &str = "SUMMARY: three questions about the weather, three answers.";

fn has_summary(req: &Value) -> bool {
    req.to_string()
        .contains(&json!(COMPACTED_PREFIX).to_string()[1..30])
}

fn compactions(store: &LocalStore, id: &str) -> usize {
    store
        .records(&id.parse::<SessionId>().unwrap(), 0, 10_000)
        .unwrap()
        .iter()
        .filter(|r| r.kind == "compaction")
        .count()
}

/// Waits (30 s at most) until session `id` holds `n` compaction records.
fn wait_compactions(store: &LocalStore, id: &str, n: usize) {
    let t0 = std::time::Instant::now();
    while compactions(store, id) < n {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no compaction {n} in {id} after 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Summaries for requests without tools, a slow answer for "slowly", else a short answer.
fn summarising_server(rt: &tokio::runtime::Runtime) -> ScriptedServer {
    rt.block_on(ScriptedServer::start(Script::new([
        // the summarising request is the one without tools
        Step::reply(ScriptedResponse::text(SUMMARY))
            .when(When::HasTools { yes: false })
            .repeat(),
        Step::reply(ScriptedResponse::text("slow answer"))
            .when(When::LastUserContains {
                text: "slowly".into(),
            })
            .delay_ms(1500)
            .repeat(),
        Step::reply(ScriptedResponse::text("an answer")).repeat(),
    ])))
    .unwrap()
}

/// Message `m{n}` to session `id`, accepted.
fn ask(url: &str, id: &str, n: u64, text: &str) {
    let (st, v) = call(
        url,
        "POST",
        &format!("/v1/sessions/{id}/messages"),
        Some(json!({"message_id": format!("m{n}"), "text": text})),
    );
    assert_eq!(st, 202, "{v}");
}

/// [`ask`], then wait until its turn `n` is answered.
fn ask_and_wait(url: &str, id: &str, n: u64, text: &str) {
    ask(url, id, n, text);
    wait_session(url, id, Duration::from_secs(30), |v| {
        v["status"] == "idle" && v["turns"] == n
    });
}

/// Creates session `id` and runs three question turns in it.
fn three_turns(url: &str, id: &str) {
    let (st, v) = call(url, "POST", "/v1/sessions", Some(json!({"id": id})));
    assert_eq!(st, 201, "{v}");
    for n in 1..=3 {
        ask_and_wait(url, id, n, &format!("question {n}"));
    }
}

#[test]
fn compact_over_the_gateway_summarises_once_and_the_next_request_carries_the_summary() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = summarising_server(&rt);
    let dir = tempdir();
    let g = Gateway::start(&mut serve_cmd(dir.path(), &server.base_url(), &[]));
    three_turns(&g.url, "long");
    let store = LocalStore::open(&dir.path().join("sessions")).unwrap();

    // an unknown body field is refused before anything happens
    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/long/compact",
        Some(json!({"keep": 1})),
    );
    assert_eq!(st, 400, "{v}");
    assert_eq!(compactions(&store, "long"), 0);

    let (st, v) = call(
        &g.url,
        "POST",
        "/v1/sessions/long/compact",
        Some(json!({"keep_turns": 1})),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["compacted"], true, "{v}");
    assert_eq!(v["id"], "long", "{v}");
    assert_eq!(v["from_seq"], 1, "{v}");
    let seq = v["seq"].as_u64().unwrap();
    assert!(v["through_seq"].as_u64().unwrap() < seq, "{v}");
    assert_eq!(compactions(&store, "long"), 1);
    let rec = store
        .records(&SessionId::literal("long"), seq - 1, 1)
        .unwrap();
    assert_eq!(rec[0].kind, "compaction");
    assert_eq!(rec[0].data["trigger"], "manual");
    assert_eq!(rec[0].data["summary"], SUMMARY);

    // the next turn sends the summary, not the summarised questions
    ask_and_wait(&g.url, "long", 4, "question 4");
    let reqs = rt.block_on(async { server.requests() });
    let last = reqs.last().unwrap();
    assert!(last.get("tools").is_some(), "{last}");
    assert!(has_summary(last), "{last}");
    assert!(!last.to_string().contains("question 1"), "{last}");
    assert!(last.to_string().contains("question 4"), "{last}");

    // while the session runs, compacting is refused and writes nothing
    ask(&g.url, "long", 5, "answer slowly");
    wait_session(&g.url, "long", Duration::from_secs(30), |v| {
        v["status"] == "running"
    });
    let (st, v) = call(&g.url, "POST", "/v1/sessions/long/compact", None);
    assert_eq!(st, 409, "{v}");
    assert_eq!(v["error"]["code"], "running", "{v}");
    let said = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains(r#"/v1/sessions/long/events {"type":"compact"}"#),
        "{v}"
    );
    wait_session(&g.url, "long", Duration::from_secs(30), |v| {
        v["status"] == "idle" && v["turns"] == 5
    });
    assert_eq!(compactions(&store, "long"), 1);

    // an unknown session is 404, as everywhere
    let (st, _) = call(&g.url, "POST", "/v1/sessions/nope/compact", None);
    assert_eq!(st, 404);
    drop(g);
    drop(server);
}

/// Posts a `compact` event for session `id`.
fn post_compact(url: &str, id: &str, key: Option<&str>) -> (u16, Value) {
    let mut event = json!({"type": "compact"});
    if let Some(key) = key {
        event["idempotency_key"] = json!(key);
    }
    call(
        url,
        "POST",
        &format!("/v1/sessions/{id}/events"),
        Some(event),
    )
}

/// The data of the first compaction of session `id`, after checking that the `compact`
/// control with input id `key` was recorded before it (the compaction answers it).
fn compaction_answering(store: &LocalStore, id: &'static str, key: &str) -> Value {
    let recs = store.records(&SessionId::literal(id), 0, 10_000).unwrap();
    let control = recs.iter().position(|r| r.kind == "control").unwrap();
    assert_eq!(recs[control].data["action"], "compact");
    assert_eq!(recs[control].data["input_id"], key);
    let compaction = recs.iter().position(|r| r.kind == "compaction").unwrap();
    assert!(compaction > control, "the compaction answers the request");
    recs[compaction].data.clone()
}

/// Compaction as a control input: `POST /events {"type":"compact"}` records a `compact`
/// control and the session's run compacts before its next turn — at once when idle, after
/// the turn in flight when running — and `sessions compact` on a session the gateway holds
/// queues the same request in its inbox.
#[test]
fn a_compact_event_is_recorded_and_answered_by_a_compaction() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = summarising_server(&rt);
    let dir = tempdir();
    let g = Gateway::start(&mut serve_cmd(dir.path(), &server.base_url(), &[]));
    three_turns(&g.url, "ev");
    let store = LocalStore::open(&dir.path().join("sessions")).unwrap();
    let wait_compactions = |n: usize| wait_compactions(&store, "ev", n);

    // idle: recorded, then compacted at once
    let (st, v) = post_compact(&g.url, "ev", Some("c1"));
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["result"], "compacting", "{v}");
    wait_compactions(1);
    let compaction = compaction_answering(&store, "ev", "c1");
    assert_eq!(compaction["trigger"], "manual");
    // the same key again is a duplicate: nothing more is recorded
    let (st, v) = post_compact(&g.url, "ev", Some("c1"));
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["result"], "duplicate", "{v}");

    // running: recorded now, compacted after the turn in flight
    ask_and_wait(&g.url, "ev", 4, "question 4");
    ask(&g.url, "ev", 5, "answer slowly");
    wait_session(&g.url, "ev", Duration::from_secs(30), |v| {
        v["status"] == "running"
    });
    let (st, v) = post_compact(&g.url, "ev", None);
    assert_eq!(st, 202, "{v}");
    wait_compactions(2);
    let recs = store.records(&SessionId::literal("ev"), 0, 10_000).unwrap();
    let last = recs.iter().rposition(|r| r.kind == "compaction").unwrap();
    let slow = recs
        .iter()
        .position(|r| r.kind == "response" && r.data["turn"] == 5)
        .unwrap();
    assert!(last > slow, "compacted after the turn in flight answered");

    // `sessions compact` on the session the gateway holds: queued in its inbox
    ask_and_wait(&g.url, "ev", 6, "question 6");
    let out = std::process::Command::new(BIN)
        .args(["sessions", "compact", "--json", "--session-dir"])
        .arg(dir.path().join("sessions"))
        .args(["--base-url", &server.base_url(), "ev"])
        .env("OPENAI_API_KEY", "test")
        .output()
        .unwrap();
    let said: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(out.status.success(), "{said}");
    assert_eq!(said["queued"], true, "{said}");
    wait_compactions(3);
    drop(g);
    drop(server);
}

/// A compact event for a session another process holds waits in the session's inbox
/// (`202 queued`), and the gateway compacts the session once it can open it.
#[test]
fn a_compact_event_for_a_session_held_elsewhere_waits_in_its_inbox() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = summarising_server(&rt);
    let dir = tempdir();
    let g = Gateway::start(&mut serve_cmd(dir.path(), &server.base_url(), &[]));
    // this process writes one complete turn and keeps the session open (its writer lock)
    let store = LocalStore::open(&dir.path().join("sessions")).unwrap();
    let mut held = store
        .create(CreateOptions {
            id: Some(SessionId::literal("held")),
            meta: None,
        })
        .unwrap();
    let input = held.append_input("m1", "user", "question 1").unwrap().seq;
    held.append(Record::TurnStart(TurnStart {
        turn: 1,
        prev_seq: None,
        inputs: vec![input],
    }))
    .unwrap();
    let answer: Response = serde_json::from_value(
        json!({"turn": 1, "items": [{"type": "text", "text": "an answer"}]}),
    )
    .unwrap();
    held.append(Record::Response(answer)).unwrap();

    let (st, v) = post_compact(&g.url, "held", Some("q1"));
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["result"], "queued", "{v}");
    assert_eq!(v["duplicate"], false, "{v}");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(compactions(&store, "held"), 0, "nothing happens while held");

    drop(held);
    // the queued compact request is answered
    wait_compactions(&store, "held", 1);
    let compaction = compaction_answering(&store, "held", "q1");
    assert_eq!(compaction["summary"], SUMMARY);
    drop(g);
    drop(server);
}
