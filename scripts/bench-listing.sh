#!/usr/bin/env bash
# `lazarus sessions list` over many local sessions (issue 28's targets: 10^5 sessions in
# <= 0.3 s with a warm page cache, <= 1 s with a cold one):
#   first  the first listing of the directory: every ledger read, the cache written
#   warm   the listing again (best and median of 5): unchanged sessions come from the cache
#   cold   after dropping the page cache (root only; said loudly when it cannot be done)
# Both the table and --json are timed; output goes to /dev/null.
#
# --quick: 10^4 sessions (under a minute once built). Env: SESSIONS (default 100000),
# LAZARUS_BENCH_DIR (default <target>/bench-data; a real disk), CARGO_TARGET_DIR.
# --pg (after --quick, if both): also the same sessions imported into PostgreSQL (schema
# listing_bench_N on $LAZARUS_TEST_PG, e.g. from `eval "$(scripts/pg-test-server.sh start)"`;
# the import, ~2.5 min for 10^5, is done once and kept) and `Store::list` timed there
# (target <= 0.2 s). Ends with RESULT lines: name, value, target.
set -euo pipefail
cd "$(dirname "$0")/.."
sessions="${SESSIONS:-100000}"
if [ "${1:-}" = --quick ]; then
    sessions="${SESSIONS:-10000}"
    shift
fi
pg=""
if [ "${1:-}" = --pg ]; then
    pg=1
    if [ -z "${LAZARUS_TEST_PG:-}" ]; then
        echo 'bench-listing: --pg needs LAZARUS_TEST_PG (eval "$(scripts/pg-test-server.sh start)")' >&2
        exit 2
    fi
fi
target="${CARGO_TARGET_DIR:-$PWD/target}"
export CARGO_TARGET_DIR="$target"
bench_dir="${LAZARUS_BENCH_DIR:-$target/bench-data}"
cargo build --release -q -p lazarus-cli --bin lazarus
cargo build --release -q -p lazarus-session --example make_many
if [ -n "$pg" ]; then
    cargo build --release -q -p lazarus-store-postgres --example pg_listing
fi
lazarus="$target/release/lazarus"

data="$bench_dir/listing-$sessions"
if [ ! -f "$data/.complete" ]; then
    rm -rf "$data"
    mkdir -p "$data"
    echo "generating $sessions sessions in $data/d ..."
    "$target/release/examples/make_many" "$data/d" "$sessions"
    touch "$data/.complete"
fi
dir="$data/d"

# seconds of one listing
once() {
    local t0 t1
    t0=$EPOCHREALTIME
    "$lazarus" sessions list --session-dir "$dir" "$@" > /dev/null
    t1=$EPOCHREALTIME
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f\n", b - a }'
}

echo "== machine"
echo "cpus: $(nproc); kernel: $(uname -r); $(git rev-parse --short HEAD 2>/dev/null || true)"
echo "sessions: $sessions in $dir ($(du -sh "$dir" | cut -f1)); $(stat -f -c %T "$dir")"
echo
rm -f "$dir/.status-cache"
first=$(once --json)
printf "%-52s %8.3f s\n" "first listing (every ledger read, cache written)" "$first"
for fmt in json table; do
    args=()
    [ "$fmt" = json ] && args=(--json)
    times=()
    for _ in 1 2 3 4 5; do times+=("$(once "${args[@]}")"); done
    sorted=$(printf '%s\n' "${times[@]}" | sort -g)
    best=$(echo "$sorted" | head -1)
    median=$(echo "$sorted" | sed -n 3p)
    printf "%-52s %8.3f s (median %.3f)\n" "warm listing, $fmt" "$best" "$median"
    [ "$fmt" = json ] && warm_json="$median"
    [ "$fmt" = table ] && warm_table="$median"
done
cold=""
if [ -w /proc/sys/vm/drop_caches ]; then
    sync
    if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
        cold=$(once)
        printf "%-52s %8.3f s\n" "cold listing (page cache dropped), table" "$cold"
    fi
fi
if [ -z "$cold" ]; then
    echo "COLD NOT MEASURED: the page cache cannot be dropped here (needs root and a writable /proc/sys/vm/drop_caches)" >&2
fi
echo
printf "RESULT listing_warm_s_%s %.3f <=0.3\n" "$sessions" "$warm_table"
printf "RESULT listing_warm_json_s_%s %.3f <=0.3\n" "$sessions" "$warm_json"
if [ -n "$cold" ]; then
    printf "RESULT listing_cold_s_%s %.3f <=1\n" "$sessions" "$cold"
else
    echo "RESULT listing_cold_s_$sessions not-measured <=1"
fi
if [ -n "$pg" ]; then
    echo
    echo "== PostgreSQL: the same $sessions sessions, Store::list (best and median of 5)"
    "$target/release/examples/pg_listing" --from "$dir" --schema "listing_bench_$sessions"
fi
