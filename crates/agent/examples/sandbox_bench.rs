//! What the shell sandbox costs per call: `true` run through the `shell` tool N times
//! unconfined (`--sandbox off`) and under the default sandbox (`workspace-write`), in
//! alternating rounds so that a busy machine weighs on both alike. Prints the medians and
//! `RESULT sandboxed_shell_vs_unconfined <ratio> <=2.0`. Run by `scripts/bench-sandbox.sh`.
//!
//! `cargo run --release -p lazarus-agent --example sandbox_bench -- [CALLS_PER_ROUND] [ROUNDS]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use lazarus_agent::sandbox::{Sandbox, SandboxPolicy};
use lazarus_agent::tools::{NoHooks, ToolContext, ToolStatus, Toolbox};

async fn per_call(ctx: &ToolContext, calls: u32) -> Duration {
    let args = serde_json::json!({ "command": "true" }).to_string();
    let tools = Toolbox::standard();
    let t0 = Instant::now();
    for _ in 0..calls {
        let mut hooks = NoHooks::default();
        let out = tools.run(ctx, "shell", &args, &mut hooks).await;
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.text);
    }
    t0.elapsed() / calls
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut a = std::env::args().skip(1);
    let calls: u32 = a.next().and_then(|s| s.parse().ok()).unwrap_or(50);
    let rounds: usize = a.next().and_then(|s| s.parse().ok()).unwrap_or(7);
    let ws = tempfile::tempdir().expect("a temporary workspace");
    let sandboxed = Sandbox::probe(SandboxPolicy::default());
    assert!(sandboxed.usable(), "{}", sandboxed.describe());
    eprintln!("{}", sandboxed.describe());
    let mut off_ctx = ToolContext::new(ws.path());
    off_ctx.sandbox = Arc::new(Sandbox::off());
    let mut on_ctx = ToolContext::new(ws.path());
    on_ctx.sandbox = Arc::new(sandboxed);
    // warm-up: page cache, first-call sweeps
    per_call(&off_ctx, 5).await;
    per_call(&on_ctx, 5).await;
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        off.push(per_call(&off_ctx, calls).await);
        on.push(per_call(&on_ctx, calls).await);
    }
    let (off, on) = (median(off), median(on));
    let ratio = on.as_secs_f64() / off.as_secs_f64();
    println!(
        "shell `true`: unconfined {:.2} ms, sandboxed {:.2} ms per call (median of {rounds} rounds of {calls})",
        off.as_secs_f64() * 1e3,
        on.as_secs_f64() * 1e3
    );
    println!("RESULT sandboxed_shell_vs_unconfined {ratio:.2} <=2.0");
}
