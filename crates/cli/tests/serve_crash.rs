//! The gateway SIGKILLed with many sessions mid-run — some mid-stream (the model answers in
//! slow chunks), some inside a slow shell tool that appends a line to the session's own side
//! file — then started again: every session finishes without any new message, no input is
//! recorded twice, no shell side effect happens twice, each has a `gateway-start` receipt and
//! the ledger verifies. `LAZARUS_GATEWAY_CRASH_SESSIONS` sets the number (default 50).

mod serve_common;

use std::time::{Duration, Instant};

use lazarus_session::record::OutcomeStatus;
use lazarus_session::{LocalStore, Status, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::json;
use serve_common::*;

/// A session id written in the test (checked; a bad one is a bug in the test).
#[allow(dead_code)]
fn sid(id: &str) -> lazarus_session::SessionId {
    lazarus_session::SessionId::parse(id).expect("a valid session id")
}

fn script() -> Script {
    Script::new([
        Step::reply(
            ScriptedResponse::tool_call(
                "c1",
                "shell",
                json!({"command": "echo ran >> side.txt; sleep 5"}),
            )
            .with_text("Running it."),
        )
        .when(When::LastUserContains {
            text: "use the tool".into(),
        })
        .repeat(),
        Step::after_tool_result("c1", ScriptedResponse::text("Tool part done.")).repeat(),
        Step::reply(
            ScriptedResponse::text("one two three four five six seven eight nine ten")
                .chunk_delay_ms(150),
        )
        .when(When::LastUserContains {
            text: "stream it".into(),
        })
        .repeat(),
    ])
}

#[test]
fn sigkill_mid_run_then_restart_finishes_every_session_once() {
    let n: usize = std::env::var("LAZARUS_GATEWAY_CRASH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(ScriptedServer::start(script())).unwrap();
    let dir = tempdir();
    let mut g = Gateway::start(&mut serve_cmd(
        dir.path(),
        &server.base_url(),
        &["--max-running", "64"],
    ));
    let url = g.url.clone();
    let ids: Vec<String> = (0..n).map(|i| format!("s{i:03}")).collect();
    let tool = |i: usize| i.is_multiple_of(2);
    for (i, id) in ids.iter().enumerate() {
        let (st, v) = call(&url, "POST", "/v1/sessions", Some(json!({"id": id})));
        assert_eq!(st, 201, "{v}");
        let text = if tool(i) {
            "please use the tool"
        } else {
            "please stream it"
        };
        let (st, v) = call(
            &url,
            "POST",
            &format!("/v1/sessions/{id}/messages"),
            Some(json!({"message_id": format!("m-{id}"), "text": text})),
        );
        assert_eq!(st, 202, "{v}");
    }
    // wait until every session is mid-run: tool sessions inside the shell call (its start
    // recorded), stream sessions with their turn open and the model answering
    let store = LocalStore::open(&dir.path().join("sessions")).unwrap();
    let t0 = Instant::now();
    loop {
        let mid = ids
            .iter()
            .enumerate()
            .filter(|(i, id)| {
                let st = store.load(&sid(id)).unwrap();
                if tool(*i) {
                    st.calls.first().is_some_and(|c| c.start.is_some())
                } else {
                    st.open_turn.is_some()
                }
            })
            .count();
        if mid == n {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "only {mid}/{n} sessions mid-run"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    g.kill9();
    for id in &ids {
        let st = store.load(&sid(id)).unwrap();
        assert!(
            matches!(st.status(), Status::Interrupted | Status::InDoubt),
            "{id}: {:?}",
            st.status()
        );
    }

    // start again: nobody sends anything
    let t_restart = Instant::now();
    let g2 = Gateway::start(&mut serve_cmd(dir.path(), &server.base_url(), &[]));
    assert!(
        g2.ready_line.contains(&format!("{n} re-queued")),
        "{}",
        g2.ready_line
    );
    let t0 = Instant::now();
    loop {
        let done = ids
            .iter()
            .filter(|id| store.load(&sid(id)).unwrap().status() == Status::Idle)
            .count();
        if done == n {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "only {done}/{n} sessions finished after restart"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "{n} sessions finished {} ms after the restart",
        t_restart.elapsed().as_millis()
    );
    for (i, id) in ids.iter().enumerate() {
        let st = store.load(&sid(id)).unwrap();
        assert_eq!(
            serve_common::input_records(&store, id),
            1,
            "{id}: one input, recorded once"
        );
        let receipt = st.last_receipt.as_ref().expect("a resume receipt");
        assert_eq!(receipt.trigger, "gateway-start", "{id}");
        assert!(receipt.every_call_has_one_result, "{id}");
        assert!(st.every_call_has_one_result(), "{id}");
        let ws = dir.path().join("workspaces").join(id);
        let side = std::fs::read_to_string(ws.join("side.txt")).unwrap_or_default();
        if tool(i) {
            assert_eq!(side.lines().count(), 1, "{id}: side effect {side:?}");
            let c1 = st.call("c1").unwrap();
            assert_eq!(
                c1.outcome.as_ref().unwrap().status,
                OutcomeStatus::InDoubt,
                "{id}"
            );
            assert_eq!(receipt.calls_in_doubt, 1, "{id}");
        } else {
            assert!(side.is_empty(), "{id}");
            assert_eq!(receipt.open_turn, Some(1), "{id}");
        }
        let r =
            lazarus_ledger::verify_file(&store.path_of(&sid(id)), store.ledger_options()).unwrap();
        assert!(r.is_clean(), "{id}: {:?}", r.problems);
    }
    // the restarted gateway counted the resumes
    let (code, text) = get(&g2.url, "/metrics", None).unwrap();
    assert_eq!(code, 200);
    assert!(
        text.contains(&format!(
            "lazarus_resumes_total{{trigger=\"gateway-start\"}} {n}"
        )),
        "{text}"
    );
    assert!(text.contains("lazarus_tool_calls_total{outcome=\"in_doubt\"}"));
    drop(g2);
    rt.block_on(server.shutdown());
}

/// SIGTERM while sessions are inside a tool call: the calls finish (within the drain
/// budget), everything else stops, exit 0, and a restart finishes every session.
#[test]
fn sigterm_drains_tool_calls_and_leaves_sessions_resumable() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call(
                "c1",
                "shell",
                json!({"command": "sleep 1; echo ran >> side.txt"}),
            ))
            .when(When::LastUserContains {
                text: "tool".into(),
            })
            .repeat(),
            Step::after_tool_result("c1", ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    let dir = tempdir();
    let mut g = Gateway::start(&mut serve_cmd(
        dir.path(),
        &server.base_url(),
        &["--drain-timeout", "10"],
    ));
    let url = g.url.clone();
    for id in ["d1", "d2"] {
        assert_eq!(
            call(&url, "POST", "/v1/sessions", Some(json!({"id": id}))).0,
            201
        );
        assert_eq!(
            call(
                &url,
                "POST",
                &format!("/v1/sessions/{id}/messages"),
                Some(json!({"text": "run the tool"}))
            )
            .0,
            202
        );
    }
    let store = LocalStore::open(&dir.path().join("sessions")).unwrap();
    for id in ["d1", "d2"] {
        let t0 = Instant::now();
        while store
            .load(&sid(id))
            .unwrap()
            .calls
            .first()
            .is_none_or(|c| c.start.is_none())
        {
            assert!(t0.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let status = g.term();
    assert_eq!(status.code(), Some(0));
    for id in ["d1", "d2"] {
        let st = store.load(&sid(id)).unwrap();
        let c1 = st.call("c1").unwrap();
        assert_eq!(
            c1.outcome.as_ref().map(|o| o.status),
            Some(OutcomeStatus::Ok),
            "{id}: the running call finished during the drain"
        );
        assert_eq!(st.status(), Status::Stopped, "{id}");
        let side = std::fs::read_to_string(dir.path().join("workspaces").join(id).join("side.txt"))
            .unwrap();
        assert_eq!(side.lines().count(), 1);
    }
    let g2 = Gateway::start(&mut serve_cmd(dir.path(), &server.base_url(), &[]));
    for id in ["d1", "d2"] {
        wait_session(&g2.url, id, Duration::from_secs(20), |v| {
            v["status"] == "idle" && v["turns"] == 2
        });
        let st = store.load(&sid(id)).unwrap();
        assert_eq!(st.last_receipt.as_ref().unwrap().trigger, "gateway-start");
    }
    drop(g2);
    rt.block_on(server.shutdown());
}
