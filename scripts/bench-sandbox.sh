#!/usr/bin/env bash
# What the shell sandbox costs: `true` through the shell tool, unconfined vs the default
# sandbox (workspace-write), in alternating rounds; prints both medians and
#   RESULT sandboxed_shell_vs_unconfined <ratio> <=2.0
# Env: LAZARUS_BENCH_CALLS (per round, default 50), LAZARUS_BENCH_ROUNDS (default 7),
#      CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
export CARGO_TARGET_DIR="$target"
cargo build --release -q -p lazarus-agent --example sandbox_bench
echo "cpus: $(nproc); kernel: $(uname -r); user: $(id -un); $(git rev-parse --short HEAD 2>/dev/null || true)"
"$target/release/examples/sandbox_bench" "${LAZARUS_BENCH_CALLS:-50}" "${LAZARUS_BENCH_ROUNDS:-7}"
