//! A native session as an ATIF trajectory (the Agent Trajectory Interchange Format of the
//! Harbor project; validated in tests against the schema of its models, see
//! `tests/atif/README.md`).
//!
//! Steps in record order: each `input` a `user` step; each `response` an `agent` step with its
//! text as `message`, its reasoning as `reasoning_content`, its tool calls as `tool_calls`
//! (arguments as the JSON object the model wrote; text that is not an object is kept as
//! `{"raw": …}`), its token counts as `metrics`, and the outcomes of its calls as its
//! `observation` (in doubt ones included, with their notice); a compaction, a resume receipt,
//! a stop, a control input, an approval request and a decision are `system` steps. `final_metrics` adds the tokens up.

use std::collections::HashMap;

use lazarus_ledger::Payload;
use lazarus_session::record::{Item, Record};
use lazarus_session::{SessionId, Store};
use serde_json::{Map, Value, json};

/// The ATIF version written.
pub const SCHEMA_VERSION: &str = "ATIF-v1.6";

/// Records are read in pages of this many.
const PAGE: usize = 1000;

/// Builds the trajectory of session `id`.
pub fn trajectory(
    store: &dyn Store,
    id: &SessionId,
) -> Result<Value, lazarus_session::SessionError> {
    let st = store.load(id)?;
    let model = st
        .header
        .meta
        .as_ref()
        .and_then(|m| m.get("model"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut steps: Vec<Value> = Vec::new();
    let mut step_of_call: HashMap<String, usize> = HashMap::new();
    let (mut prompt, mut completion, mut cached) = (0u64, 0u64, 0u64);
    let mut notes = Vec::new();
    let mut after = 0;
    loop {
        let page = store.records(id, after, PAGE)?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for r in page {
            let Ok(rec) = Record::deserialize_kind(&r.kind, r.data.clone()) else {
                continue;
            };
            let ts = r.ts.clone();
            let step = |source: &str, message: String| json!({"step_id": 0, "timestamp": ts, "source": source, "message": message});
            match rec {
                Record::Input(i) => steps.push(step("user", i.text)),
                Record::Control(c) => steps.push(step(
                    "system",
                    format!(
                        "[{} event{}]",
                        c.action,
                        c.reason.map(|r| format!(": {r}")).unwrap_or_default()
                    ),
                )),
                Record::Response(resp) => {
                    let mut s = step("agent", resp.text());
                    let o = s.as_object_mut().expect("a step is an object");
                    if let Some(m) = resp.model.clone().or_else(|| model.clone()) {
                        o.insert("model_name".into(), json!(m));
                    }
                    let reasoning: Vec<&str> = resp
                        .items
                        .iter()
                        .filter_map(|i| match i {
                            Item::Reasoning { text } | Item::ProviderReasoning { text, .. } => {
                                Some(text.as_str())
                            }
                            _ => None,
                        })
                        .collect();
                    if !reasoning.is_empty() {
                        o.insert("reasoning_content".into(), json!(reasoning.join("\n")));
                    }
                    let calls: Vec<Value> = resp
                        .tool_calls()
                        .map(|(call_id, name, args)| {
                            step_of_call.insert(call_id.to_string(), steps.len());
                            let arguments = match serde_json::from_str::<Value>(args) {
                                Ok(Value::Object(m)) => Value::Object(m),
                                _ => json!({"raw": args}),
                            };
                            json!({"tool_call_id": call_id, "function_name": name, "arguments": arguments})
                        })
                        .collect();
                    if !calls.is_empty() {
                        o.insert("tool_calls".into(), Value::Array(calls));
                    }
                    if let Some(u) = &resp.usage {
                        let mut m = Map::new();
                        if let Some(p) = u.prompt_tokens {
                            prompt += p;
                            m.insert("prompt_tokens".into(), json!(p));
                        }
                        if let Some(c) = u.completion_tokens {
                            completion += c;
                            m.insert("completion_tokens".into(), json!(c));
                        }
                        if let Some(c) = u.cached_tokens {
                            cached += c;
                            m.insert("cached_tokens".into(), json!(c));
                        }
                        o.insert("metrics".into(), Value::Object(m));
                    }
                    if let Some(f) = &resp.failure {
                        o.insert("extra".into(), json!({"failure": f.message}));
                    }
                    steps.push(s);
                }
                Record::ToolOutcome(out) => {
                    if let Some(&i) = step_of_call.get(&out.call_id) {
                        let o = steps[i].as_object_mut().expect("a step is an object");
                        let obs = o
                            .entry("observation")
                            .or_insert_with(|| json!({"results": []}));
                        if let Some(results) = obs["results"].as_array_mut() {
                            results.push(json!({
                                "source_call_id": out.call_id,
                                "content": out.result,
                                "extra": {"status": out.status},
                            }));
                        }
                    }
                }
                Record::Compaction(c) => steps.push(step(
                    "system",
                    format!(
                        "[compacted records {}..={}] {}",
                        c.from_seq, c.through_seq, c.summary
                    ),
                )),
                Record::Resume(rc) => steps.push(step(
                    "system",
                    format!(
                        "[resumed ({}): {} calls reused, {} re-run, {} in doubt]",
                        rc.trigger, rc.calls_reused, rc.calls_rerun, rc.calls_in_doubt
                    ),
                )),
                Record::Interrupted(i) => {
                    steps.push(step("system", format!("[stopped: {}]", i.reason)))
                }
                Record::ApprovalRequest(a) => steps.push(step(
                    "system",
                    format!(
                        "[approval asked for {} call {}: {}]",
                        a.tool, a.call_id, a.reason
                    ),
                )),
                Record::Approval(a) => steps.push(step(
                    "system",
                    format!(
                        "[call {} {} by {} ({}){}]",
                        a.call_id,
                        match a.decision {
                            lazarus_session::record::Decision::Allow => "allowed",
                            lazarus_session::record::Decision::Deny => "denied",
                        },
                        a.by,
                        a.scope.as_str(),
                        a.reason.map(|r| format!(": {r}")).unwrap_or_default()
                    ),
                )),
                Record::Import(i) => notes.push(format!(
                    "imported from {} {} ({}, sha256 {})",
                    i.agent,
                    i.agent_version.unwrap_or_default(),
                    i.source,
                    i.sha256
                )),
                Record::Fork(f) => {
                    notes.push(format!("forked from {} at turn {}", f.parent, f.at_turn))
                }
                // a host framework's history (the Python package): its items as they are
                Record::Host(_) => steps.push(step("system", format!("[{}] {}", r.kind, r.data))),
                // what the session ran with: provenance, not a step of the trajectory
                Record::World(w) => notes.push(format!(
                    "world {:?} by {}: workspace {}",
                    w.reason,
                    w.by,
                    w.workspace.unwrap_or_default()
                )),
                Record::NeedsOwner(n) => {
                    notes.push(format!("left alone by {}: {}", n.by, n.reason))
                }
                // a call's task is a step of the call, whose result is its outcome's
                Record::TurnStart(_)
                | Record::ToolIntent(_)
                | Record::ToolStart(_)
                | Record::ToolTask(_)
                | Record::ToolTaskStatus(_)
                | Record::Header => {}
            }
        }
    }
    if steps.is_empty() {
        // ATIF needs one step at least
        steps.push(json!({"step_id": 0, "source": "system", "message": "[empty session]"}));
    }
    for (i, s) in steps.iter_mut().enumerate() {
        s["step_id"] = json!(i + 1);
    }
    let n = steps.len();
    let mut t = json!({
        "schema_version": SCHEMA_VERSION,
        "session_id": id.as_str(),
        "agent": {"name": "lazarus", "version": env!("CARGO_PKG_VERSION")},
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": prompt,
            "total_completion_tokens": completion,
            "total_cached_tokens": cached,
            "total_steps": n,
        },
    });
    if let Some(m) = model {
        t["agent"]["model_name"] = json!(m);
    }
    if !notes.is_empty() {
        t["notes"] = json!(notes.join("; "));
    }
    Ok(t)
}
