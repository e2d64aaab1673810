//! Live export: the spans of [`crate::spans`], sent over OTLP/HTTP (protobuf) through the
//! `opentelemetry` SDK while `lazarus run` or `lazarus serve` works. On only when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set: otherwise
//! [`Live::from_env`] returns `None` and nothing is built, so there is no cost. Spans leave in
//! batches from the SDK's own thread; [`Live::shutdown`] sends what is left.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    SpanBuilder, SpanId, SpanKind, Status, TraceContextExt as _, TraceId, Tracer as _,
    TracerProvider as _,
};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value as OtValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use serde_json::Value;

use crate::spans::{Attr, Kind, Span, Spans};

/// Why live telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0:?}: lazarus sends OTLP over HTTP with protobuf; set it to http/protobuf (or unset it)"
    )]
    Protocol(String),
    #[error(
        "OTLP exporter for {endpoint}: {message}; check OTEL_EXPORTER_OTLP_ENDPOINT (an http:// URL of an OTLP/HTTP receiver, e.g. http://127.0.0.1:4318)"
    )]
    Exporter { endpoint: String, message: String },
}

/// Ids for the SDK: the ones [`Live::send`] pins for the span it builds, random otherwise.
#[derive(Debug, Default, Clone)]
struct PinnedIds {
    next: std::sync::Arc<Mutex<Option<(TraceId, SpanId)>>>,
}

impl PinnedIds {
    /// Sets the ids the next build takes (the generator locks only this slot, briefly).
    fn pin(&self, ids: Option<(TraceId, SpanId)>) {
        *self.next.lock().unwrap_or_else(|p| p.into_inner()) = ids;
    }
}

impl opentelemetry_sdk::trace::IdGenerator for PinnedIds {
    fn new_trace_id(&self) -> TraceId {
        match *self.next.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((t, _)) => t,
            None => opentelemetry_sdk::trace::RandomIdGenerator::default().new_trace_id(),
        }
    }

    fn new_span_id(&self) -> SpanId {
        match *self.next.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((_, s)) => s,
            None => opentelemetry_sdk::trace::RandomIdGenerator::default().new_span_id(),
        }
    }
}

/// The live exporter of one process (any number of sessions).
pub struct Live {
    ids: PinnedIds,
    /// Held while a span is built with pinned ids.
    building: Mutex<()>,
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    model: Option<String>,
    sessions: Mutex<HashMap<String, Spans>>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The OTLP endpoint the environment names, unless telemetry is turned off
/// (`OTEL_SDK_DISABLED=true`): `Some` exactly when [`Live::from_env`] builds an exporter.
fn endpoint() -> Option<String> {
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return None;
    }
    env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
}

/// Whether the environment turns live telemetry on (then calls carry their span's
/// `traceparent`: [`crate::spans::traceparent`]).
pub fn enabled() -> bool {
    endpoint().is_some()
}

impl Live {
    /// The exporter the environment asks for, or `None` when telemetry is off (no endpoint
    /// set, or `OTEL_SDK_DISABLED=true`). `model` is the model requests ask for.
    pub fn from_env(model: Option<String>) -> Result<Option<Live>, LiveError> {
        let Some(endpoint) = endpoint() else {
            return Ok(None);
        };
        if let Some(p) =
            env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
            && p != "http/protobuf"
        {
            return Err(LiveError::Protocol(p));
        }
        use opentelemetry_otlp::WithExportConfig as _;
        // the SDK reads the endpoint (and headers, timeout) from the same variables
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .build()
            .map_err(|e| LiveError::Exporter {
                endpoint: endpoint.clone(),
                message: e.to_string(),
            })?;
        let ids = PinnedIds::default();
        let provider = SdkTracerProvider::builder()
            .with_id_generator(ids.clone())
            .with_batch_exporter(exporter)
            .with_resource(Resource::builder().with_service_name("lazarus").build())
            .build();
        let tracer = provider.tracer("lazarus");
        Ok(Some(Live {
            ids,
            building: Mutex::new(()),
            provider,
            tracer,
            model,
            sessions: Mutex::new(HashMap::new()),
        }))
    }

    /// Takes a record session `session_id` just wrote; sends the spans it ends.
    pub fn record(&self, session_id: &str, seq: u64, ts: &str, kind: &str, data: &Value) {
        let spans = {
            let mut map = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(session_id.to_string())
                .or_insert_with(|| Spans::new(session_id, self.model.clone()))
                .record(seq, ts, kind, data)
        };
        for s in spans {
            self.send(s);
        }
    }

    fn send(&self, s: Span) {
        let at = |ns: u64| SystemTime::UNIX_EPOCH + Duration::from_nanos(ns);
        let attributes: Vec<KeyValue> = s
            .attributes
            .into_iter()
            .map(|(k, v)| match v {
                Attr::Str(x) => KeyValue::new(k, x),
                Attr::Int(i) => KeyValue::new(k, i),
                Attr::StrList(l) => KeyValue::new(
                    k,
                    OtValue::Array(Array::String(
                        l.into_iter().map(StringValue::from).collect(),
                    )),
                ),
            })
            .collect();
        let b = SpanBuilder::from_name(s.name)
            .with_kind(match s.kind {
                Kind::Client => SpanKind::Client,
                Kind::Internal => SpanKind::Internal,
            })
            .with_start_time(at(s.start_ns))
            .with_attributes(attributes);
        // the SDK takes its ids from its id generator: hand it this span's (the same ids
        // an export gives), under the lock that keeps them for this one build
        let span = {
            let _one_at_a_time = self.building.lock().unwrap_or_else(|p| p.into_inner());
            self.ids.pin(Some((
                TraceId::from_bytes(s.trace_id),
                SpanId::from_bytes(s.span_id),
            )));
            let span = self.tracer.build_with_context(b, &Context::new());
            self.ids.pin(None);
            span
        };
        let cx = Context::new().with_span(span);
        let span = cx.span();
        span.set_status(match s.error {
            Some(m) => Status::error(m),
            None => Status::Ok,
        });
        span.end_with_timestamp(at(s.end_ns));
    }

    /// Sends what is left and stops the exporter's thread.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing_warn(&format!(
                "OpenTelemetry: sending the last spans failed: {e}"
            ));
        }
    }
}

fn tracing_warn(msg: &str) {
    eprintln!("warning: {msg}");
}
