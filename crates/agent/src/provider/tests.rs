use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::{Map, Value};

use super::client::parse_retry_after;
use super::*;
use crate::model::{Message, ModelRequest, ModelResponse, OutputItem, ToolCall, ToolSpec};
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

/// Feeds an SSE body to a protocol's assembler in pieces of `piece` bytes.
fn assemble_api(api: Api, body: &str, piece: usize) -> Result<ModelResponse, ProviderError> {
    let mut p = SseParser::new(1 << 20);
    let mut a = api.dialect().assembler();
    for chunk in body.as_bytes().chunks(piece.max(1)) {
        for ev in p.feed(chunk)? {
            a.push_event(&ev)?;
        }
    }
    if let Some(ev) = p.finish() {
        a.push_event(&ev)?;
    }
    assert!(a.is_complete(), "stream complete");
    a.finish()
}

/// An Anthropic stream as the API sends it with extended thinking and a redacted block:
/// the blocks come back verbatim, the tool input exactly as streamed, usage with cache reads.
const ANTHROPIC_STREAM: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":100,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n",
    "event: ping\ndata: {\"type\":\"ping\"}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me \\u00e9 think\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQB+/==\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"RED+ACTED=\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"shell\",\"input\":{}}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"comm\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"and\\\": \\\"ls\\\"}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":30}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[test]
fn anthropic_stream_keeps_thinking_and_redacted_blocks_verbatim_in_any_chunking() {
    let whole = assemble_api(Api::Anthropic, ANTHROPIC_STREAM, usize::MAX).unwrap();
    assert_eq!(
        whole.items[0],
        OutputItem::ProviderReasoning {
            api: "anthropic".into(),
            text: "Let me é think".into(),
            item: json!({"type": "thinking", "thinking": "Let me é think", "signature": "EqQB+/=="}),
        }
    );
    assert_eq!(
        whole.items[1],
        OutputItem::ProviderReasoning {
            api: "anthropic".into(),
            text: String::new(),
            item: json!({"type": "redacted_thinking", "data": "RED+ACTED="}),
        }
    );
    let call = whole.tool_calls().next().unwrap();
    assert_eq!(call.call_id, "toolu_01");
    assert_eq!(call.arguments, "{\"command\": \"ls\"}", "as streamed");
    assert_eq!(whole.stop_reason, "tool_use");
    let u = whole.usage.as_ref().unwrap();
    assert_eq!(
        (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
        (Some(112), Some(30), Some(100))
    );
    assert_eq!(whole.provider_extra["id"], json!("msg_1"));
    for piece in [1, 3, 7, 64] {
        assert_eq!(
            assemble_api(Api::Anthropic, ANTHROPIC_STREAM, piece).unwrap(),
            whole
        );
    }
    // the block goes back first, as it came
    let req = ModelRequest {
        model: "m".into(),
        messages: vec![Message::user("u"), Message::assistant_from(&whole)],
        tools: vec![],
        max_tokens: None,
        temperature: None,
        stream: true,
    };
    let body = anthropic::request_body(&req, &Map::new());
    assert_eq!(
        body["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": "Let me é think", "signature": "EqQB+/=="})
    );
    assert_eq!(
        body["messages"][1]["content"][1],
        json!({"type": "redacted_thinking", "data": "RED+ACTED="})
    );
    assert_eq!(body["max_tokens"], json!(anthropic::DEFAULT_MAX_TOKENS));
}

#[test]
fn anthropic_error_event_is_an_api_error_and_transient_when_overloaded() {
    let s = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"content\":[],\"usage\":{}}}\n\n",
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
    );
    let mut a = Api::Anthropic.dialect().assembler();
    let mut p = SseParser::new(1 << 20);
    let err = p
        .feed(s.as_bytes())
        .unwrap()
        .iter()
        .find_map(|e| a.push_event(e).err())
        .unwrap();
    assert!(matches!(&err, ProviderError::ApiError { kind, .. } if kind == "overloaded_error"));
    assert!(err.is_retryable());
    let bad = ProviderError::ApiError {
        kind: "invalid_request_error".into(),
        message: "x".into(),
    };
    assert!(!bad.is_retryable());
}

