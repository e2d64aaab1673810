//! Two gateways on one PostgreSQL store. Gateway A owns ten sessions, each mid-run (inside a
//! slow shell tool that appends one line to the session's own side file, the model answering
//! in slow chunks); A is SIGKILLed. Gateway B notices on its takeover tick (A's leases ran out:
//! nobody renews them) and finishes every session: exactly one input each, at most one
//! shell side effect each, a `gateway-takeover` receipt each, and the store verifies (no
//! record duplicated, seqs contiguous). A message sent through B while A holds a session is
//! accepted into that session's inbox (202) and recorded exactly once, by whichever gateway
//! writes the session next.
//!
//! Needs `LAZARUS_TEST_PG` (a throwaway server, e.g. `scripts/pg-test-server.sh start`);
//! without it the test is skipped loudly. Each run uses a fresh schema.

mod serve_common;

use std::process::Command;
use std::time::{Duration, Instant};

use lazarus_session::{Status, Store};
use lazarus_store_postgres::PgStore;
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::json;
use serve_common::*;

/// A session id written in the test (checked; a bad one is a bug in the test).
#[allow(dead_code)]
fn sid(id: &str) -> lazarus_session::SessionId {
    lazarus_session::SessionId::parse(id).expect("a valid session id")
}

const N: usize = 10;

/// Takeover ticks twice a second.
const TAKEOVER: &[&str] = &["--takeover-interval-ms", "500"];

fn script() -> Script {
    Script::new([
        Step::reply(ScriptedResponse::text("hello b"))
            .when(When::LastUserContains {
                text: "hello from b".into(),
            })
            .repeat(),
        Step::reply(
            ScriptedResponse::tool_call(
                "c1",
                "shell",
                json!({"command": "echo ran >> side.txt; sleep 1"}),
            )
            .with_text("Running the tool now.")
            .chunk_delay_ms(50),
        )
        .when(When::LastUserContains {
            text: "use the tool".into(),
        })
        .repeat(),
        Step::after_tool_result(
            "c1",
            ScriptedResponse::text("the tool part is done and all is well here")
                .chunk_delay_ms(100),
        )
        .repeat(),
    ])
}

