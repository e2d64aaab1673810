#!/usr/bin/env bash
# The whole test suite: unit, property, crash and integration tests of every crate, the
# PostgreSQL store against a throwaway server, and the end-to-end run against a real small
# model served locally, and boot-resume against the real agents installed from npm
# (scripts/e2e-real-agents.sh), and MCP tools against real servers (scripts/mcp-servers/setup.sh
# installs them, cached), and the Python package, from its wheel, against the real OpenAI Agents
# SDK and LangGraph (scripts/python-tests.sh; the wheel is $LAZARUS_WHEEL or built, cached). Needs PostgreSQL 15 binaries, Python 3 with pip, npm and tmux
# (.ci/run installs what is missing). Heavy variants: LAZARUS_CRASH_CYCLES, LAZARUS_POWER_TRIALS,
# LAZARUS_RUN_CRASH_ROUNDS (see docs/testing.md).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

# This script always provides PostgreSQL: its tests must run, never skip.
export LAZARUS_REQUIRE_PG=1
started_pg=""
if [ -z "${LAZARUS_TEST_PG:-}" ] && [ -x scripts/pg-test-server.sh ]; then
  eval "$(scripts/pg-test-server.sh start)"
  started_pg=1
fi
stop_pg() { if [ -n "$started_pg" ]; then scripts/pg-test-server.sh stop >/dev/null 2>&1 || true; fi; }
trap stop_pg EXIT

echo "== the house stays small: no source file over 700 lines, no import circle"
python3 scripts/check-layout.py

echo "== local model (for the end-to-end tests)"
bash scripts/local-model/setup.sh

echo "== the OTLP receiver (for the live-telemetry test: opentelemetry-proto from PyPI)"
bash scripts/otel-receiver/setup.sh >/dev/null

echo "== the MCP servers the tests run against (npm's reference servers, the Python SDK)"
bash scripts/mcp-servers/setup.sh >/dev/null

echo "== the ACP clients the tests drive lazarus acp with (acpx, the TypeScript SDK; npm)"
bash scripts/acp/setup.sh >/dev/null

echo "== end-to-end: a real model, kill -9 mid-tool, resume"
bash scripts/demo.sh </dev/null   # not a terminal: it ends after printing the page's URL

echo "== the real-model tests (the client; an imported Claude Code session continued)"
# --workspace, so this build is the one the suite below reuses (a -p build resolves features
# differently and compiles the dependencies twice).
cargo nextest run --workspace --run-ignored only \
  -E '(package(lazarus-agent) & binary(local_model)) | (package(lazarus-cli) & binary(import_continue))'

echo "== the workspace test suite"
cargo nextest run --workspace

echo "== the Python package from its wheel: the Agents SDK session and the LangGraph saver"
bash scripts/python-tests.sh

echo "== the documentation examples (nextest does not run doctests)"
cargo test --workspace --doc

echo "== boot-resume against the real OpenClaw, Claude Code, Codex, pi, Gemini CLI and OpenCode"
bash scripts/e2e-real-agents.sh
