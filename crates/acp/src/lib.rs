//! # lazarus-acp
//!
//! Lazarus over the Agent Client Protocol (ACP v1, on the official `agent-client-protocol`
//! crate): editors (Zed, JetBrains, Neovim, Emacs) and headless clients (`acpx`) drive
//! durable Lazarus sessions.
//!
//! * [`agent`]: `lazarus acp`, an ACP agent serving Lazarus's runner — every ACP session a
//!   Lazarus session whose world is the client's `cwd` and `mcpServers`; prompts streamed as
//!   `session/update`s; permission requests as durable approvals; `session/load` replaying
//!   the ledger, a call cut off by a crash shown failed and in doubt.
//! * [`updates`]: the one mapping from records to `session/update`s (live and replayed).
//! * [`convert`]: prompts and MCP servers as the client sends them, in Lazarus's terms.
//! * [`host`]: what the program serving ACP provides (the store, a runner per session).
//! * [`proxy`]: `lazarus acp --wrap -- AGENT`, a durable proxy in front of any ACP agent:
//!   every message journaled, the agent started again when it dies, its sessions taken back,
//!   the calls it was running named in doubt to it and to the editor.
//!
//! See docs/acp.md.

pub mod agent;
pub mod convert;
pub mod host;
pub mod proxy;
pub mod stdio;
pub mod updates;

pub use agent::serve;
pub use host::{Host, Prepared};
