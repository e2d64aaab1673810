#!/usr/bin/env bash
# `lazarus sessions list` over many local sessions (issue 48's targets: 10^5 sessions in
# <= 0.3 s with a warm page cache, 2*10^4 in <= 0.06 s; issue 28's: 10^5 in <= 1 s cold):
#   first  the first listing of the directory: every ledger read, the cache written
#   warm   the listing again (best and median of 5): unchanged sessions come from the cache
#   cold   after dropping the page cache (root only; said loudly when it cannot be done)
# Both the table (a page: the newest 50) and --json (every session) are timed; output goes
# to /dev/null.
#
# Targets scale with the data: a run on N sessions is held to N/10^5 of the 10^5 target
# (the same time per session), and the full-size target is printed beside. At full size
# (or SESSIONS=20000) the 2*10^4 set is timed too, against its own target (0.06 s).
#
# --quick: 10^4 sessions (under a minute once built). Env: SESSIONS (default 100000),
# LAZARUS_BENCH_DIR (default <target>/bench-data; a real disk), CARGO_TARGET_DIR, COLD=0 (no
# cold listing: the page cache of the whole machine is not dropped).
# --pg (after --quick, if both): also the same sessions imported into PostgreSQL (schema
# listing_bench_N on $LAZARUS_TEST_PG, e.g. from `eval "$(scripts/pg-test-server.sh start)"`;
# the import, ~2.5 min for 10^5, is done once and kept) and `Store::list` timed there
# (target <= 0.2 s at 10^5, scaled the same way). Ends with RESULT lines: name, value, target.
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

# the directory of N sessions, made once
dataset() {
    local n=$1 data="$bench_dir/listing-$1"
    if [ ! -f "$data/.complete" ]; then
        rm -rf "$data"
        mkdir -p "$data"
        echo "generating $n sessions in $data/d ..." >&2
        "$target/release/examples/make_many" "$data/d" "$n" >&2
        touch "$data/.complete"
    fi
    echo "$data/d"
}

# seconds of one listing of directory $1
once() {
    local dir=$1 t0 t1
    shift
    t0=$EPOCHREALTIME
    "$lazarus" sessions list --session-dir "$dir" "$@" > /dev/null
    t1=$EPOCHREALTIME
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f\n", b - a }'
}

# $1 target at 10^5 sessions, scaled to $2 sessions (the same time per session)
scaled() {
    awk -v t="$1" -v n="$2" 'BEGIN { printf "%.3f", t * n / 100000 }'
}

# warm listings of directory $2 ($1 sessions), table and --json: sets warm_table, warm_json
warm() {
    local n=$1 dir=$2 fmt
    local -a args times
    for fmt in json table; do
        args=()
        [ "$fmt" = json ] && args=(--json)
        times=()
        for _ in 1 2 3 4 5; do times+=("$(once "$dir" "${args[@]}")"); done
        sorted=$(printf '%s\n' "${times[@]}" | sort -g)
        best=$(echo "$sorted" | head -1)
        median=$(echo "$sorted" | sed -n 3p)
        printf "%-52s %8.3f s (median %.3f)\n" "warm listing of $n, $fmt" "$best" "$median"
        [ "$fmt" = json ] && warm_json="$median"
        [ "$fmt" = table ] && warm_table="$median"
    done
    return 0
}

dir=$(dataset "$sessions")
echo "== machine"
echo "cpus: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); kernel: $(uname -r); $(git rev-parse --short HEAD 2>/dev/null || true)"
echo "sessions: $sessions in $dir ($(du -sh "$dir" | cut -f1)); $(stat -f -c %T "$dir")"
echo
rm -f "$dir/.status-cache"
first=$(once "$dir" --json)
printf "%-52s %8.3f s\n" "first listing (every ledger read, cache written)" "$first"
warm "$sessions" "$dir"
cold=""
# COLD=0: leave the page cache alone (a machine shared with other benchmarks)
if [ "${COLD:-1}" != 0 ] && [ -w /proc/sys/vm/drop_caches ]; then
    sync
    if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
        cold=$(once "$dir")
        printf "%-52s %8.3f s\n" "cold listing (page cache dropped), table" "$cold"
    fi
fi
if [ -z "$cold" ] && [ "${COLD:-1}" = 0 ]; then
    echo "COLD NOT MEASURED: COLD=0 (the page cache left alone)" >&2
elif [ -z "$cold" ]; then
    echo "COLD NOT MEASURED: the page cache cannot be dropped here (needs root and a writable /proc/sys/vm/drop_caches)" >&2
fi
results=()
warm_target=$(scaled 0.3 "$sessions")
cold_target=$(scaled 1 "$sessions")
results+=("$(printf "RESULT listing_warm_s_%s %.3f <=%s" "$sessions" "$warm_table" "$warm_target")")
results+=("$(printf "RESULT listing_warm_json_s_%s %.3f <=%s" "$sessions" "$warm_json" "$warm_target")")
if [ -n "$cold" ]; then
    results+=("$(printf "RESULT listing_cold_s_%s %.3f <=%s" "$sessions" "$cold" "$cold_target")")
else
    results+=("RESULT listing_cold_s_$sessions not-measured <=$cold_target")
fi
# the 2*10^4 set: its own target (issue 48), beside the full-size run
if [ "$sessions" -ge 100000 ]; then
    echo
    small=$(dataset 20000)
    once "$small" --json > /dev/null
    warm 20000 "$small"
    results+=("$(printf "RESULT listing_warm_s_20000 %.3f <=0.06" "$warm_table")")
    results+=("$(printf "RESULT listing_warm_json_s_20000 %.3f <=0.06" "$warm_json")")
fi
if [ -n "$pg" ]; then
    echo
    echo "== PostgreSQL: the same $sessions sessions, Store::list (best and median of 5)"
    pg_out=$("$target/release/examples/pg_listing" --from "$dir" --schema "listing_bench_$sessions")
    echo "$pg_out" | grep -v '^RESULT'
    while IFS= read -r line; do results+=("$line"); done < <(echo "$pg_out" | grep '^RESULT')
fi
echo
if [ "$sessions" != 100000 ]; then
    echo "(targets scaled to $sessions sessions: the 10^5 targets are warm <=0.3 s, cold <=1 s, PostgreSQL <=0.2 s; 2*10^4 warm <=0.06 s)"
fi
printf '%s\n' "${results[@]}"
