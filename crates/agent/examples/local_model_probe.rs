//! Probes a real OpenAI-compatible server (e.g. the local Gemma 3 270M from
//! `scripts/local-model/serve.sh PORT`) with one tool and a one-shot example exchange, in
//! streaming and non-streaming mode, and prints what came back.
//!
//! Usage: cargo run -p lazarus-agent --example local_model_probe -- http://127.0.0.1:PORT/v1

use lazarus_agent::model::{Message, ModelRequest, ToolCall};
use lazarus_agent::provider::{
    CancellationToken, OpenAiClient, ProviderConfig, StreamEvent, dedup_consecutive_tool_calls,
    drop_truncated_tool_calls,
};
use lazarus_agent::tools::{ListDirTool, Tool};

/// The request the probe sends: one tool, one example exchange, then the real question.
pub fn probe_request(stream: bool) -> ModelRequest {
    ModelRequest {
        model: "gemma-3-270m".into(),
        messages: vec![
            Message::user("What is in the folder src?"),
            Message::Assistant {
                provider_items: vec![],
                text: None,
                tool_calls: vec![ToolCall {
                    call_id: "example_1".into(),
                    name: "list_dir".into(),
                    arguments: "{\"path\": \"src\"}".into(),
                }],
            },
            Message::tool_result("example_1", "main.rs\nlib.rs"),
            Message::Assistant {
                provider_items: vec![],
                text: Some("The folder src contains main.rs and lib.rs.".into()),
                tool_calls: vec![],
            },
            Message::user("What is in the folder docs?"),
        ],
        tools: vec![ListDirTool.spec().clone()],
        max_tokens: Some(48),
        temperature: Some(0.0),
        stream,
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let base_url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("OPENAI_BASE_URL").ok())
        .ok_or_else(|| {
            anyhow::anyhow!("usage: local_model_probe BASE_URL (e.g. http://127.0.0.1:8080/v1)")
        })?;
    let client = OpenAiClient::new(ProviderConfig::new(base_url))?;
    for stream in [true, false] {
        let mut streamed = String::new();
        let mut starts = 0;
        let t = std::time::Instant::now();
        let done = client
            .complete(
                &probe_request(stream),
                &CancellationToken::new(),
                &mut |e| match e {
                    StreamEvent::Text(s) => streamed.push_str(s),
                    StreamEvent::ToolCallStart { .. } => starts += 1,
                    _ => {}
                },
            )
            .await?;
        let mut r = done.response;
        println!(
            "stream={stream} took={} ms attempts={} finish_reason={:?} usage={:?}",
            t.elapsed().as_millis(),
            done.attempts.len(),
            r.stop_reason,
            r.usage
                .as_ref()
                .map(|u| (u.prompt_tokens, u.completion_tokens))
        );
        println!("  streamed text: {streamed:?}; tool-call start events: {starts}");
        for c in r.tool_calls() {
            println!("  raw call: {} {} {}", c.call_id, c.name, c.arguments);
        }
        let truncated = drop_truncated_tool_calls(&mut r);
        let dups = dedup_consecutive_tool_calls(&mut r.items);
        println!(
            "  after tidy: {} call(s) ({} truncated dropped, {} duplicates removed); text recognised from content: {}",
            r.tool_calls().count(),
            truncated.len(),
            dups,
            done.text_tool_calls
        );
        for a in done.attempts.iter().filter(|a| a.error.is_some()) {
            println!("  failed attempt {}: {:?}", a.number, a.error);
        }
        println!(
            "  provider_extra keys: {:?}",
            r.provider_extra.keys().collect::<Vec<_>>()
        );
    }
    Ok(())
}
