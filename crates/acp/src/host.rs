//! What `lazarus acp` needs of the program that runs it: where sessions live, and a runner
//! for a session in a given workspace with given MCP servers — the world the editor names,
//! under the model, sandbox and approval policy the program was started with. The CLI
//! implements it (its flags and configuration file); tests may too.

use std::any::Any;
use std::path::Path;

use futures_util::future::BoxFuture;
use lazarus_agent::runner::Runner;
use lazarus_session::SharedStore;

/// A runner ready for one session, and what must live as long as it does (its MCP servers).
pub struct Prepared {
    /// With its toolbox (the built-in tools and the servers' tools) and its world
    /// ([`Runner::with_world`]): it runs the session only in that world.
    pub runner: Runner,
    /// Dropped when the session closes: the MCP servers started for it stop (with
    /// everything they started: see `lazarus_mcp::reaper`).
    pub keep: Box<dyn Any + Send + Sync>,
}

/// The program serving ACP.
pub trait Host: Send + Sync + 'static {
    /// Where sessions live.
    fn store(&self) -> SharedStore;

    /// A runner for a session whose tools work in `workspace` (absolute, canonical) with the
    /// client's MCP servers `mcp`, started now. The error says what to fix.
    fn prepare<'a>(
        &'a self,
        workspace: &'a Path,
        mcp: Vec<lazarus_mcp::config::Server>,
    ) -> BoxFuture<'a, Result<Prepared, String>>;
}
