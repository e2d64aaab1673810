//! The OpenAI Responses API (`POST /v1/responses`): request normalisation for matching, and
//! replies shaped as the real API sends them — a `response` object, or SSE with
//! `response.created`, `response.in_progress`, `response.output_item.added`,
//! `response.content_part.added`, `response.output_text.delta` / `.done`,
//! `response.function_call_arguments.delta` / `.done`, `response.output_item.done`,
//! `response.completed` (or `response.failed`). Reasoning items carry `encrypted_content`.
use serde_json::{Value, json};

use crate::script::ScriptedResponse;
use crate::sse::SseEvent;

fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A chat-completions-shaped view of a Responses request, so [`crate::When`] rules apply:
/// `instructions` and `developer` messages become system messages, `function_call` /
/// `custom_tool_call` items become assistant `tool_calls`, their outputs `tool` messages.
pub fn normalize(req: &Value) -> Value {
    let mut messages = Vec::new();
    if let Some(s) = req.get("instructions").and_then(Value::as_str) {
        messages.push(json!({"role": "system", "content": s}));
    }
    match req.get("input") {
        Some(Value::String(s)) => messages.push(json!({"role": "user", "content": s})),
        Some(Value::Array(items)) => {
            for it in items {
                let ty = it.get("type").and_then(Value::as_str).unwrap_or("message");
                match ty {
                    "message" => {
                        let role = match it.get("role").and_then(Value::as_str) {
                            Some("developer") | Some("system") => "system",
                            Some(r) => r,
                            None => "user",
                        };
                        messages.push(json!({"role": role, "content": text_of(it.get("content"))}));
                    }
                    "function_call" | "custom_tool_call" | "local_shell_call" => {
                        let args = it
                            .get("arguments")
                            .or_else(|| it.get("input"))
                            .map(|a| a.as_str().map_or_else(|| a.to_string(), str::to_string))
                            .unwrap_or_default();
                        messages.push(json!({"role": "assistant", "content": "",
                            "tool_calls": [{"id": it.get("call_id"), "type": "function",
                                "function": {"name": it.get("name"), "arguments": args}}]}));
                    }
                    "function_call_output"
                    | "custom_tool_call_output"
                    | "local_shell_call_output" => {
                        let out = match it.get("output") {
                            Some(Value::String(s)) => s.clone(),
                            Some(v) => text_of(Some(v)),
                            None => String::new(),
                        };
                        messages.push(json!({"role": "tool", "tool_call_id": it.get("call_id"),
                            "content": out}));
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    let mut out = json!({"messages": messages});
    if let Some(t) = req.get("tools") {
        out["tools"] = t.clone();
    }
    out
}

/// `encrypted_content` of the reasoning items a request sends back.
pub fn opaque_in_request(req: &Value) -> Vec<String> {
    req.get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|it| it.get("type").and_then(Value::as_str) == Some("reasoning"))
        .filter_map(|it| it.get("encrypted_content").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

fn model(r: &ScriptedResponse, req: &Value) -> String {
    r.model
        .clone()
        .or_else(|| req.get("model").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "scripted-model".into())
}

fn usage(r: &ScriptedResponse) -> Value {
    r.usage.clone().unwrap_or_else(|| {
        json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15})
    })
}

/// The complete output items, in order: reasoning, message, function calls.
fn items(r: &ScriptedResponse, number: usize) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(t) = &r.reasoning {
        out.push(
            json!({"id": format!("rs_scripted{number:06}"), "type": "reasoning",
            "summary": [{"type": "summary_text", "text": t}],
            "encrypted_content": r.opaque(number)}),
        );
    }
    if let Some(t) = &r.text {
        out.push(
            json!({"id": format!("msg_scripted{number:06}"), "type": "message",
            "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": t}]}),
        );
    }
    for (i, c) in r.tool_calls.iter().enumerate() {
        let mut item = json!({"id": format!("fc_scripted{number:06}_{i}"), "type": "function_call",
            "status": "completed", "arguments": c.arguments_text(), "call_id": c.id,
            "name": c.name});
        if let Some(ns) = &c.namespace {
            item["namespace"] = json!(ns);
        }
        out.push(item);
    }
    out
}

fn response(
    r: &ScriptedResponse,
    number: usize,
    req: &Value,
    status: &str,
    output: Vec<Value>,
) -> Value {
    let mut v = json!({
        "id": format!("resp_scripted{number:06}"), "object": "response",
        "created_at": 1_700_000_000u64, "status": status, "error": null,
        "incomplete_details": null, "model": model(r, req), "output": output,
        "parallel_tool_calls": true, "store": req.get("store").cloned().unwrap_or(json!(false)),
        "usage": if status == "completed" { usage(r) } else { Value::Null },
    });
    for (k, x) in &r.extra {
        v[k.as_str()] = x.clone();
    }
    v
}

/// The non-streaming reply.
pub fn to_json(r: &ScriptedResponse, number: usize, req: &Value) -> Value {
    response(r, number, req, "completed", items(r, number))
}

/// The streaming reply, event by event (each with its `sequence_number`).
pub fn to_sse(r: &ScriptedResponse, number: usize, req: &Value) -> Vec<SseEvent> {
    let mut evs: Vec<Value> = Vec::new();
    evs.push(json!({"type": "response.created",
        "response": response(r, number, req, "in_progress", vec![])}));
    evs.push(json!({"type": "response.in_progress",
        "response": response(r, number, req, "in_progress", vec![])}));
    let per = r.text_chunk_chars.unwrap_or(4).max(1);
    let pieces = |s: &str| -> Vec<String> {
        let chars: Vec<char> = s.chars().collect();
        chars.chunks(per).map(|c| c.iter().collect()).collect()
    };
    let all = items(r, number);
    for (oi, item) in all.iter().enumerate() {
        let id = item["id"].clone();
        match item["type"].as_str().unwrap_or("") {
            "reasoning" => {
                let mut added = item.clone();
                added["summary"] = json!([]);
                if let Some(o) = added.as_object_mut() {
                    o.remove("encrypted_content");
                }
                evs.push(json!({"type": "response.output_item.added", "output_index": oi, "item": added}));
                let text = item["summary"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                evs.push(json!({"type": "response.reasoning_summary_part.added", "item_id": id,
                    "output_index": oi, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}));
                for p in pieces(&text) {
                    evs.push(
                        json!({"type": "response.reasoning_summary_text.delta", "item_id": id,
                        "output_index": oi, "summary_index": 0, "delta": p}),
                    );
                }
                evs.push(
                    json!({"type": "response.reasoning_summary_text.done", "item_id": id,
                    "output_index": oi, "summary_index": 0, "text": text}),
                );
                evs.push(json!({"type": "response.reasoning_summary_part.done", "item_id": id,
                    "output_index": oi, "summary_index": 0, "part": {"type": "summary_text", "text": text}}));
            }
            "message" => {
                let mut added = item.clone();
                added["status"] = json!("in_progress");
                added["content"] = json!([]);
                evs.push(json!({"type": "response.output_item.added", "output_index": oi, "item": added}));
                evs.push(json!({"type": "response.content_part.added", "item_id": id,
                    "output_index": oi, "content_index": 0,
                    "part": {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}}));
                let text = item["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                for p in pieces(&text) {
                    evs.push(json!({"type": "response.output_text.delta", "item_id": id,
                        "output_index": oi, "content_index": 0, "delta": p, "logprobs": []}));
                }
                evs.push(json!({"type": "response.output_text.done", "item_id": id,
                    "output_index": oi, "content_index": 0, "text": text, "logprobs": []}));
                evs.push(json!({"type": "response.content_part.done", "item_id": id,
                    "output_index": oi, "content_index": 0, "part": item["content"][0]}));
            }
            _ => {
                let mut added = item.clone();
                added["status"] = json!("in_progress");
                added["arguments"] = json!("");
                evs.push(json!({"type": "response.output_item.added", "output_index": oi, "item": added}));
                let args: Vec<char> = item["arguments"].as_str().unwrap_or("").chars().collect();
                let mid = args.len() / 2;
                for part in [&args[..mid], &args[mid..]] {
                    if !part.is_empty() {
                        let s: String = part.iter().collect();
                        evs.push(json!({"type": "response.function_call_arguments.delta",
                            "item_id": id, "output_index": oi, "delta": s}));
                    }
                }
                evs.push(
                    json!({"type": "response.function_call_arguments.done", "item_id": id,
                    "output_index": oi, "arguments": item["arguments"]}),
                );
            }
        }
        evs.push(json!({"type": "response.output_item.done", "output_index": oi, "item": item}));
    }
    evs.push(json!({"type": "response.completed",
        "response": response(r, number, req, "completed", all)}));
    number_events(evs)
}

fn number_events(evs: Vec<Value>) -> Vec<SseEvent> {
    evs.into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            e["sequence_number"] = json!(i);
            let name = e["type"].as_str().unwrap_or("").to_string();
            SseEvent::named(&name, e.to_string())
        })
        .collect()
}

/// An OpenAI-style error body.
pub fn error_body(ty: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": ty, "param": null, "code": ty}})
}

/// The `response.failed` event a stream ends with when the API fails mid-response.
pub fn failed_event(
    r: &ScriptedResponse,
    number: usize,
    req: &Value,
    code: &str,
    message: &str,
    sequence: usize,
) -> SseEvent {
    let mut resp = response(r, number, req, "failed", vec![]);
    resp["error"] = json!({"code": code, "message": message});
    let e = json!({"type": "response.failed", "sequence_number": sequence, "response": resp});
    SseEvent::named("response.failed", e.to_string())
}