#[test]
fn responses_incomplete_and_failed_streams() {
    let incomplete = concat!(
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n",
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"shell\",\"arguments\":\"\"}}\n\n",
        "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,\"delta\":\"{\\\"comm\"}\n\n",
        "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"resp_1\",\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"output\":[]}}\n\n",
    );
    let r = assemble_api(Api::Responses, incomplete, 5).unwrap();
    assert_eq!(r.stop_reason, "max_output_tokens");
    assert!(r.is_truncated());
    assert_eq!(
        r.tool_calls().next().unwrap().arguments,
        "{\"comm",
        "as far as it came"
    );
    let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n";
    let mut a = Api::Responses.dialect().assembler();
    let mut p = SseParser::new(1 << 20);
    let err = p
        .feed(failed.as_bytes())
        .unwrap()
        .iter()
        .find_map(|e| a.push_event(e).err())
        .unwrap();
    assert!(err.to_string().contains("boom"), "{err}");
    assert!(err.is_retryable());
    // a stream cut before response.completed is incomplete, not a response
    let cut = &incomplete[..incomplete.find("event: response.incomplete").unwrap()];
    let mut a = Api::Responses.dialect().assembler();
    let mut p = SseParser::new(1 << 20);
    for e in p.feed(cut.as_bytes()).unwrap() {
        a.push_event(&e).unwrap();
    }
    assert!(!a.is_complete());
}

#[test]
fn endpoints_per_api() {
    assert_eq!(
        Api::Chat.endpoint("http://h/v1/"),
        "http://h/v1/chat/completions"
    );
    assert_eq!(
        Api::Responses.endpoint("https://api.openai.com/v1"),
        "https://api.openai.com/v1/responses"
    );
    assert_eq!(
        Api::Anthropic.endpoint("https://api.anthropic.com"),
        "https://api.anthropic.com/v1/messages"
    );
    assert_eq!(
        Api::Anthropic.endpoint("http://h:1/v1"),
        "http://h:1/v1/messages"
    );
    assert_eq!("anthropic".parse::<Api>(), Ok(Api::Anthropic));
    assert!(
        "gemini"
            .parse::<Api>()
            .unwrap_err()
            .contains("chat, responses or anthropic")
    );
}

proptest! {
    /// Untrusted bytes: a real stream of each protocol with one byte changed, cut anywhere
    /// and fed in any chunking, never panics the assemblers (errors are fine).
    #[test]
    fn api_assemblers_never_panic_on_damaged_streams(
        pos in 0usize..4000, byte in any::<u8>(), cut in 0usize..4000, piece in 1usize..50, which in 0usize..2,
    ) {
        let (api, body) = if which == 0 {
            (Api::Anthropic, ANTHROPIC_STREAM.to_string())
        } else {
            let r = concat!(
                "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"reasoning\",\"id\":\"rs\",\"summary\":[]}}\n\n",
                "data: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":\"reasoning\",\"id\":\"rs\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"t\"}],\"encrypted_content\":\"E\"}}\n\n",
                "data: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":1}}}\n\n",
            );
            (Api::Responses, r.to_string())
        };
        let mut bytes = body.into_bytes();
        if !bytes.is_empty() {
            let p = pos % bytes.len();
            bytes[p] = byte;
            bytes.truncate(cut % (bytes.len() + 1));
        }
        let mut p = SseParser::new(1 << 20);
        let mut a = api.dialect().assembler();
        'feed: for chunk in bytes.chunks(piece) {
            match p.feed(chunk) {
                Ok(evs) => {
                    for e in evs {
                        if a.push_event(&e).is_err() {
                            break 'feed;
                        }
                    }
                }
                Err(_) => break,
            }
        }
        let _ = a.finish();
    }
}
