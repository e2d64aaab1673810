//! A live tail whose reader falls further behind than a session's live channel holds
//! (`LIVE_RING` records) is not cut off and loses nothing: it is told it lagged and reads the
//! missed records from the store, then goes on live — every record once, in order.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, header};
use futures_util::StreamExt;
use lazarus_gateway::harness::{InProcess, TOKEN};
use tower::ServiceExt;

fn request(method: &str, uri: &str, body: Option<String>) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.map_or_else(Body::empty, Body::from))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_that_falls_behind_the_live_channel_reads_the_store_and_misses_nothing() {
    const MESSAGES: u64 = 500; // far more than the live channel holds
    let dir = tempfile::tempdir().unwrap();
    let gw = InProcess::start(dir.path()).await.unwrap();
    let created = gw
        .router
        .clone()
        .oneshot(request(
            "POST",
            "/v1/sessions",
            Some(r#"{"id":"lag"}"#.into()),
        ))
        .await
        .unwrap();
    assert_eq!(created.status(), 201);

    // Subscribed now; its body is not read while the records are appended.
    let stream = gw
        .router
        .clone()
        .oneshot(request("GET", "/v1/sessions/lag/stream", None))
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    for n in 1..=MESSAGES {
        let body = format!(r#"{{"message_id":"m{n}","text":"message {n}"}}"#);
        let r = gw
            .router
            .clone()
            .oneshot(request("POST", "/v1/sessions/lag/messages", Some(body)))
            .await
            .unwrap();
        assert_eq!(r.status(), 202, "message {n}");
    }

    let mut body = stream.into_body().into_data_stream();
    let mut text = String::new();
    let mut seqs: Vec<u64> = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        while (seqs.len() as u64) < MESSAGES {
            let Some(chunk) = body.next().await else {
                break;
            };
            text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            seqs = text
                .lines()
                .filter_map(|l| l.strip_prefix("id: ").or_else(|| l.strip_prefix("id:")))
                .map(|s| s.trim().parse().unwrap())
                .collect();
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the tail stalled after {} records",
        seqs.len()
    );
    assert_eq!(
        seqs,
        (1..=MESSAGES).collect::<Vec<_>>(),
        "every record once, in order"
    );
}
