//! MCP servers as tools of the Lazarus runner.
//!
//! * [`config`]: which servers to start, from `config.toml` tables (Codex's shape) and
//!   `.mcp.json` files (Claude Code's and Cursor's).
//! * [`names`]: the names the model sees, `mcp__<server>__<tool>`.
//! * [`server`]: one running server on the official Rust SDK (`rmcp`): a child process in its
//!   own process group spoken to over stdio (under a [`reaper`]: it and everything it starts
//!   die with the runner), or a Streamable HTTP endpoint; its tools, listed
//!   page by page and again when it says they changed; calls with progress, timeout and
//!   cancellation.
//! * [`task`]: a call the server made a task (MCP 2026-07-28, the Tasks extension), polled
//!   to its end, its handle and status changes recorded; cancelled on a stop.
//! * [`tool`]: each server tool as a [`lazarus_agent::tools::Tool`], with the re-run rule:
//!   an interrupted call runs again only when its server is trusted **and** the annotations
//!   recorded when it started say `readOnlyHint` or `idempotentHint`; otherwise it is closed
//!   in doubt. Every call carries `_meta` `{"lazarus/idempotency-key": "<session>/<call id>"}`.

pub mod config;
pub mod content;
mod lifecycle;
mod listen;
pub mod names;
pub mod reaper;
pub mod server;
pub mod task;
pub mod tool;

/// What can go wrong with an MCP server: each error names the server (or the file) and
/// says what to do.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("{path}: {why}")]
    File { path: String, why: String },
    #[error("MCP server {server:?} in {origin}: {why}")]
    Config {
        origin: String,
        server: String,
        why: String,
    },
    #[error("MCP server {server:?} did not start: {why}")]
    Startup { server: String, why: String },
    #[error("MCP server {server:?}: {why}")]
    Server { server: String, why: String },
}
