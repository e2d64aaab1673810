//! Bounded queues: when every run slot and queue place is taken, new work gets 429 with
//! Retry-After, and the refused message is not recorded (nothing changes).

mod serve_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};
use serde_json::json;
use serve_common::*;

/// POST with the token; returns (status, raw response head + body).
fn post_raw(url: &str, path: &str, body: &str) -> (u16, String) {
    let hostport = url.strip_prefix("http://").unwrap();
    let mut s = TcpStream::connect(hostport).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    (status, out)
}

#[test]
fn full_run_queue_answers_429_with_retry_after_and_records_nothing() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // The model takes a while, so session a keeps the only run slot busy.
    let server = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::text("slow answer"),
        )
        .delay_ms(3000)
        .repeat()])))
        .unwrap();
    let dir = tempdir();
    let g = Gateway::start(&mut serve_cmd(
        dir.path(),
        &server.base_url(),
        &["--max-running", "1", "--max-queued", "0"],
    ));
    let url = g.url.as_str();
    for id in ["a", "b"] {
        let (st, v) = call(url, "POST", "/v1/sessions", Some(json!({"id": id})));
        assert_eq!(st, 201, "{v}");
    }
    let (st, v) = call(
        url,
        "POST",
        "/v1/sessions/a/messages",
        Some(json!({"message_id": "m1", "text": "hello"})),
    );
    assert_eq!(st, 202, "{v}");
    std::thread::sleep(Duration::from_millis(300));
    let (st, raw) = post_raw(
        url,
        "/v1/sessions/b/messages",
        r#"{"message_id":"m2","text":"me too"}"#,
    );
    assert_eq!(st, 429, "{raw}");
    assert!(raw.to_ascii_lowercase().contains("retry-after: "), "{raw}");
    assert!(raw.contains("\"code\":\"queue_full\""), "{raw}");
    let (st, v) = call(url, "GET", "/v1/sessions/b", None);
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["records"],
        json!(0),
        "the refused message was not recorded: {v}"
    );
    // once a's run is over, b is accepted
    wait_session(url, "a", Duration::from_secs(20), |v| v["status"] == "idle");
    let (st, v) = call(
        url,
        "POST",
        "/v1/sessions/b/messages",
        Some(json!({"message_id": "m2", "text": "me too"})),
    );
    assert_eq!(st, 202, "{v}");
}
