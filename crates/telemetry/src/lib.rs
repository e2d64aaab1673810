//! Lazarus sessions as OpenTelemetry spans, following the GenAI semantic conventions
//! (`gen_ai.conversation.id`, `gen_ai.operation.name` `chat` / `execute_tool`,
//! `gen_ai.tool.call.id`, token usage): one mapping from records to spans (`spans`), written
//! as OTLP JSON for a stored session (`export`), or sent while a run works (`live`) when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set. See docs/telemetry.md.

pub mod export;
pub mod live;
pub mod spans;
