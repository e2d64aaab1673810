//! The ACP clients tests drive `lazarus acp` with, installed by `scripts/acp/setup.sh` into a
//! cache: `acpx` (a headless ACP client) and the official TypeScript SDK, run on the Node the
//! MCP servers' setup installs. A missing cache fails the test, naming the script.

use std::path::PathBuf;

/// The cache directory: `$LAZARUS_ACP_CACHE`, else `${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-acp`.
pub fn cache() -> PathBuf {
    if let Some(d) = std::env::var_os("LAZARUS_ACP_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| ".".into())).join(".cache")
        });
    base.join("lazarus-acp")
}

/// The `acpx` command.
pub fn acpx() -> PathBuf {
    let p = cache().join("node_modules/.bin/acpx");
    assert!(
        p.exists(),
        "{} is missing: run scripts/acp/setup.sh first (it installs the ACP clients these tests drive)",
        p.display()
    );
    p
}

/// The directory of the Node these clients run on (`PATH` must name it first).
pub fn node_dir() -> PathBuf {
    let node = crate::mcp_servers::node();
    node.parent().map(PathBuf::from).unwrap_or(node)
}
