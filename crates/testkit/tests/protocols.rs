//! The Anthropic Messages and OpenAI Responses routes: shapes as the real APIs send them,
//! matching on their request shapes, opaque reasoning round trips, fault injection.

use lazarus_testkit::{Reply, Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

/// Parses an SSE body into (event name, data JSON) pairs.
fn events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|b| {
            let mut name = String::new();
            let mut data = String::new();
            for line in b.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            (name, serde_json::from_str(&data).unwrap_or(Value::Null))
        })
        .collect()
}

fn tool_and_thinking() -> ScriptedResponse {
    ScriptedResponse::tool_call("toolu_01", "Bash", json!({"command": "ls -la \"a b\""}))
        .with_reasoning("Let me look.")
        .with_text("Listing.")
}

#[tokio::test]
async fn anthropic_stream_has_the_real_event_sequence_and_reassembles() -> anyhow::Result<()> {
    let server = ScriptedServer::start(Script::new([Step::reply(tool_and_thinking()).when(
        When::LastUserContains {
            text: "list".into(),
        },
    )]))
    .await?;
    let http = reqwest::Client::new();
    let body = http
        .post(format!("http://{}/v1/messages", server.addr()))
        .header("anthropic-version", "2023-06-01")
        .json(
            &json!({"model": "claude-x", "max_tokens": 100, "stream": true,
            "system": [{"type": "text", "text": "sys"}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "please list"}]}]}),
        )
        .send()
        .await?
        .text()
        .await?;
    let evs = events(&body);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    assert!(names.contains(&"ping"));
    for (n, d) in &evs {
        assert_eq!(d["type"], *n, "data.type names the event");
    }
    let start = &evs[0].1["message"];
    assert_eq!(start["role"], "assistant");
    assert_eq!(start["model"], "claude-x");
    assert!(start["usage"]["input_tokens"].is_number());
    // Rebuild the blocks from the deltas, as a client does.
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial = String::new();
    for (n, d) in &evs {
        match n.as_str() {
            "content_block_start" => blocks.push(d["content_block"].clone()),
            "content_block_delta" => {
                let i = d["index"].as_u64().expect("index") as usize;
                let delta = &d["delta"];
                match delta["type"].as_str() {
                    Some("thinking_delta") => {
                        let t = blocks[i]["thinking"].as_str().unwrap_or("").to_string()
                            + delta["thinking"].as_str().unwrap_or("");
                        blocks[i]["thinking"] = t.into();
                    }
                    Some("signature_delta") => blocks[i]["signature"] = delta["signature"].clone(),
                    Some("text_delta") => {
                        let t = blocks[i]["text"].as_str().unwrap_or("").to_string()
                            + delta["text"].as_str().unwrap_or("");
                        blocks[i]["text"] = t.into();
                    }
                    Some("input_json_delta") => {
                        partial.push_str(delta["partial_json"].as_str().unwrap_or(""))
                    }
                    other => panic!("unexpected delta {other:?}"),
                }
            }
            "content_block_stop" => {
                let i = d["index"].as_u64().expect("index") as usize;
                if blocks[i]["type"] == "tool_use" {
                    blocks[i]["input"] = serde_json::from_str(&partial)?;
                }
            }
            _ => {}
        }
    }
    assert_eq!(blocks[0]["type"], "thinking");
    assert_eq!(blocks[0]["thinking"], "Let me look.");
    assert!(
        blocks[0]["signature"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!(blocks[1], json!({"type": "text", "text": "Listing."}));
    assert_eq!(blocks[2]["id"], "toolu_01");
    assert_eq!(blocks[2]["input"], json!({"command": "ls -la \"a b\""}));
    let delta = evs
        .iter()
        .find(|(n, _)| n == "message_delta")
        .expect("message_delta");
    assert_eq!(delta.1["delta"]["stop_reason"], "tool_use");
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn anthropic_signatures_must_come_back_byte_identical() -> anyhow::Result<()> {
    let server = ScriptedServer::start(Script::new([
        Step::reply(tool_and_thinking()),
        Step::after_tool_result("toolu_01", ScriptedResponse::text("done")).repeat(),
    ]))
    .await?;
    let http = reqwest::Client::new();
    let url = format!("http://{}/v1/messages", server.addr());
    let first: Value = http
        .post(&url)
        .json(&json!({"model": "m", "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(first["type"], "message");
    assert_eq!(first["stop_reason"], "tool_use");
    let content = first["content"].clone();
    let sig = content[0]["signature"]
        .as_str()
        .expect("signature")
        .to_string();
    // A client that keeps the thinking block unchanged, then one that alters it.
    for (i, signature) in [sig.clone(), format!("{sig}x")].into_iter().enumerate() {
        let mut blocks = content.clone();
        blocks[0]["signature"] = signature.into();
        let r: Value = http
            .post(&url)
            .json(&json!({"model": "m", "max_tokens": 10, "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": blocks},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "ok"},
                    {"type": "text", "text": "<system-reminder>x</system-reminder>"}]}]}))
            .send()
            .await?
            .json()
            .await?;
        assert_eq!(r["content"][0]["text"], "done", "request {}: {r}", i + 2);
    }
    let trips = server.opaque_round_trips();
    assert_eq!(trips.len(), 1);
    assert_eq!(trips[0].value, sig);
    assert_eq!(trips[0].issued_in, 1);
    assert_eq!(
        trips[0].echoed_in,
        vec![2],
        "only the unchanged copy counts"
    );
    assert_eq!(server.unknown_opaque(), vec![(3, format!("{sig}x"))]);
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn anthropic_faults_look_like_the_api() -> anyhow::Result<()> {
    let server = ScriptedServer::start(Script::in_order([
        Reply::api_error(529, "overloaded_error", "Overloaded"),
        Reply::StreamThenError {
            response: ScriptedResponse::text("partial answer"),
            after_chunks: 3,
            error_type: None,
            message: None,
        },
    ]))
    .await?;
    let http = reqwest::Client::new();
    let url = format!("http://{}/v1/messages", server.addr());
    let req = json!({"model": "m", "max_tokens": 10, "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    let r = http.post(&url).json(&req).send().await?;
    assert_eq!(r.status(), 529);
    assert!(r.headers().contains_key("request-id"));
    let body: Value = r.json().await?;
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "overloaded_error");
    assert_eq!(body["error"]["message"], "Overloaded");
    let text = http.post(&url).json(&req).send().await?.text().await?;
    let evs = events(&text);
    assert_eq!(evs.len(), 4, "{text}");
    assert_eq!(evs[3].0, "error");
    assert_eq!(evs[3].1["error"]["type"], "overloaded_error");
    // count_tokens answers; an unknown path is logged and 404.
    let n: Value = http
        .post(format!("{url}/count_tokens"))
        .json(&req)
        .send()
        .await?
        .json()
        .await?;
    assert!(n["input_tokens"].as_u64().is_some_and(|n| n > 0));
    let r = http
        .get(format!("http://{}/v1/embeddings", server.addr()))
        .send()
        .await?;
    assert_eq!(r.status(), 404);
    assert_eq!(
        server.other_requests(),
        vec!["GET /v1/embeddings".to_string()]
    );
    // the model list names the one scripted model
    let models: Value = http
        .get(format!("http://{}/v1/models", server.addr()))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(models["data"][0]["id"], lazarus_testkit::SCRIPTED_MODEL);
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn responses_stream_has_the_real_event_sequence() -> anyhow::Result<()> {
    let server = ScriptedServer::start(Script::new([
        Step::reply(
            ScriptedResponse::tool_call("call01", "exec_command", json!({"cmd": "ls"}))
                .with_reasoning("Think."),
        )
        .when(When::LastUserContains {
            text: "make".into(),
        }),
        Step::reply(ScriptedResponse::text("Done.")).when(When::AnyToolResult {
            call_id: "call01".into(),
        }),
    ]))
    .await?;
    let http = reqwest::Client::new();
    let url = format!("http://{}/v1/responses", server.addr());
    let text = http
        .post(&url)
        .json(&json!({"model": "gpt-x", "stream": true, "store": false,
            "instructions": "be brief", "include": ["reasoning.encrypted_content"],
            "input": [{"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "please make it"}]}]}))
        .send()
        .await?
        .text()
        .await?;
    let evs = events(&text);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[0], "response.created");
    assert_eq!(names[1], "response.in_progress");
    assert_eq!(*names.last().expect("last"), "response.completed");
    for (i, (n, d)) in evs.iter().enumerate() {
        assert_eq!(d["type"], *n);
        assert_eq!(d["sequence_number"], i, "sequence numbers count up");
    }
    let done: Vec<&Value> = evs
        .iter()
        .filter(|(n, _)| n == "response.output_item.done")
        .map(|(_, d)| &d["item"])
        .collect();
    assert_eq!(done[0]["type"], "reasoning");
    let enc = done[0]["encrypted_content"]
        .as_str()
        .expect("encrypted")
        .to_string();
    assert_eq!(done[1]["type"], "function_call");
    assert_eq!(done[1]["call_id"], "call01");
    let args: String = evs
        .iter()
        .filter(|(n, _)| n == "response.function_call_arguments.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(args, done[1]["arguments"].as_str().unwrap_or("?"));
    let completed = &evs.last().expect("completed").1["response"];
    assert_eq!(completed["status"], "completed");
    assert!(completed["usage"]["total_tokens"].is_number());
    // The next request sends the reasoning item back with the tool output.
    let r: Value = http
        .post(&url)
        .json(&json!({"model": "gpt-x", "input": [
            {"type": "message", "role": "user", "content": "please make it"},
            {"type": "reasoning", "id": done[0]["id"], "summary": [], "encrypted_content": enc},
            done[1],
            {"type": "function_call_output", "call_id": "call01", "output": "a\nb"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<ctx/>"}]}]}))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(r["object"], "response");
    assert_eq!(r["output"][0]["content"][0]["text"], "Done.");
    assert_eq!(server.opaque_round_trips()[0].echoed_in, vec![2]);
    server.shutdown().await;
    Ok(())
}
