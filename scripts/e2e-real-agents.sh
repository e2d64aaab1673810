#!/usr/bin/env bash
# boot-resume against the real programs, end to end:
#  1. installs Node >= 24 and the pinned OpenClaw, Claude Code, Codex, pi, Gemini CLI and
#     OpenCode from npm into a cache (scripts/capture-real/install.sh; reused when present);
#  2. captures what each program writes when SIGKILLed at known points, into a temporary
#     directory, and checks that `lazarus boot-resume` gives every capture the verdict of its
#     true ending (the same check as crates/boot-resume/tests/real_captures.rs on the
#     committed fixtures). LAZARUS_E2E_CAPTURE=all captures every scenario (slow: OpenClaw
#     takes ~20 s per run here); the default is a quick set;
#  3. resumes an OpenClaw embedded run, a Claude Code session, a pi, a Codex, a Gemini CLI and
#     an OpenCode run, each killed mid-tool, with `lazarus boot-resume` and its preset, three
#     runs each, and checks each was continued to its final answer exactly once (for Gemini
#     CLI and OpenCode also: the tool's side effect counted once, and the resume message
#     saying the running call's effect is unknown) while OpenClaw's self-recovered gateway
#     session was left alone;
#  4. puts `lazarus acp --wrap` in front of `gemini --acp` and `opencode acp`, kills the agent
#     (or the proxy) at each step of a shell call, and checks the editor's view: the history
#     back, the cut-off call failed and in doubt, the next prompt going on, the effect once
#     (scripts/capture-real/acp_wrap.py).
# Every program talks only to scripted model servers on 127.0.0.1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
t0=$SECONDS

echo "== e2e-real-agents: install (cached)"
eval "$(scripts/capture-real/install.sh)"
export NODE_BIN OPENCLAW_BIN CLAUDE_BIN CODEX_BIN PI_BIN GEMINI_BIN OPENCODE_BIN
command -v tmux >/dev/null || { echo "tmux is required (Debian: apt-get install tmux)" >&2; exit 1; }
# the MCP test server the Claude Code and Codex MCP scenarios call (Python SDK, from PyPI)
eval "$(scripts/mcp-servers/setup.sh)"
export LAZARUS_MCP_CACHE

echo "== e2e-real-agents: build"
cargo build -q -p lazarus-cli -p lazarus-testkit --bins
target=${CARGO_TARGET_DIR:-$repo/target}
export LAZARUS="$target/debug/lazarus" SCRIPTED_MODEL_SERVER="$target/debug/scripted-model-server"

echo "== e2e-real-agents: captures and their verdicts"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
quick_claude=(finished killed-in-tool killed-in-mcp-tool killed-waiting-after-tool api-error-context-overflow background-subagent sdk-killed-in-tool resumed-by-print-killed-in-tool)
quick_openclaw=(embedded-killed-in-tool gateway-killed-in-tool)
quick_gemini=(finished killed-in-tool killed-waiting-after-tool api-error-context-overflow)
quick_opencode=(finished killed-in-tool killed-waiting-first-answer killed-waiting-after-tool)
if [ "${LAZARUS_E2E_CAPTURE:-quick}" = all ]; then
  quick_claude=() quick_openclaw=() quick_gemini=() quick_opencode=()
fi
python3 scripts/capture-real/capture.py claude "${quick_claude[@]}" --out "$out"
python3 scripts/capture-real/capture.py openclaw "${quick_openclaw[@]}" --out "$out"
python3 scripts/capture-real/capture.py gemini-cli "${quick_gemini[@]}" --out "$out"
python3 scripts/capture-real/capture.py opencode "${quick_opencode[@]}" --out "$out"
for p in codex pi; do
  if [ -f "scripts/capture-real/$p.py" ]; then
    python3 scripts/capture-real/capture.py "$p" --out "$out"
  fi
done
python3 scripts/capture-real/check.py "$out"

echo "== e2e-real-agents: resume killed sessions with lazarus boot-resume"
python3 scripts/capture-real/e2e.py claude claude-mcp openclaw pi codex gemini opencode claude-thinking

echo "== e2e-real-agents: lazarus acp --wrap in front of Gemini CLI and OpenCode, each killed at every step of a call"
python3 scripts/capture-real/acp_wrap.py

echo "== e2e-real-agents: done in $((SECONDS - t0)) s"
