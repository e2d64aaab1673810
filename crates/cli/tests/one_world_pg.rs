//! One session, one world on a shared PostgreSQL store: gateway A, with an MCP server, runs a
//! session and is killed with SIGKILL mid-run; gateway B, which lacks that server, takes it
//! over only to leave it alone (one `needs_owner` record, no model request, whatever its
//! takeover ticks do); gateway C, configured with the same server, takes it over and runs it
//! with the server's tools.
//!
//! Needs `LAZARUS_TEST_PG` (`scripts/pg-test-server.sh start`); `scripts/test.sh` always
//! provides it, and under `LAZARUS_REQUIRE_PG` a missing one fails the test.

mod serve_common;

use std::time::{Duration, Instant};

use lazarus_session::{SessionId, Store};
use lazarus_store_postgres::PgStore;
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, mcp_servers};
use serde_json::json;
use serve_common::*;

const TAKEOVER: &[&str] = &["--takeover-interval-ms", "300"];

fn kinds(store: &PgStore, id: &str) -> Vec<String> {
    store
        .records(&SessionId::parse(id).unwrap(), 0, 10_000)
        .unwrap()
        .into_iter()
        .map(|r| r.kind)
        .collect()
}

#[test]
fn a_takeover_by_a_gateway_without_the_sessions_mcp_server_leaves_it_to_one_that_has_it() {
    let Some(base) = lazarus_testkit::pg::test_base("one_world_pg") else {
        return;
    };
    let url = lazarus_testkit::pg::fresh_schema_url(&base, "&lease_ttl_ms=1000");
    let store = PgStore::connect(&url).expect("connect to LAZARUS_TEST_PG");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // every request: a (slowly streamed) call of the server's read-only tool
    let model = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::tool_call("p", "mcp__counter__peek", json!({})).chunk_delay_ms(100),
        )
        .repeat()])))
        .unwrap();
    let dir = tempdir();
    let mcp = dir.path().join("counter.mcp.json");
    std::fs::write(
        &mcp,
        json!({"mcpServers": {"counter": {
            "command": mcp_servers::python(),
            "args": [mcp_servers::script("counter_server.py"), "stdio"],
            "env": {"COUNTER_FILE": dir.path().join("counter.txt")},
        }}})
        .to_string(),
    )
    .unwrap();
    let with_server = [TAKEOVER, &["--mcp-config", mcp.to_str().unwrap()]].concat();
    let gateway = |name: &str, extra: &[&str]| {
        Gateway::start(&mut serve_pg(
            dir.path(),
            &url,
            &model.base_url(),
            name,
            extra,
        ))
    };
    let mut a = gateway("a", &with_server);
    let (st, v) = call(&a.url, "POST", "/v1/sessions", Some(json!({"id": "w1"})));
    assert_eq!(st, 201, "{v}");
    let (st, v) = call(
        &a.url,
        "POST",
        "/v1/sessions/w1/messages",
        Some(json!({"message_id": "m1", "text": "peek please"})),
    );
    assert_eq!(st, 202, "{v}");
    // mid-run on A: its first call finished, more on the way
    let t0 = Instant::now();
    while !kinds(&store, "w1").iter().any(|k| k == "tool_outcome") {
        assert!(t0.elapsed() < Duration::from_secs(20), "A never ran a call");
        std::thread::sleep(Duration::from_millis(20));
    }
    let b = gateway("b", TAKEOVER);
    a.kill9();
    // B takes it over once A's lease runs out, and leaves it: one record, no request
    let t0 = Instant::now();
    let after_a = loop {
        let k = kinds(&store, "w1");
        if let Some(i) = k.iter().position(|k| k == "needs_owner") {
            break i;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "B never left it: {k:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let requests = model
        .requests()
        .iter()
        .filter(|r| r.get("tools").is_some())
        .count();
    let records = kinds(&store, "w1").len();
    // several takeover ticks later: nothing more
    std::thread::sleep(Duration::from_millis(1500));
    let now = model
        .requests()
        .iter()
        .filter(|r| r.get("tools").is_some())
        .count();
    assert_eq!(now, requests, "B asked the model");
    assert_eq!(
        kinds(&store, "w1").len(),
        records,
        "B wrote more: {:?}",
        kinds(&store, "w1")
    );
    let rec = store
        .records(&SessionId::parse("w1").unwrap(), after_a as u64, 1)
        .unwrap();
    let reason = rec[0].data["reason"].as_str().unwrap().to_string();
    assert!(
        reason.contains("MCP server counter: recorded") && reason.contains("not configured here"),
        "{reason}"
    );
    let v = wait_session(&b.url, "w1", Duration::from_secs(10), |v| {
        v["status"] == "needs_owner"
    });
    assert!(
        v["needs_owner"]["resume_with"]
            .as_str()
            .unwrap()
            .contains("--store"),
        "{v}"
    );
    // C has the server: it takes the session over and runs it with the server's tools
    let c = gateway("c", &[&with_server[..], &["--max-turns", "1"]].concat());
    // (a gateway started without --model asks the server's model list: not a turn)
    let turn_requests = || {
        model
            .requests()
            .into_iter()
            .filter(|r| r.get("tools").is_some())
            .collect::<Vec<_>>()
    };
    let before = turn_requests().len();
    let t0 = Instant::now();
    while turn_requests().len() == before {
        assert!(t0.elapsed() < Duration::from_secs(20), "C never ran it");
        std::thread::sleep(Duration::from_millis(50));
    }
    let last = turn_requests().last().cloned().unwrap();
    let tools: Vec<&str> = last["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"mcp__counter__peek"), "{tools:?}");
    // C's resume: a receipt (which answers the refusal), in the world the session recorded
    let k = kinds(&store, "w1");
    let after: Vec<&String> = k.iter().skip(after_a + 1).collect();
    assert_eq!(after.first().map(|s| s.as_str()), Some("resume"), "{k:?}");
    let st = store.load(&SessionId::parse("w1").unwrap()).unwrap();
    assert!(st.needs_owner.is_none(), "C's run answered it: {k:?}");
    assert_eq!(st.last_receipt.as_ref().and_then(|r| r.world_seq), Some(0));
    drop((b, c));
    rt.block_on(model.shutdown());
}
