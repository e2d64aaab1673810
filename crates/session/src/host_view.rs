//! A host session as people read it (`lazarus sessions show`, the web view): an Agents SDK
//! history as a conversation, a LangGraph thread as its steps. Values are decoded by
//! [`host_blob::view`] with the allowlist the Python package loads by, so what a program
//! would refuse to load is shown labelled, as it is, and nothing is ever run.

use serde_json::Value;

use crate::host_blob::{self, Allowlist};
use crate::record::HostBlob;
use crate::state::{HostGraph, HostWriteAt};

/// What `meta.host` says a host session is.
pub const LANGGRAPH: &str = "langgraph";
pub const OPENAI_AGENTS: &str = "openai-agents";

/// One item of an Agents SDK history (a Responses API input item), for people.
#[derive(Debug, Clone, PartialEq)]
pub enum ConvItem {
    User(String),
    Assistant(String),
    /// `system` or `developer` instructions.
    System(String),
    Call {
        call_id: String,
        name: String,
        arguments: String,
    },
    Output {
        call_id: String,
        output: String,
    },
    Reasoning(String),
    /// An item of a kind this view does not name (a hosted tool's, a newer SDK's): as it is.
    Other(Value),
}

/// Reads one item. Text content is the item's string, or its text parts joined.
pub fn conv_item(v: &Value) -> ConvItem {
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    match (v["type"].as_str(), v["role"].as_str()) {
        (Some("function_call"), _) => ConvItem::Call {
            call_id: s("call_id"),
            name: s("name"),
            arguments: s("arguments"),
        },
        (Some("function_call_output"), _) => ConvItem::Output {
            call_id: s("call_id"),
            output: match &v["output"] {
                Value::String(t) => t.clone(),
                other => text_of(other).unwrap_or_else(|| other.to_string()),
            },
        },
        (Some("reasoning"), _) => ConvItem::Reasoning(text_of(&v["summary"]).unwrap_or_default()),
        (None | Some("message"), Some(role)) => match text_of(&v["content"]) {
            Some(text) => match role {
                "user" => ConvItem::User(text),
                "assistant" => ConvItem::Assistant(text),
                "system" | "developer" => ConvItem::System(text),
                _ => ConvItem::Other(v.clone()),
            },
            None => ConvItem::Other(v.clone()),
        },
        _ => ConvItem::Other(v.clone()),
    }
}

