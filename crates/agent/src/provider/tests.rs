use super::*;
use crate::model::{Message, OutputItem, ToolCall, ToolSpec};
use proptest::prelude::*;
use serde_json::json;

/// A real llama.cpp stream (shortened) with a tool call split over chunks.
const LLAMA_STREAM: &str = concat!(
    "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}],\"created\":1,\"id\":\"chatcmpl-x\",\"model\":\"gemma\",\"system_fingerprint\":\"b0\",\"object\":\"chat.completion.chunk\"}\n\n",
    "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"N7\",\"type\":\"function\",\"function\":{\"name\":\"list_dir\",\"arguments\":\"{\"}}]}}],\"created\":1,\"id\":\"chatcmpl-x\",\"model\":\"gemma\",\"object\":\"chat.completion.chunk\"}\n\n",
    "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"path\\\": \"}}]}}],\"object\":\"chat.completion.chunk\"}\r\n\r\n",
    ": keep-alive\n\n",
    "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"docs\\\"}\"}}]}}],\"object\":\"chat.completion.chunk\"}\n\n",
    "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"K9\",\"type\":\"function\",\"function\":{\"name\":\"list_dir\",\"arguments\":\"{\\\"\"}}]}}],\"object\":\"chat.completion.chunk\"}\n\n",
    "data: {\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"delta\":{}}],\"object\":\"chat.completion.chunk\"}\n\n",
    "data: {\"choices\":[],\"usage\":{\"completion_tokens\":48,\"prompt_tokens\":205,\"total_tokens\":253},\"timings\":{\"prompt_n\":205}}\n\n",
    "data: [DONE]\n\n",
);

fn assemble(bytes: &[u8], piece: usize) -> (ModelResponse, Vec<Delta>) {
    let mut p = SseParser::new(1 << 20);
    let mut a = StreamAssembler::new();
    let mut deltas = Vec::new();
    for chunk in bytes.chunks(piece.max(1)) {
        for ev in p.feed(chunk).unwrap() {
            deltas.extend(a.push_event(&ev).unwrap());
        }
    }
    if let Some(ev) = p.finish() {
        deltas.extend(a.push_event(&ev).unwrap());
    }
    assert!(a.is_done());
    (a.finish(), deltas)
}

#[test]
fn assembles_llama_cpp_tool_call_stream_in_any_chunking() {
    let (whole, deltas) = assemble(LLAMA_STREAM.as_bytes(), usize::MAX);
    assert_eq!(whole.stop_reason, "length");
    assert_eq!(whole.model.as_deref(), Some("gemma"));
    let calls: Vec<&ToolCall> = whole.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].call_id, "N7");
    assert_eq!(calls[0].name, "list_dir");
    assert_eq!(calls[0].arguments, "{\"path\": \"docs\"}");
    assert_eq!(calls[1].arguments, "{\"");
    assert_eq!(
        whole.usage.as_ref().and_then(|u| u.prompt_tokens),
        Some(205)
    );
    assert_eq!(whole.provider_extra["id"], json!("chatcmpl-x"));
    assert_eq!(whole.provider_extra["system_fingerprint"], json!("b0"));
    assert_eq!(whole.provider_extra["timings"], json!({"prompt_n": 205}));
    assert_eq!(
        deltas
            .iter()
            .filter(|d| matches!(d, Delta::ToolCallStart { .. }))
            .count(),
        2
    );
    for piece in [1, 2, 3, 7, 64] {
        let (r, _) = assemble(LLAMA_STREAM.as_bytes(), piece);
        assert_eq!(r, whole, "chunking by {piece} bytes");
    }
}

#[test]
fn assembles_text_and_reasoning() {
    let s = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think \"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hard\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"logprobs\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\",\"refusal\":\"no\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]",
    );
    let (r, deltas) = assemble(s.as_bytes(), 5);
    assert_eq!(
        r.items,
        vec![
            OutputItem::Reasoning {
                text: "think hard".into()
            },
            OutputItem::Text {
                text: "Hello".into()
            }
        ]
    );
    assert_eq!(r.stop_reason, "stop");
    assert_eq!(r.provider_extra["choice"], json!({"logprobs": null}));
    assert_eq!(r.provider_extra["message"], json!({"refusal": "no"}));
    assert_eq!(
        deltas,
        vec![
            Delta::Reasoning("think ".into()),
            Delta::Reasoning("hard".into()),
            Delta::Text("Hel".into()),
            Delta::Text("lo".into())
        ]
    );
}

#[test]
fn sse_line_limit_and_errors() {
    let mut p = SseParser::new(10);
    assert!(matches!(
        p.feed(b"data: 0123456789abc"),
        Err(ProviderError::SseLineTooLong { limit_bytes: 10 })
    ));
    let mut a = StreamAssembler::new();
    assert!(matches!(
        a.push_event("{not json"),
        Err(ProviderError::InvalidResponse { .. })
    ));
    assert!(matches!(
        a.push_event("{\"error\":{\"message\":\"context too long\"}}"),
        Err(ProviderError::StreamError { .. })
    ));
}

