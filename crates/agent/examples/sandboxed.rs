//! Runs one command through the `shell` tool under the default sandbox and prints what the
//! model would see: `cargo run -p lazarus-agent --example sandboxed -- 'COMMAND'`.

use lazarus_agent::tools::{NoHooks, ToolContext, Toolbox};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let command = std::env::args().nth(1).unwrap_or_else(|| "id".into());
    let ws = std::env::current_dir().expect("a current directory");
    let ctx = ToolContext::new(ws);
    eprintln!("{}", ctx.sandbox.describe());
    let mut hooks = NoHooks::default();
    let out = Toolbox::standard()
        .run(
            &ctx,
            "shell",
            &serde_json::json!({ "command": command }).to_string(),
            &mut hooks,
        )
        .await;
    println!("{}", out.text);
}
