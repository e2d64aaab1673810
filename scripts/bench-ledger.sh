#!/usr/bin/env bash
# Ledger benchmarks, side by side, as ratios (issue 2's targets):
#   append: durable append vs bare write+fdatasync loop (target >= 0.9), grouped 8/64 appenders
#           vs a plain group-commit loop with the same threads (target >= 0.9)
#   replay: LocalStore::load vs plain serde_json typed parsing of the same file (target >= 0.7;
#           issue 14's >= 1.0), on a plain ledger and on one with compactions
#   memory: peak RSS (VmHWM) of replaying a big ledger vs its size, the same ledger with a
#           compaction every tenth message (the state keeps only what is still sent), and
#           the streaming reader
#
# --quick: LAZARUS_BENCH_MB=20, LAZARUS_BENCH_PEAK_MB=64, LAZARUS_BENCH_APPENDS=500,
#          LAZARUS_BENCH_ROUNDS=3 (under 3 minutes on 2 cores once built; the figures are
#          noisier). The append part ends with RESULT lines (name, value, target).
#
# Env: LAZARUS_BENCH_MB (replay file, default 200), LAZARUS_BENCH_PEAK_MB (default 1024),
#      LAZARUS_BENCH_APPENDS (per round, default 2000), LAZARUS_BENCH_ROUNDS (default 5),
#      LAZARUS_BENCH_DIR (default <target>/bench-data; must be a real disk, not tmpfs),
#      CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --quick ]; then
    export LAZARUS_BENCH_MB="${LAZARUS_BENCH_MB:-20}" LAZARUS_BENCH_PEAK_MB="${LAZARUS_BENCH_PEAK_MB:-64}"
    export LAZARUS_BENCH_APPENDS="${LAZARUS_BENCH_APPENDS:-500}" LAZARUS_BENCH_ROUNDS="${LAZARUS_BENCH_ROUNDS:-3}"
fi
target="${CARGO_TARGET_DIR:-$PWD/target}"
export CARGO_TARGET_DIR="$target"
bench_dir="${LAZARUS_BENCH_DIR:-$target/bench-data}"
mkdir -p "$bench_dir"
peak_mb="${LAZARUS_BENCH_PEAK_MB:-1024}"

cargo build --release -q -p lazarus-ledger --example bench_compare
cargo build --release -q -p lazarus-session --example replay_compare
bin="$target/release/examples"

echo "== machine"
echo "cpus: $(nproc); kernel: $(uname -r); $(git rev-parse --short HEAD 2>/dev/null || true)"
echo "bench dir: $bench_dir"
df -hT "$bench_dir" | tail -1 | awk '{print "disk: " $1 " (" $2 "), " $3 " total, " $5 " free"}'
fstype=$(stat -f -c %T "$bench_dir")
echo "stat -f type: $fstype"
if [ "$fstype" = tmpfs ]; then
    echo "WARNING: $bench_dir is tmpfs: fdatasync is free there; append numbers mean nothing" >&2
fi
echo

echo "== append (one process)"
"$bin/bench_compare"
echo

echo "== replay (one process, same file)"
"$bin/replay_compare"
echo
echo "== replay of a ledger with a compaction every tenth message (one process, same file)"
"$bin/replay_compare" compacted
echo

echo "== peak memory replaying a ${peak_mb} MB ledger (fresh process each)"
for mode in load compacted stream; do
    "$bin/replay_compare" peak "$peak_mb" "$mode"
done