/// A content value's text: a string, or the `text` of its parts, joined by newlines.
fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
            (!texts.is_empty() || parts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

/// One checkpoint of a LangGraph thread, decoded.
#[derive(Debug, Clone)]
pub struct GraphStep {
    pub ns: String,
    pub checkpoint_id: String,
    /// The record that holds it.
    pub seq: u64,
    pub parent_id: Option<String>,
    /// `metadata.step` (-1 for the input) and `metadata.source` (`input`, `loop`, `update`…).
    pub step: Option<i64>,
    pub source: Option<String>,
    /// The nodes whose writes (against its parent) it holds.
    pub ran: Vec<String>,
    /// Every channel's value at this checkpoint (the ones it changed and the ones it kept),
    /// LangGraph's trigger channels left out.
    pub values: Vec<(String, Value)>,
    /// The writes against it: its next step's tasks (pending, for the newest).
    pub writes: Vec<GraphWrite>,
    /// What its tasks were interrupted with (writes to `__interrupt__`).
    pub interrupts: Vec<Value>,
    pub metadata: Value,
}

/// One task's write, decoded.
#[derive(Debug, Clone)]
pub struct GraphWrite {
    pub task_id: String,
    pub node: String,
    pub idx: i64,
    pub channel: String,
    pub value: Value,
    pub seq: u64,
}

/// The channel LangGraph records interrupts in.
pub const INTERRUPT: &str = "__interrupt__";

/// A blob as JSON for people ([`host_blob::view`]).
pub fn value(b: &HostBlob, allow: &Allowlist) -> Value {
    host_blob::view(&b.type_tag, &b.b64, allow)
}

/// The node a task ran, from its path (`~__pregel_pull, NODE` for a node its edges
/// triggered; a `Send`'s push task names no node: `send` and its place).
pub fn node_of(task_path: &str, task_id: &str) -> String {
    let mut parts = task_path.split(", ");
    match (parts.next(), parts.next()) {
        (Some("~__pregel_pull"), Some(node)) => node.to_string(),
        (Some("~__pregel_push"), Some(at)) => format!("send {at}"),
        _ if task_path.is_empty() => format!("task {}", &task_id[..task_id.len().min(8)]),
        _ => task_path.to_string(),
    }
}

/// The thread's checkpoints in the order they were recorded (the root namespace's and each
/// subgraph's), each with its channels' values, the nodes that made it, and its writes.
pub fn graph_steps(g: &HostGraph, allow: &Allowlist) -> Vec<GraphStep> {
    let mut cps: Vec<_> = g.checkpoints.iter().collect();
    cps.sort_by_key(|(_, (seq, _))| *seq);
    cps.into_iter()
        .map(|((ns, id), (seq, c))| {
            let checkpoint = value(&c.checkpoint, allow);
            let metadata = value(&c.metadata, allow);
            let mut values = Vec::new();
            if let Some(versions) = checkpoint["channel_versions"].as_object() {
                for (channel, version) in versions {
                    if channel.starts_with("branch:to:") {
                        continue;
                    }
                    let version = match version {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    if let Some((_, b)) = g.values.get(&(ns.clone(), channel.clone(), version))
                        && b.type_tag != "empty"
                    {
                        values.push((channel.clone(), value(b, allow)));
                    }
                }
            }
            let writes_of = |cp: &str| -> Vec<GraphWrite> {
                let mut w: Vec<GraphWrite> = g
                    .writes
                    .get(&(ns.clone(), cp.to_string()))
                    .into_iter()
                    .flatten()
                    .map(
                        |((task, idx), w): (&(String, i64), &HostWriteAt)| GraphWrite {
                            task_id: task.clone(),
                            node: node_of(&w.task_path, task),
                            idx: *idx,
                            channel: w.channel.clone(),
                            value: value(&w.value, allow),
                            seq: w.seq,
                        },
                    )
                    .collect();
                w.sort_by_key(|w| (w.seq, w.idx));
                w
            };
            let mut ran: Vec<String> = c
                .parent_id
                .as_deref()
                .map(writes_of)
                .unwrap_or_default()
                .into_iter()
                .filter(|w| w.channel != INTERRUPT && !w.channel.starts_with("__"))
                .map(|w| w.node)
                .collect();
            ran.dedup();
            let writes = writes_of(id);
            let interrupts = writes
                .iter()
                .filter(|w| w.channel == INTERRUPT)
                .map(|w| w.value.clone())
                .collect();
            GraphStep {
                ns: ns.clone(),
                checkpoint_id: id.clone(),
                seq: *seq,
                parent_id: c.parent_id.clone(),
                step: metadata["step"].as_i64(),
                source: metadata["source"].as_str().map(str::to_string),
                ran,
                values,
                writes,
                interrupts,
                metadata,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_agents_sdks_items_read_as_a_conversation() {
        let items = [
            json!({"role": "user", "content": "weather?"}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]}),
            json!({"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "c1", "output": "21 C"}),
            json!({"role": "developer", "content": "Be brief."}),
            json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]}),
            json!({"type": "web_search_call", "id": "ws"}),
        ];
        let read: Vec<ConvItem> = items.iter().map(conv_item).collect();
        assert_eq!(read[0], ConvItem::User("weather?".into()));
        assert_eq!(read[1], ConvItem::Assistant("Sunny.".into()));
        assert!(matches!(&read[2], ConvItem::Call { name, .. } if name == "get_weather"));
        assert!(matches!(&read[3], ConvItem::Output { output, .. } if output == "21 C"));
        assert_eq!(read[4], ConvItem::System("Be brief.".into()));
        assert_eq!(read[5], ConvItem::Reasoning("think".into()));
        assert_eq!(read[6], ConvItem::Other(items[6].clone()));
    }

    #[test]
    fn a_tasks_node_is_read_from_its_path() {
        assert_eq!(node_of("~__pregel_pull, agent", "x"), "agent");
        assert_eq!(node_of("~__pregel_push, 2, False", "x"), "send 2");
        assert_eq!(node_of("", "0123456789"), "task 01234567");
    }
}
