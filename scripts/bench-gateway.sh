#!/usr/bin/env bash
# Gateway benchmark: durable message accepts/s and p99 latency with 64 concurrent clients over
# 64 sessions (beside the bare write+fdatasync rate of the same disk), then recovery of 1,000
# interrupted sessions (time from process start to ready = all of them re-queued).
#
#   scripts/bench-gateway.sh [--quick] [DIR]
#                                       DIR: where the sessions go (default: a temp dir; put it
#                                       on the disk you want to measure)
# --quick: SECONDS_PER_RUN=2, RECOVER_SESSIONS=200. Each part ends with RESULT lines.
# Env: SECONDS_PER_RUN (5), CLIENTS (64), SESSIONS (64), RECOVER_SESSIONS (1000).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --quick ]; then
    shift
    export SECONDS_PER_RUN="${SECONDS_PER_RUN:-2}" RECOVER_SESSIONS="${RECOVER_SESSIONS:-200}"
fi
DIR="${1:-$(mktemp -d /var/tmp/lazarus-bench-gateway.XXXXXX)}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p lazarus-cli --bin lazarus
cargo build --release -q -p lazarus-gateway --example load -p lazarus-testkit --bin scripted-model-server
BIN="$CARGO_TARGET_DIR/release/lazarus"
LOAD="$CARGO_TARGET_DIR/release/examples/load"
echo "== cores: $(nproc); disk: $(df -h "$(dirname "$DIR")" | awk 'NR==2{print $1" "$2}')"
echo "== accept path (gateway --no-run: inputs recorded durably, sessions not driven)"
"$LOAD" accept --bin "$BIN" --dir "$DIR/accept" --clients "${CLIENTS:-64}" --sessions "${SESSIONS:-64}" --seconds "${SECONDS_PER_RUN:-5}"
echo
echo "== accept + run (an instant scripted model; every message also runs its session to idle)"
"$LOAD" accept --run --bin "$BIN" --dir "$DIR/accept-run" --clients "${CLIENTS:-64}" --sessions "${SESSIONS:-64}" --seconds "${SECONDS_PER_RUN:-5}"
echo
echo "== recovery"
"$LOAD" recover --bin "$BIN" --dir "$DIR/recover" --sessions "${RECOVER_SESSIONS:-1000}"
rm -rf "$DIR"
