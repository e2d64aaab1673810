//! The client against the scripted server: real HTTP and SSE.

use std::time::{Duration, Instant};

use lazarus_agent::model::{Message, ModelRequest, OutputItem, ToolSpec};
use lazarus_agent::provider::{
    CancellationToken, OpenAiClient, ProviderConfig, ProviderError, StreamEvent,
};
use lazarus_testkit::{Reply, Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::json;

fn request(stream: bool) -> ModelRequest {
    ModelRequest {
        model: "m".into(),
        messages: vec![Message::user("list the files")],
        tools: vec![ToolSpec {
            name: "list_dir".into(),
            description: "List a directory".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        max_tokens: Some(64),
        temperature: None,
        stream,
    }
}

fn client(server: &ScriptedServer) -> OpenAiClient {
    let mut cfg = ProviderConfig::new(server.base_url());
    cfg.retry.initial_backoff_ms = 10;
    cfg.retry.max_backoff_ms = 50;
    cfg.limits.stream_idle_timeout_ms = 500;
    OpenAiClient::new(cfg).expect("client")
}

#[tokio::test]
async fn tool_call_then_final_text_streamed_and_not() {
    for stream in [true, false] {
        let server = ScriptedServer::start(Script::new([
            Step::reply(
                ScriptedResponse::tool_call("call_a", "list_dir", json!({"path": "."}))
                    .with_text("Let me look.")
                    .with_extra("system_fingerprint", json!("fp1")),
            )
            .when(When::LastUserContains {
                text: "list".into(),
            }),
            Step::after_tool_result("call_a", ScriptedResponse::text("There are 2 files.")),
        ]))
        .await
        .unwrap();
        let c = client(&server);
        let cancel = CancellationToken::new();
        let mut seen = String::new();
        let mut obs = |e: StreamEvent<'_>| {
            if let StreamEvent::Text(t) = e {
                seen.push_str(t);
            }
        };
        let mut req = request(stream);
        let first = c.complete(&req, &cancel, &mut obs).await.unwrap();
        let r = &first.response;
        assert_eq!(r.stop_reason, "tool_calls");
        assert_eq!(r.text(), "Let me look.");
        let call = r.tool_calls().next().unwrap().clone();
        assert_eq!(call.call_id, "call_a");
        assert_eq!(call.arguments, "{\"path\":\".\"}");
        assert_eq!(r.provider_extra["system_fingerprint"], json!("fp1"));
        assert_eq!(first.attempts.len(), 1);
        assert_eq!(first.attempts[0].streamed, stream);
        assert_eq!(seen, "Let me look.");

        req.messages.push(Message::assistant_from(r));
        req.messages.push(Message::tool_result("call_a", "a\nb"));
        let second = c.complete(&req, &cancel, &mut |_| {}).await.unwrap();
        assert_eq!(second.response.text(), "There are 2 files.");
        assert_eq!(server.request_count(), 2);
        let reqs = server.requests();
        assert_eq!(reqs[0]["stream"], json!(stream));
        assert_eq!(reqs[1]["messages"][2]["tool_call_id"], "call_a");
    }
}

#[tokio::test]
async fn retries_429_and_5xx_then_succeeds_reporting_attempts() {
    let server = ScriptedServer::start(Script::in_order([
        Reply::rate_limited(0),
        Reply::status(503),
        ScriptedResponse::text("ok").into(),
    ]))
    .await
    .unwrap();
    let done = client(&server)
        .complete(&request(true), &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(done.response.text(), "ok");
    let statuses: Vec<_> = done.attempts.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [Some(429), Some(503), Some(200)]);
    assert_eq!(done.attempts[0].retry_after_ms, Some(0));
    assert!(done.attempts[0].error.is_some());
    assert_eq!(done.attempts[1].waited_ms, 0, "Retry-After: 0 honoured");
    assert!(done.attempts[2].waited_ms <= 50);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn does_not_retry_other_4xx() {
    let server = ScriptedServer::start(Script::in_order([
        Reply::status(401),
        ScriptedResponse::text("never").into(),
    ]))
    .await
    .unwrap();
    let err = client(&server)
        .complete(&request(false), &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err.error, ProviderError::Http { status: 401, .. }));
    assert_eq!(err.attempts.len(), 1);
    assert!(err.to_string().contains("API key"), "{err}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn dropped_and_hanging_streams_are_retried() {
    let resp = ScriptedResponse::text("hello world, this is long");
    let server = ScriptedServer::start(Script::in_order([
        Reply::StreamThenDrop {
            response: resp.clone(),
            after_chunks: 2,
        },
        Reply::StreamThenHang {
            response: resp.clone(),
            after_chunks: 3,
        },
        resp.into(),
    ]))
    .await
    .unwrap();
    let mut retries = 0;
    let done = client(&server)
        .complete(&request(true), &CancellationToken::new(), &mut |e| {
            if matches!(e, StreamEvent::Retry { .. }) {
                retries += 1;
            }
        })
        .await
        .unwrap();
    assert_eq!(done.response.text(), "hello world, this is long");
    assert_eq!(done.attempts.len(), 3);
    assert_eq!(retries, 2);
    let e1 = done.attempts[0].error.as_deref().unwrap_or_default();
    let e2 = done.attempts[1].error.as_deref().unwrap_or_default();
    assert!(e1.contains("connection") || e1.contains("ended"), "{e1}");
    assert!(e2.contains("idle"), "{e2}");
}

#[tokio::test]
async fn falls_back_to_plain_json_for_stream_request() {
    let server = ScriptedServer::start(Script::in_order([Reply::PlainJson(
        ScriptedResponse::text("plain"),
    )]))
    .await
    .unwrap();
    let done = client(&server)
        .complete(&request(true), &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(done.response.text(), "plain");
    assert!(!done.attempts[0].streamed);
}

#[tokio::test]
async fn cancellation_aborts_promptly() {
    let server = ScriptedServer::start(Script::in_order([Reply::StreamThenHang {
        response: ScriptedResponse::text("abcdefgh"),
        after_chunks: 2,
    }]))
    .await
    .unwrap();
    let mut cfg = ProviderConfig::new(server.base_url());
    cfg.limits.stream_idle_timeout_ms = 60_000;
    let c = OpenAiClient::new(cfg).unwrap();
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c2.cancel();
    });
    let t = Instant::now();
    let err = c
        .complete(&request(true), &cancel, &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(err.error, ProviderError::Cancelled);
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn connection_refused_is_retried_and_explained() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut cfg = ProviderConfig::new(format!("http://127.0.0.1:{port}/v1"));
    cfg.retry.max_attempts = 2;
    cfg.retry.initial_backoff_ms = 1;
    let err = OpenAiClient::new(cfg)
        .unwrap()
        .complete(&request(false), &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err.error, ProviderError::Connect { .. }), "{err}");
    assert_eq!(err.attempts.len(), 2);
    assert!(err.to_string().contains("is the model server running"));
}

#[tokio::test]
async fn response_size_limit_applies() {
    let server = ScriptedServer::start(Script::new([Step::reply(ScriptedResponse::text(
        "x".repeat(10_000),
    ))
    .repeat()]))
    .await
    .unwrap();
    for stream in [true, false] {
        let mut cfg = ProviderConfig::new(server.base_url());
        cfg.limits.max_response_bytes = 2_000;
        let err = OpenAiClient::new(cfg)
            .unwrap()
            .complete(&request(stream), &CancellationToken::new(), &mut |_| {})
            .await
            .unwrap_err();
        assert_eq!(
            err.error,
            ProviderError::ResponseTooLarge { limit_bytes: 2_000 }
        );
        assert_eq!(err.attempts.len(), 1, "not retried");
    }
}

#[tokio::test]
async fn recognises_text_tool_calls_when_no_native_ones() {
    let text = "Sure.\n```json\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \"src\"}}\n```";
    let server = ScriptedServer::start(Script::new([
        Step::reply(ScriptedResponse::text(text)).repeat()
    ]))
    .await
    .unwrap();
    let c = client(&server);
    let a = c
        .complete(&request(true), &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    let b = c
        .complete(&request(false), &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(a.text_tool_calls, 1);
    assert_eq!(a.response.items, b.response.items, "stable ids");
    assert!(matches!(&a.response.items[0], OutputItem::Text { text } if text == "Sure."));
    let call = a.response.tool_calls().next().unwrap();
    assert_eq!(call.name, "list_dir");
    assert!(call.call_id.starts_with("text_call_"));
}