fn metric(url: &str, line_prefix: &str) -> Option<u64> {
    let (code, text) = get(url, "/metrics", None).ok()?;
    assert_eq!(code, 200);
    text.lines()
        .find_map(|l| l.strip_prefix(line_prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// A message accepted through one gateway for a session the other holds reaches the holder
/// by the store's mail signal: the holder counts the wake-up, and records the message.
#[test]
fn a_message_through_one_gateway_wakes_the_holder_by_the_mail_signal() {
    let Some(base) = lazarus_testkit::pg::test_base("serve_multi_gateway") else {
        return;
    };
    let url = lazarus_testkit::pg::fresh_schema_url(&base, "");
    let store = PgStore::connect(&url).expect("connect to LAZARUS_TEST_PG");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(ScriptedServer::start(script())).unwrap();
    let dir = tempdir();
    let gateway = |name: &str| {
        Gateway::start(&mut serve_pg(
            dir.path(),
            &url,
            &server.base_url(),
            name,
            TAKEOVER,
        ))
    };
    let a = gateway("a");
    let b = gateway("b");
    let (st, v) = call(&a.url, "POST", "/v1/sessions", Some(json!({"id": "held"})));
    assert_eq!(st, 201, "{v}");
    let wakeups = || metric(&a.url, "lazarus_inbox_wakeups_total ").unwrap_or(0);
    // listening: every (re)connect of the listener wakes one pass
    let t0 = Instant::now();
    while wakeups() == 0 {
        assert!(t0.elapsed() < Duration::from_secs(20), "A never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = wakeups();
    let (st, v) = call(
        &b.url,
        "POST",
        "/v1/sessions/held/messages",
        Some(json!({"message_id": "via-b", "text": "hello from b"})),
    );
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["queued"], true, "A holds the session: {v}");
    let t0 = Instant::now();
    while !(wakeups() > before && input_records(&store, "held") == 1) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no signalled wake-up ({} then {}) or the message not recorded ({})",
            before,
            wakeups(),
            input_records(&store, "held")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigkill_one_gateway_the_other_takes_over_every_session_once() {
    let Some(base) = lazarus_testkit::pg::test_base("serve_multi_gateway") else {
        return;
    };
    let t_test = Instant::now();
    // A killed gateway's leases run out after lease_ttl_ms: short here, so B takes over soon.
    let url = lazarus_testkit::pg::fresh_schema_url(&base, "&lease_ttl_ms=1000");
    // creates the schema before the gateways start
    let store = PgStore::connect(&url).expect("connect to LAZARUS_TEST_PG");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(ScriptedServer::start(script())).unwrap();
    let dir = tempdir();
    let gateway = |name: &str| {
        Gateway::start(&mut serve_pg(
            dir.path(),
            &url,
            &server.base_url(),
            name,
            TAKEOVER,
        ))
    };
    let mut a = gateway("a");
    let b = gateway("b");

    let ids: Vec<String> = (0..N).map(|i| format!("m{i:02}")).collect();
    for id in &ids {
        let (st, v) = call(&a.url, "POST", "/v1/sessions", Some(json!({"id": id})));
        assert_eq!(st, 201, "{v}");
        let (st, v) = call(
            &a.url,
            "POST",
            &format!("/v1/sessions/{id}/messages"),
            Some(json!({"message_id": format!("msg-{id}"), "text": "please use the tool"})),
        );
        assert_eq!(st, 202, "{v}");
    }
    // B cannot open a session while A lives, but takes a message for it into its inbox
    for _ in 0..2 {
        let (st, v) = call(
            &b.url,
            "POST",
            &format!("/v1/sessions/{}/messages", ids[0]),
            Some(json!({"message_id": "via-b", "text": "hello from b"})),
        );
        assert_eq!(st, 202, "B queues a message for a session A holds: {v}");
        assert_eq!(v["queued"], true, "{v}");
    }

    // every session inside its shell call on A
    let t0 = Instant::now();
    loop {
        let mid = ids
            .iter()
            .filter(|id| {
                let st = store.load(&sid(id)).unwrap();
                st.calls.first().is_some_and(|c| c.start.is_some())
            })
            .count();
        if mid == N {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "only {mid}/{N} sessions reached their tool call on A"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        metric(&b.url, "lazarus_takeovers_total "),
        Some(0),
        "B took something over while A was alive"
    );
    a.kill9();
    let t_kill = Instant::now();
    for id in &ids {
        let st = store.load(&sid(id)).unwrap();
        assert!(
            matches!(st.status(), Status::Interrupted | Status::InDoubt),
            "{id}: not mid-run at the kill: {:?}",
            st.status()
        );
    }

    // B takes every session over within a few seconds, and finishes it
    let mut taken_after = None;
    loop {
        let states: Vec<_> = ids.iter().map(|id| store.load(&sid(id)).unwrap()).collect();
        if taken_after.is_none() && states.iter().all(|s| s.last_receipt.is_some()) {
            taken_after = Some(t_kill.elapsed());
        }
        let done = states.iter().filter(|s| s.status() == Status::Idle).count();
        if done == N {
            break;
        }
        assert!(
            t_kill.elapsed() < Duration::from_secs(15),
            "only {done}/{N} sessions finished on B after the kill"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let taken_after = taken_after.expect("receipts");
    eprintln!(
        "{N} sessions taken over {} ms after the kill, all finished after {} ms",
        taken_after.as_millis(),
        t_kill.elapsed().as_millis()
    );
    assert!(
        taken_after < Duration::from_secs(5),
        "takeover took {taken_after:?}"
    );

    for id in &ids {
        let st = store.load(&sid(id)).unwrap();
        let via_b = store
            .records(&sid(id), 0, 10_000)
            .unwrap()
            .iter()
            .filter(|r| r.kind == "input" && r.data["input_id"] == "via-b")
            .count();
        let want = usize::from(id == &ids[0]);
        assert_eq!(via_b, want, "{id}: the message sent via B, recorded once");
        assert_eq!(
            serve_common::input_records(&store, id),
            1 + want,
            "{id}: every input recorded once"
        );
        assert!(
            store.inbox(&sid(id), 10).unwrap().is_empty(),
            "{id}: inbox drained"
        );
        let receipt = st.last_receipt.as_ref().expect("a resume receipt");
        assert_eq!(receipt.trigger, "gateway-takeover", "{id}");
        assert!(receipt.every_call_has_one_result, "{id}");
        assert!(st.every_call_has_one_result(), "{id}");
        let resumes = store
            .records(&sid(id), 0, 10_000)
            .unwrap()
            .iter()
            .filter(|r| r.kind == "resume")
            .count();
        assert_eq!(resumes, 1, "{id}: exactly one takeover");
        let side = std::fs::read_to_string(dir.path().join("workspaces").join(id).join("side.txt"))
            .unwrap_or_default();
        assert!(side.lines().count() <= 1, "{id}: side effect {side:?}");
        // B holds it now
        let holder = store.lock_holder(&sid(id)).unwrap();
        assert!(holder.is_some(), "{id}: B holds the writer lock");
    }
    assert_eq!(
        metric(&b.url, "lazarus_takeovers_total "),
        Some(N as u64),
        "B counted the takeovers"
    );
    assert_eq!(
        metric(
            &b.url,
            "lazarus_resumes_total{trigger=\"gateway-takeover\"} "
        ),
        Some(N as u64)
    );

    let out = Command::new(BIN)
        .args(["sessions", "--store", &url, "verify", "--all"])
        .env_remove("LAZARUS_SESSION_DIR")
        .env_remove("LAZARUS_STORE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "verify --all: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    drop(b);
    rt.block_on(server.shutdown());
    eprintln!("test took {} ms", t_test.elapsed().as_millis());
}
