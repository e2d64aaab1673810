//! A stored session as OTLP JSON (`ExportTraceServiceRequest` in the protobuf JSON mapping:
//! ids in hex, times and 64-bit integers as strings), the spans of [`crate::spans`].

use lazarus_session::{SessionId, Store};
use serde_json::{Value, json};

use crate::spans::{Attr, Kind, Span, Spans, hex};

/// Records are read in pages of this many.
const PAGE: usize = 1000;

/// The spans of session `id`, in the order they end.
pub fn spans(
    store: &dyn Store,
    id: &SessionId,
) -> Result<Vec<Span>, lazarus_session::SessionError> {
    let st = store.load(id)?;
    let model = st
        .header
        .meta
        .as_ref()
        .and_then(|m| m.get("model"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut b = Spans::new(id.as_str(), model);
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page = store.records(id, after, PAGE)?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for r in page {
            out.extend(b.record(r.seq, &r.ts, &r.kind, &r.data));
        }
    }
    Ok(out)
}

/// Session `id` as one OTLP JSON request.
pub fn otlp_json(
    store: &dyn Store,
    id: &SessionId,
) -> Result<Value, lazarus_session::SessionError> {
    Ok(request(&spans(store, id)?))
}

fn attr(key: &str, v: &Attr) -> Value {
    let value = match v {
        Attr::Str(s) => json!({"stringValue": s}),
        Attr::Int(i) => json!({"intValue": i.to_string()}),
        Attr::StrList(l) => {
            json!({"arrayValue": {"values": l.iter().map(|s| json!({"stringValue": s})).collect::<Vec<_>>()}})
        }
    };
    json!({"key": key, "value": value})
}

/// Spans as an OTLP JSON `ExportTraceServiceRequest`.
pub fn request(spans: &[Span]) -> Value {
    let spans: Vec<Value> = spans
        .iter()
        .map(|s| {
            let mut v = json!({
                "traceId": hex(&s.trace_id),
                "spanId": hex(&s.span_id),
                "name": s.name,
                "kind": match s.kind { Kind::Internal => 1, Kind::Client => 3 },
                "startTimeUnixNano": s.start_ns.to_string(),
                "endTimeUnixNano": s.end_ns.to_string(),
                "attributes": s.attributes.iter().map(|(k, v)| attr(k, v)).collect::<Vec<_>>(),
                "status": {"code": 1},
            });
            if let Some(m) = &s.error {
                v["status"] = json!({"code": 2, "message": m});
            }
            v
        })
        .collect();
    json!({"resourceSpans": [{
        "resource": {"attributes": [attr("service.name", &Attr::Str("lazarus".into()))]},
        "scopeSpans": [{
            "scope": {"name": "lazarus", "version": env!("CARGO_PKG_VERSION")},
            "spans": spans,
        }],
    }]})
}
