//! Records in, spans out: the one mapping from a session's records to OpenTelemetry spans
//! (GenAI semantic conventions), fed record by record. The export (`export`) feeds it a
//! stored session, the live exporter (`live`) the records a run writes as it writes them:
//! both give the same spans, ids included (derived from the session id and the seqs).
//!
//! One trace per session. A `chat {model}` span (kind CLIENT) per model request, from its
//! `turn_start` to its `response`; an `execute_tool {name}` span (kind INTERNAL) per tool call,
//! from its `tool_intent` to its `tool_outcome`.

use std::collections::HashMap;

use lazarus_session::record::{Record, Response};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Str(String),
    Int(i64),
    StrList(Vec<String>),
}

/// The kind of a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Internal,
    Client,
}

/// A finished span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub name: String,
    pub kind: Kind,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: Vec<(&'static str, Attr)>,
    /// `Some(message)`: the operation failed.
    pub error: Option<String>,
}

/// The trace id of a session: the first 16 bytes of SHA-256 over its id.
pub fn trace_id(session_id: &str) -> [u8; 16] {
    let d = Sha256::digest(session_id.as_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// The span id of the operation that began at `seq`.
fn span_id(session_id: &str, seq: u64) -> [u8; 8] {
    let mut h = Sha256::new();
    h.update(session_id.as_bytes());
    h.update(seq.to_be_bytes());
    let d = h.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&d[..8]);
    out
}

/// The W3C `traceparent` (version 00, sampled) of the `execute_tool` span of the call whose
/// `tool_intent` was recorded at `intent_seq`: what a call passes on (MCP's `_meta`, SEP-414)
/// so the server's spans join the session's trace under that call.
pub fn traceparent(session_id: &str, intent_seq: u64) -> String {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!(
        "00-{}-{}-01",
        hex(&trace_id(session_id)),
        hex(&span_id(session_id, intent_seq))
    )
}

/// Nanoseconds since the epoch of a record time (0 when it does not parse).
pub fn nanos(ts: &str) -> u64 {
    ts.parse::<jiff::Timestamp>()
        .map(|t| t.as_nanosecond().max(0) as u64)
        .unwrap_or(0)
}

struct OpenCall {
    seq: u64,
    start: u64,
    name: String,
}

/// The spans of one session, built record by record.
pub struct Spans {
    session_id: String,
    trace: [u8; 16],
    /// The model the session asks for (its header's, or the runner's).
    model: Option<String>,
    turns: HashMap<u64, (u64, u64)>,
    calls: HashMap<String, OpenCall>,
}

impl Spans {
    pub fn new(session_id: &str, model: Option<String>) -> Self {
        Spans {
            session_id: session_id.to_string(),
            trace: trace_id(session_id),
            model,
            turns: HashMap::new(),
            calls: HashMap::new(),
        }
    }

    fn common(&self, op: &'static str) -> Vec<(&'static str, Attr)> {
        vec![
            ("gen_ai.operation.name", Attr::Str(op.into())),
            ("gen_ai.conversation.id", Attr::Str(self.session_id.clone())),
        ]
    }

    /// Takes the next record; returns the spans it ends.
    pub fn record(&mut self, seq: u64, ts: &str, kind: &str, data: &Value) -> Vec<Span> {
        use lazarus_ledger::Payload;
        let Ok(rec) = Record::deserialize_kind(kind, data.clone()) else {
            return Vec::new();
        };
        let now = nanos(ts);
        match rec {
            Record::TurnStart(t) => {
                self.turns.insert(t.turn, (seq, now));
                Vec::new()
            }
            Record::Response(r) => self.chat(r, now).into_iter().collect(),
            Record::ToolIntent(i) => {
                self.calls.insert(
                    i.call_id,
                    OpenCall {
                        seq,
                        start: now,
                        name: i.tool,
                    },
                );
                Vec::new()
            }
            Record::ToolOutcome(o) => {
                let Some(c) = self.calls.remove(&o.call_id) else {
                    return Vec::new();
                };
                let mut attributes = self.common("execute_tool");
                attributes.push(("gen_ai.tool.name", Attr::Str(c.name.clone())));
                attributes.push(("gen_ai.tool.call.id", Attr::Str(o.call_id.clone())));
                attributes.push(("gen_ai.tool.type", Attr::Str("function".into())));
                let status = serde_json::to_value(o.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                attributes.push(("lazarus.tool.status", Attr::Str(status.clone())));
                let error = (status != "ok").then(|| {
                    attributes.push(("error.type", Attr::Str(status.clone())));
                    format!("tool call ended {status}")
                });
                vec![Span {
                    trace_id: self.trace,
                    span_id: span_id(&self.session_id, c.seq),
                    name: format!("execute_tool {}", c.name),
                    kind: Kind::Internal,
                    start_ns: c.start,
                    end_ns: now.max(c.start),
                    attributes,
                    error,
                }]
            }
            _ => Vec::new(),
        }
    }

    fn chat(&mut self, r: Response, now: u64) -> Option<Span> {
        let (seq, start) = self.turns.remove(&r.turn)?;
        let model = r.model.clone().or_else(|| self.model.clone());
        let mut attributes = self.common("chat");
        if let Some(m) = &model {
            attributes.push(("gen_ai.request.model", Attr::Str(m.clone())));
        }
        if let Some(m) = &r.model {
            attributes.push(("gen_ai.response.model", Attr::Str(m.clone())));
        }
        if let Some(u) = &r.usage {
            if let Some(n) = u.prompt_tokens {
                attributes.push(("gen_ai.usage.input_tokens", Attr::Int(n as i64)));
            }
            if let Some(n) = u.completion_tokens {
                attributes.push(("gen_ai.usage.output_tokens", Attr::Int(n as i64)));
            }
        }
        if let Some(s) = &r.stop_reason {
            attributes.push((
                "gen_ai.response.finish_reasons",
                Attr::StrList(vec![s.clone()]),
            ));
        }
        attributes.push(("lazarus.turn", Attr::Int(r.turn as i64)));
        let error = r.failure.as_ref().map(|f| {
            attributes.push((
                "error.type",
                Attr::Str(f.status.map_or("request_failed".into(), |s| s.to_string())),
            ));
            f.message.clone()
        });
        Some(Span {
            trace_id: self.trace,
            span_id: span_id(&self.session_id, seq),
            name: match &model {
                Some(m) => format!("chat {m}"),
                None => "chat".into(),
            },
            kind: Kind::Client,
            start_ns: start,
            end_ns: now.max(start),
            attributes,
            error,
        })
    }
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
