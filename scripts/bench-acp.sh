#!/usr/bin/env bash
# What ACP costs (crates/acp/benches/acp.rs), on the release binary:
#   proxy: the latency `lazarus acp --wrap` adds per message against the same echo agent
#          reached directly (target: p99 added <= 1 ms per message);
#   load:  session/load of a 10,000-message session by `lazarus acp` (targets: the first
#          update <= 100 ms, the whole replay <= 1 s).
# Usage: scripts/bench-acp.sh [--quick] [proxy|load]   Prints RESULT lines.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p lazarus-cli
target=${CARGO_TARGET_DIR:-$PWD/target}
LAZARUS="$target/release/lazarus" cargo bench -q -p lazarus-acp --bench acp -- "$@"
