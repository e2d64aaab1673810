//! Crash points for tests, as etcd's gofail: `LAZARUS_FAILPOINTS=name[,name…]` makes the
//! process kill itself with SIGKILL (exactly what `kill -9` does) when it reaches a named
//! point, so a crash test can cut a call at a moment no timing could hit reliably (after a
//! record is durable and before the next byte is written anywhere). The variable is read
//! once; unset, a point costs one load.
//!
//! Points: `mcp/before-request` (an MCP call's start is recorded, its `tools/call` not yet
//! written), `mcp/after-answer` (the server's answer arrived, its outcome not yet recorded).

use std::sync::OnceLock;

/// The environment variable naming the points armed in this process.
pub const FAILPOINTS_ENV: &str = "LAZARUS_FAILPOINTS";

fn armed() -> &'static [String] {
    static ARMED: OnceLock<Vec<String>> = OnceLock::new();
    ARMED.get_or_init(|| {
        std::env::var(FAILPOINTS_ENV)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    })
}

/// Kills this process (SIGKILL) when `name` is armed.
pub fn hit(name: &str) {
    if armed().iter().any(|a| a == name) {
        eprintln!("failpoint {name}: killing this process (SIGKILL)");
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
        // SIGKILL cannot be caught; should it somehow not land, stop all the same
        std::process::abort();
    }
}
