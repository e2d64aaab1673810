//! The client on all three wire protocols against the scripted server (real HTTP + SSE):
//! tool calls, reasoning kept verbatim and sent back byte-identical, usage with cached
//! tokens, headers, and retries of the faults each API really sends.

use lazarus_agent::model::{Message, ModelRequest, ModelResponse, OutputItem, ToolSpec};
use lazarus_agent::provider::{
    Api, CancellationToken, Completion, CompletionFailure, OpenAiClient, ProviderConfig,
    ProviderError,
};
use lazarus_testkit::{Protocol, Reply, Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

fn request(stream: bool) -> ModelRequest {
    ModelRequest {
        model: "m".into(),
        messages: vec![Message::system("be brief"), Message::user("list the files")],
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

fn client(server: &ScriptedServer, api: Api) -> OpenAiClient {
    let mut cfg = ProviderConfig::new(server.base_url());
    cfg.api = api;
    cfg.api_key = Some("sk-test-key".into());
    cfg.retry.initial_backoff_ms = 10;
    cfg.retry.max_backoff_ms = 50;
    cfg.limits.stream_idle_timeout_ms = 2_000;
    OpenAiClient::new(cfg).expect("client")
}

async fn complete(c: &OpenAiClient, req: &ModelRequest) -> Result<Completion, CompletionFailure> {
    c.complete(req, &CancellationToken::new(), &mut |_| {})
        .await
}

fn protocol(api: Api) -> Protocol {
    match api {
        Api::Chat => Protocol::Chat,
        Api::Responses => Protocol::Responses,
        Api::Anthropic => Protocol::Anthropic,
    }
}

/// The provider items of a response, verbatim.
fn provider_items(r: &ModelResponse) -> Vec<(String, Value)> {
    r.items
        .iter()
        .filter_map(|i| match i {
            OutputItem::ProviderReasoning { api, item, .. } => Some((api.clone(), item.clone())),
            _ => None,
        })
        .collect()
}

/// Turn 1: reasoning + text + a tool call; turn 2 (after the result): text. The reasoning
/// item issued in turn 1 must come back byte-identical in turn 2, the tool-use id too.
#[tokio::test]
async fn tool_call_and_reasoning_round_trip_on_every_api_streamed_and_not() {
    for api in [Api::Responses, Api::Anthropic, Api::Chat] {
        for stream in [true, false] {
            let label = format!("{api} stream={stream}");
            let server = ScriptedServer::start(Script::new([
                Step::reply(
                    ScriptedResponse::tool_call(
                        "toolu_01A",
                        "list_dir",
                        json!({"path": "a \"b\""}),
                    )
                    .with_reasoning("I should list it.")
                    .with_text("Let me look."),
                )
                .when(When::LastUserContains {
                    text: "list".into(),
                }),
                Step::after_tool_result("toolu_01A", ScriptedResponse::text("Two files.")),
            ]))
            .await
            .unwrap();
            let c = client(&server, api);
            let mut req = request(stream);
            let first = complete(&c, &req).await.expect(&label);
            let r = &first.response;
            assert_eq!(r.text(), "Let me look.", "{label}");
            let call = r.tool_calls().next().expect("a call").clone();
            assert_eq!(call.call_id, "toolu_01A", "{label}");
            assert_eq!(call.name, "list_dir", "{label}");
            let args: Value = serde_json::from_str(&call.arguments).unwrap();
            assert_eq!(args, json!({"path": "a \"b\""}), "{label}");
            assert!(!r.is_truncated());
            let items = provider_items(r);
            match api {
                Api::Chat => {
                    assert!(items.is_empty(), "{label}");
                    assert!(r.items.iter().any(
                        |i| matches!(i, OutputItem::Reasoning { text } if text == "I should list it.")
                    ));
                }
                Api::Responses => {
                    assert_eq!(items.len(), 1, "{label}");
                    assert_eq!(items[0].0, "responses");
                    assert_eq!(items[0].1["type"], "reasoning");
                    assert_eq!(
                        items[0].1["encrypted_content"],
                        json!(server.opaque_round_trips()[0].value)
                    );
                    assert_eq!(r.stop_reason, "tool_calls");
                }
                Api::Anthropic => {
                    assert_eq!(items.len(), 1, "{label}");
                    assert_eq!(items[0].0, "anthropic");
                    assert_eq!(
                        items[0].1,
                        json!({"type": "thinking", "thinking": "I should list it.",
                            "signature": server.opaque_round_trips()[0].value}),
                        "{label}: the block as the API sent it"
                    );
                    assert_eq!(r.stop_reason, "tool_use");
                }
            }
            req.messages.push(Message::assistant_from(r));
            req.messages.push(Message::tool_result("toolu_01A", "a\nb"));
            let second = complete(&c, &req).await.expect(&label);
            assert_eq!(second.response.text(), "Two files.", "{label}");
            assert_eq!(server.unmatched_count(), 0, "{label}");
            assert!(
                server.protocols().iter().all(|p| *p == protocol(api)),
                "{label}"
            );
            if api != Api::Chat {
                let trips = server.opaque_round_trips();
                assert_eq!(trips.len(), 1, "{label}: {trips:?}");
                assert_eq!(
                    trips[0].echoed_in,
                    vec![2],
                    "{label}: sent back byte-identical"
                );
                assert!(server.unknown_opaque().is_empty(), "{label}");
            }
            let reqs = server.requests();
            match api {
                Api::Anthropic => {
                    assert_eq!(reqs[0]["system"], "be brief");
                    assert_eq!(reqs[0]["max_tokens"], 64);
                    let msgs = reqs[1]["messages"].as_array().unwrap();
                    assert_eq!(msgs.len(), 3, "{label}: user, assistant, user(tool_result)");
                    assert_eq!(msgs[1]["content"][0]["type"], "thinking", "thinking first");
                    assert_eq!(msgs[1]["content"][2]["id"], "toolu_01A");
                    assert_eq!(msgs[2]["content"][0]["tool_use_id"], "toolu_01A");
                    let h = &server.request_headers()[0];
                    let get = |n: &str| h.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
                    assert_eq!(get("x-api-key"), Some("sk-test-key"));
                    assert_eq!(get("anthropic-version"), Some("2023-06-01"));
                    assert_eq!(get("authorization"), None, "the key is not sent twice");
                }
                Api::Responses => {
                    assert_eq!(reqs[0]["instructions"], "be brief");
                    assert_eq!(reqs[0]["store"], false);
                    assert_eq!(reqs[0]["include"], json!(["reasoning.encrypted_content"]));
                    let input = reqs[1]["input"].as_array().unwrap();
                    let types: Vec<&str> =
                        input.iter().map(|i| i["type"].as_str().unwrap()).collect();
                    assert_eq!(
                        types,
                        [
                            "message",
                            "reasoning",
                            "message",
                            "function_call",
                            "function_call_output"
                        ],
                        "{label}"
                    );
                    assert_eq!(input[3]["call_id"], "toolu_01A");
                    assert_eq!(input[4]["call_id"], "toolu_01A");
                    let h = &server.request_headers()[0];
                    assert!(
                        h.iter()
                            .any(|(k, v)| k == "authorization" && v == "Bearer sk-test-key")
                    );
                }
                Api::Chat => {}
            }
        }
    }
}

#[tokio::test]
async fn usage_with_cached_tokens_on_every_api() {
    let cases = [
        (
            Api::Chat,
            json!({"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107,
                "prompt_tokens_details": {"cached_tokens": 64}}),
            (100, 7, 107),
        ),
        (
            Api::Responses,
            json!({"input_tokens": 100, "input_tokens_details": {"cached_tokens": 64},
                "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 3},
                "total_tokens": 107}),
            (100, 7, 107),
        ),
        (
            // Anthropic counts cache reads and writes apart from input_tokens.
            Api::Anthropic,
            json!({"input_tokens": 30, "cache_creation_input_tokens": 6,
                "cache_read_input_tokens": 64, "output_tokens": 7}),
            (100, 7, 107),
        ),
    ];
    for (api, usage, (p, c, t)) in cases {
        for stream in [true, false] {
            let mut resp = ScriptedResponse::text("hi");
            resp.usage = Some(usage.clone());
            let server = ScriptedServer::start(Script::in_order([resp.into()]))
                .await
                .unwrap();
            let done = complete(&client(&server, api), &request(stream))
                .await
                .unwrap();
            let u = done.response.usage.expect("usage");
            let label = format!("{api} stream={stream}");
            assert_eq!(u.prompt_tokens, Some(p), "{label}");
            assert_eq!(u.completion_tokens, Some(c), "{label}");
            assert_eq!(u.total_tokens, Some(t), "{label}");
            assert_eq!(u.cached_tokens, Some(64), "{label}");
            // the provider's own fields stay as sent
            let kept = serde_json::to_value(&u.extra).unwrap();
            match api {
                Api::Chat => assert_eq!(kept["prompt_tokens_details"]["cached_tokens"], 64),
                Api::Responses => assert_eq!(kept["output_tokens_details"]["reasoning_tokens"], 3),
                Api::Anthropic => assert_eq!(kept["cache_creation_input_tokens"], 6),
            }
        }
    }
}

/// The faults each API really sends are retried and every attempt is reported: HTTP 529
/// `overloaded_error` and a mid-stream `error` event (Anthropic), HTTP 500 and a
/// `response.failed` event (Responses), and a stream cut off before its last event.
#[tokio::test]
async fn api_faults_are_retried_and_reported() {
    for api in [Api::Anthropic, Api::Responses] {
        let partial = ScriptedResponse::text("partial answer").with_reasoning("hm");
        let server = ScriptedServer::start(Script::in_order([
            Reply::api_error(529, "overloaded_error", "Overloaded"),
            Reply::StreamThenError {
                response: partial.clone(),
                after_chunks: 3,
                error_type: Some(
                    if api == Api::Anthropic {
                        "overloaded_error"
                    } else {
                        "server_error"
                    }
                    .into(),
                ),
                message: Some("try again".into()),
            },
            Reply::StreamThenDrop {
                response: partial.clone(),
                after_chunks: 4,
            },
            ScriptedResponse::text("ok").into(),
        ]))
        .await
        .unwrap();
        let mut cfg = ProviderConfig::new(server.base_url());
        cfg.api = api;
        cfg.retry.max_attempts = 4;
        cfg.retry.initial_backoff_ms = 10;
        cfg.retry.max_backoff_ms = 20;
        let c = OpenAiClient::new(cfg).unwrap();
        let done = complete(&c, &request(true))
            .await
            .unwrap_or_else(|e| panic!("{api}: {e}"));
        assert_eq!(done.response.text(), "ok", "{api}");
        let errors: Vec<String> = done
            .attempts
            .iter()
            .map(|a| a.error.clone().unwrap_or_default())
            .collect();
        assert_eq!(done.attempts.len(), 4, "{api}: {errors:?}");
        assert_eq!(done.attempts[0].status, Some(529), "{api}");
        assert!(errors[1].contains("try again"), "{api}: {errors:?}");
        assert!(
            errors[2].contains("before it was complete") || errors[2].contains("connection broke"),
            "{api}: {errors:?}"
        );
        assert!(errors[3].is_empty());
    }
}

#[tokio::test]
async fn an_invalid_request_error_is_not_retried() {
    for api in [Api::Anthropic, Api::Responses] {
        let server = ScriptedServer::start(Script::in_order([
            Reply::api_error(
                400,
                "invalid_request_error",
                "messages: roles must alternate",
            ),
            ScriptedResponse::text("never").into(),
        ]))
        .await
        .unwrap();
        let err = complete(&client(&server, api), &request(true))
            .await
            .unwrap_err();
        assert!(
            matches!(err.error, ProviderError::Http { status: 400, .. }),
            "{api}"
        );
        assert!(
            err.to_string().contains("roles must alternate"),
            "{api}: {err}"
        );
        assert_eq!(err.attempts.len(), 1);
    }
}

/// Anthropic wants user and assistant to alternate and no empty text: consecutive tool
/// results and the next user text share one user turn, an empty assistant turn is left out.
#[test]
fn anthropic_bodies_alternate_roles() {
    use lazarus_agent::model::ToolCall;
    let call = |id: &str| ToolCall {
        call_id: id.into(),
        name: "list_dir".into(),
        arguments: "{\"path\":".into(), // cut off: sent as {}
    };
    let req = ModelRequest {
        messages: vec![
            Message::user("a"),
            Message::assistant(None, vec![call("t1"), call("t2")]),
            Message::tool_result("t1", "r1"),
            Message::tool_result("t2", "r2"),
            Message::user("b"),
            Message::assistant(Some(String::new()), vec![]),
            Message::user("c"),
        ],
        ..request(false)
    };
    let body = lazarus_agent::provider::anthropic::request_body(&req, &Default::default());
    let msgs = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(msgs[1]["content"][0]["input"], json!({}));
    let kinds: Vec<&str> = msgs[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["tool_result", "tool_result", "text", "text"]);
    assert!(body.get("system").is_none());
}

/// Reasoning issued by one API is never sent to another (it would be refused there).
#[test]
fn provider_items_go_only_to_their_api() {
    use lazarus_agent::model::ProviderItem;
    let req = ModelRequest {
        messages: vec![
            Message::user("a"),
            Message::Assistant {
                provider_items: vec![
                    ProviderItem {
                        api: "anthropic".into(),
                        item: json!({"type": "thinking", "thinking": "x", "signature": "S"}),
                    },
                    ProviderItem {
                        api: "responses".into(),
                        item: json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "E"}),
                    },
                ],
                text: Some("t".into()),
                tool_calls: vec![],
            },
            Message::user("b"),
        ],
        ..request(false)
    };
    let a = lazarus_agent::provider::anthropic::request_body(&req, &Default::default()).to_string();
    let r = lazarus_agent::provider::responses::request_body(&req, &Default::default()).to_string();
    let c = lazarus_agent::provider::request_body(&req, &Default::default()).to_string();
    assert!(
        a.contains("\"signature\":\"S\"") && !a.contains("\"E\""),
        "{a}"
    );
    assert!(
        r.contains("\"encrypted_content\":\"E\"") && !r.contains("\"S\""),
        "{r}"
    );
    assert!(!c.contains("\"S\"") && !c.contains("\"E\""), "{c}");
}