#[test]
fn parses_non_streaming_llama_cpp_response_keeping_unknown_fields() {
    let body = br#"{"choices":[{"finish_reason":"length","index":0,"message":{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"list_dir","arguments":"{\"path\": \"docs\"}"},"id":"NF"}]}}],"created":1796209112,"model":"gemma","system_fingerprint":"b0-unknown","object":"chat.completion","usage":{"completion_tokens":48,"prompt_tokens":205,"total_tokens":253,"prompt_tokens_details":{"cached_tokens":0}},"id":"chatcmpl-K","timings":{"cache_n":0}}"#;
    let r = parse_completion(body).unwrap();
    assert_eq!(r.stop_reason, "length");
    assert_eq!(
        r.items,
        vec![OutputItem::ToolCall(ToolCall {
            call_id: "NF".into(),
            name: "list_dir".into(),
            arguments: "{\"path\": \"docs\"}".into()
        })]
    );
    let u = r.usage.as_ref().unwrap();
    assert_eq!(u.total_tokens, Some(253));
    assert_eq!(
        u.extra["prompt_tokens_details"],
        json!({"cached_tokens": 0})
    );
    for k in ["created", "system_fingerprint", "object", "id", "timings"] {
        assert!(r.provider_extra.contains_key(k), "{k} kept");
    }
    assert!(parse_completion(b"[]").is_err());
    assert!(parse_completion(b"{\"choices\":[]}").is_err());
    assert!(parse_completion(b"{\"error\":{\"message\":\"x\"}}").is_err());
}

#[test]
fn request_body_has_openai_shape() {
    let req = ModelRequest {
        model: "m".into(),
        messages: vec![
            Message::system("s"),
            Message::user("u"),
            Message::Assistant {
                provider_items: vec![],
                text: None,
                tool_calls: vec![ToolCall {
                    call_id: "c".into(),
                    name: "shell".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::tool_result("c", "out"),
        ],
        tools: vec![ToolSpec {
            name: "shell".into(),
            description: "d".into(),
            parameters: json!({"type":"object"}),
        }],
        max_tokens: Some(48),
        temperature: Some(0.0),
        stream: true,
    };
    let mut extra = Map::new();
    extra.insert("top_k".into(), json!(1));
    extra.insert("model".into(), json!("ignored"));
    let b = request_body(&req, &extra);
    assert_eq!(b["model"], "m");
    assert_eq!(b["top_k"], 1);
    assert_eq!(b["stream_options"], json!({"include_usage": true}));
    assert_eq!(b["tools"][0]["function"]["name"], "shell");
    assert_eq!(b["messages"][2]["tool_calls"][0]["id"], "c");
    assert_eq!(b["messages"][2]["content"], Value::Null);
    assert_eq!(
        b["messages"][3],
        json!({"role":"tool","tool_call_id":"c","content":"out"})
    );
}

#[test]
fn config_debug_hides_the_key() {
    let mut c = ProviderConfig::new("http://127.0.0.1:1/v1");
    c.api_key = Some("sk-secret".into());
    assert!(!format!("{c:?}").contains("sk-secret"));
    assert!(!serde_json::to_string(&c).unwrap().contains("sk-secret"));
    let client = OpenAiClient::new(c).unwrap();
    assert!(!format!("{client:?}").contains("sk-secret"));
    assert!(OpenAiClient::new(ProviderConfig::new("ftp://x")).is_err());
}

#[test]
fn backoff_grows_and_is_capped() {
    let p = RetryPolicy {
        max_attempts: 10,
        initial_backoff_ms: 100,
        max_backoff_ms: 1000,
        max_retry_after_ms: 0,
    };
    for _ in 0..50 {
        let waits: Vec<u128> = p.schedule().map(|d| d.as_millis()).collect();
        assert_eq!(waits.len(), 9, "one wait per retry");
        assert!((50..=100).contains(&waits[0]), "{waits:?}");
        assert!((200..=400).contains(&waits[2]), "{waits:?}");
        assert!(waits.iter().all(|&w| w <= 1000), "{waits:?}");
    }
}

#[test]
fn retry_after_parsing() {
    let mut h = HeaderMap::new();
    h.insert(RETRY_AFTER, "2".parse().unwrap());
    assert_eq!(parse_retry_after(&h), Some(Duration::from_secs(2)));
    h.insert(RETRY_AFTER, "0.25".parse().unwrap());
    assert_eq!(parse_retry_after(&h), Some(Duration::from_millis(250)));
    h.insert(
        RETRY_AFTER,
        "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
    );
    assert_eq!(parse_retry_after(&h), None);
}

proptest! {
    #[test]
    fn sse_and_assembler_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600), piece in 1usize..40) {
        let mut p = SseParser::new(256);
        let mut a = StreamAssembler::new();
        for chunk in bytes.chunks(piece) {
            match p.feed(chunk) {
                Ok(evs) => for ev in evs { let _ = a.push_event(&ev); },
                Err(_) => break,
            }
        }
        let _ = a.finish();
    }

    #[test]
    fn assembler_never_panics_on_json_like_chunks(
        chunks in proptest::collection::vec(prop_oneof![
            Just("{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3}]}}]}".to_string()),
            Just("{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":{}}}]}".to_string()),
            Just("{\"choices\":{}}".to_string()),
            Just("{\"choices\":[1,null,{\"delta\":7}]}".to_string()),
            Just("{\"usage\":5}".to_string()),
            Just("{\"choices\":[{\"delta\":{\"content\":5,\"tool_calls\":[{\"function\":{\"name\":1}}]}}]}".to_string()),
            "[ -~]{0,30}",
        ], 0..12)
    ) {
        let mut a = StreamAssembler::new();
        for c in &chunks { let _ = a.push_event(c); }
        let _ = a.finish();
    }

    #[test]
    fn parse_completion_never_panics(s in "[ -~]{0,200}") {
        let _ = parse_completion(s.as_bytes());
    }
}
