#!/usr/bin/env bash
# Scale benchmark (loopback only, bounded in time): many sessions over several gateways.
#
#   scripts/bench-scale.sh pg      three gateways on one PostgreSQL (max_connections = 100),
#                                  one of them SIGKILLed half-way through the messages
#   scripts/bench-scale.sh local   one gateway on a session directory, `ulimit -n 1024`
#   scripts/bench-scale.sh takeover  two gateways on one PostgreSQL: A holds SESSIONS sessions
#                                  (1000 by default here) with one message each waiting in its
#                                  inbox (sent through B), A is SIGKILLed; prints the time from
#                                  the kill to each message recorded by B (p50, p99, max) and
#                                  the count lost (scripts/bench_takeover.py). A runs in its own
#                                  UTS namespace under another host name (as on another machine:
#                                  B cannot see its process die and waits for the lease to run
#                                  out, LEASE_MS, default 3000).
#   scripts/bench-scale.sh memory  one gateway on a session directory: its RSS after start, then
#                                  SESSIONS (10000) sessions with one message each, then RSS once
#                                  every run ended and --idle-close (5s) closed them all
#                                  (scripts/bench_memory.py; target: after <= 1.5x before)
#   scripts/bench-scale.sh wake    two gateways on one PostgreSQL: A holds SESSIONS (200) idle
#                                  sessions, messages for them go through B one at a time; prints
#                                  the time from B's 202 to A recording each (p50, p99; A's
#                                  LISTEN connection is killed half-way) (scripts/bench_wake.py)
#
# A round-robin client (scripts/bench_scale_client.py, 16 threads) creates SESSIONS sessions
# and sends MESSAGES messages to each through random live gateways (a refused or failed send
# is retried on another gateway with the same message id); the scripted model answers every
# message with a tool call (list_dir), then a text. The report (JSON, last line of stdout):
# messages accepted / lost / duplicated, HTTP statuses seen, p50/p99 accept latency (message
# posts; session creations apart), peak
# PostgreSQL connections, peak RSS and descriptors per gateway, time to finish all sessions,
# seconds from the kill to the first and last takeover receipt. Then the idle phase: after
# SETTLE seconds (longer than IDLE_CLOSE) what each gateway still holds (open sessions, RSS,
# descriptors), then ACTIVE sessions get one more message each and the same is sampled during
# and after that wave. Exit 1 unless nothing was lost or duplicated, every session finished
# and no 5xx was seen.
#
# Env: SESSIONS (10000), MESSAGES (3), IDLE_CLOSE (5s), DEADLINE (3000 s), SETTLE (15 s; 0
# skips the idle phase), ACTIVE (200), LAZARUS_BIN (the gateway binary; default: this tree's
# release build, built first), GATEWAY_ARGS (more `lazarus serve` arguments, e.g.
# `--run-nice 0`).
#
#   scripts/bench-scale.sh --quick  the `local` and `pg` scenarios at a small size (SESSIONS
#                                  300, MESSAGES 2, IDLE_CLOSE 3s, SETTLE 6, ACTIVE 50,
#                                  DEADLINE 300; env overrides them), then the PostgreSQL
#                                  store's appends (`pg_bench`, 1/8/64 sessions, 3 rounds of
#                                  2 s, on a server of its own). A few minutes on 2 cores.
#                                  Ends with `RESULT name value target` lines: per scenario
#                                  messages lost ==0, duplicated ==0, 5xx ==0, sessions finished
#                                  ==SESSIONS (absolute: they hold at any size) and the accept
#                                  p99 (local: <20 ms, the gateway's accept target; pg: info only,
#                                  no target: its p99 is that of retries around a SIGKILLed
#                                  gateway and does not scale from the full run's), then
#                                  pg_appends_per_s_64 >=3000 (a rate: the same target as the
#                                  full pg_bench run, which only takes more rounds). Exit 1 when
#                                  a scenario fails (lost, duplicated, 5xx, unfinished).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == --quick ]]; then
    export SESSIONS="${SESSIONS:-300}" MESSAGES="${MESSAGES:-2}" IDLE_CLOSE="${IDLE_CLOSE:-3s}" \
        SETTLE="${SETTLE:-6}" ACTIVE="${ACTIVE:-50}" DEADLINE="${DEADLINE:-300}"
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
    cargo build --release -q -p lazarus-store-postgres --example pg_bench
    out="$(mktemp -d /var/tmp/lazarus-bench-scale-quick.XXXXXX)"
    trap 'LAZARUS_PG_STATE="$out/pg.state" scripts/pg-test-server.sh stop >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
    failed=0
    for m in local pg; do
        "$0" "$m" >"$out/$m.json" || failed=1
        tail -n 1 "$out/$m.json" >&2
    done
    # pg_bench on a server of its own (the scenarios' servers are gone by now)
    eval "$(LAZARUS_PG_STATE="$out/pg.state" scripts/pg-test-server.sh start)"
    "$CARGO_TARGET_DIR/release/examples/pg_bench" --seconds 2 --rounds 3 | tee "$out/pg_bench.out" >&2
    echo "== RESULT lines ($SESSIONS sessions x $MESSAGES messages; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg))"
    for m in local pg; do
        python3 - "$m" "$out/$m.json" "$SESSIONS" <<'PY'
import json, sys
mode, path, sessions = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    with open(path) as f:
        r = json.loads(f.read().strip().splitlines()[-1])
except (OSError, ValueError, IndexError) as e:
    print(f"RESULT scale_{mode}_report missing ==present  # {e}")
    sys.exit(0)
fives = sum(v for k, v in r["http_status_counts"].items() if k.startswith("5"))
print(f"RESULT scale_{mode}_messages_lost {r['lost']} ==0")
print(f"RESULT scale_{mode}_messages_duplicated {r['duplicated']} ==0")
print(f"RESULT scale_{mode}_5xx {fives} ==0")
print(f"RESULT scale_{mode}_sessions_finished {r['sessions_finished']} =={sessions}")
target = "<20" if mode == "local" else "info"
print(f"RESULT scale_{mode}_accept_p99_ms {r['accept_latency_ms_p99']} {target}")
PY
    done
    grep '^RESULT' "$out/pg_bench.out"
    exit "$failed"
fi
mode="${1:-pg}"
if [[ "$mode" == takeover ]]; then
    SESSIONS="${SESSIONS:-1000}"
    IDLE_CLOSE="${IDLE_CLOSE:-1h}"   # A keeps its sessions open: they wait in its inbox
fi
if [[ "$mode" == wake ]]; then
    SESSIONS="${SESSIONS:-200}"
    IDLE_CLOSE="${IDLE_CLOSE:-1h}"   # A keeps its sessions open and idle
fi
SESSIONS="${SESSIONS:-10000}"
LEASE_MS="${LEASE_MS:-3000}"
MESSAGES="${MESSAGES:-3}"
IDLE_CLOSE="${IDLE_CLOSE:-5s}"
DEADLINE="${DEADLINE:-3000}"
SETTLE="${SETTLE:-15}"
ACTIVE="${ACTIVE:-200}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p lazarus-cli --bin lazarus -p lazarus-testkit --bin scripted-model-server
BIN="${LAZARUS_BIN:-$CARGO_TARGET_DIR/release/lazarus}"   # LAZARUS_BIN: another build to measure
MODEL="$CARGO_TARGET_DIR/release/scripted-model-server"
work="$(mktemp -d /var/tmp/lazarus-bench-scale.XXXXXX)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ "$mode" == pg || "$mode" == takeover || "$mode" == wake ]]; then
        LAZARUS_PG_STATE="$work/pg.state" scripts/pg-test-server.sh stop >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/script.json" <<'EOF'
{"steps": [
  {"when": {"kind": "last_tool_result"}, "repeat": true,
   "reply": {"kind": "response", "text": "Listed; done."}},
  {"repeat": true,
   "reply": {"kind": "response", "text": "Looking.",
             "tool_calls": [{"id": "call_{n}", "name": "list_dir", "arguments": {"path": "."}}]}}
]}
EOF
"$MODEL" --script "$work/script.json" >"$work/model.out" 2>"$work/model.err" &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$work/model.out" 2>/dev/null && break; sleep 0.1; done
model_url="$(sed -n 's/.*listening on //p' "$work/model.out" | head -1)/v1"
token="bench-scale-token-0123456789"

wrap=()   # a command the gateway runs under (takeover mode: another host name)
start_gateway() { # NAME ARGS…: starts a gateway, prints its URL
    local name="$1"; shift
    "${wrap[@]}" "$BIN" serve --listen 127.0.0.1:0 --base-url "$model_url" --model scripted \
        --workspace-root "$work/ws" --token-file "$work/$name.token" \
        --idle-close "$IDLE_CLOSE" --max-running 32 --tools list_dir,read_file "$@" ${GATEWAY_ARGS:-} \
        >"$work/$name.out" 2>"$work/$name.err" &
    pids+=($!)
    echo "$!" >"$work/$name.pid"
    for _ in $(seq 300); do
        grep -q "^ready" "$work/$name.out" 2>/dev/null && break
        sleep 0.1
    done
    grep -q "^ready" "$work/$name.out" || { cat "$work/$name.err" >&2; echo "gateway $name did not start" >&2; exit 1; }
}
start_pg() { # STORE_PARAMS: a PostgreSQL of its own; sets store, psql, LAZARUS_TOKEN
    eval "$(LAZARUS_PG_STATE="$work/pg.state" LAZARUS_PG_MAX_CONNECTIONS=100 scripts/pg-test-server.sh start)"
    store="${LAZARUS_TEST_PG}?schema=bench$1"
    local psql_cmd pg_host_port
    psql_cmd="$(dirname "$(command -v pg_ctl 2>/dev/null || ls /usr/lib/postgresql/*/bin/pg_ctl | tail -1)")/psql"
    [[ -x "$psql_cmd" ]] || psql_cmd=psql
    pg_host_port="${LAZARUS_TEST_PG#postgres://}"; pg_host_port="${pg_host_port#*@}"; pg_host_port="${pg_host_port%%/*}"
    psql="$psql_cmd -h ${pg_host_port%:*} -p ${pg_host_port#*:} -U postgres postgres"
    export LAZARUS_TOKEN="$token" OPENAI_API_KEY=bench
}
url_of() { sed -n 's/^lazarus gateway listening on //p' "$work/$1.out" | head -1; }

echo "== $mode: $SESSIONS sessions x $MESSAGES messages; cores: $(nproc)" >&2
if [[ "$mode" == takeover ]]; then
    start_pg "&lease_ttl_ms=$LEASE_MS"
    # A: another host as far as B can tell (its own UTS namespace), holding without running
    if [[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null; then
        wrap=(unshare --uts sh -c 'hostname other-host && exec "$@"' --)
        start_gateway a --store "$store" --no-run --max-open-sessions 20000
        wrap=()
    else
        echo "note: not root: A runs on this host (B takes over at once instead of at the lease's end)" >&2
        start_gateway a --store "$store" --no-run --max-open-sessions 20000
    fi
    start_gateway b --store "$store" --takeover-interval 1s
    tab=$'\t'
    records_cmd="$psql -At -F '$tab' -c \"SELECT session_id, convert_from(line, 'UTF8')::json->'data'->>'input_id', extract(epoch FROM (convert_from(line, 'UTF8')::json->>'ts')::timestamptz) FROM bench.records WHERE kind = 'input'\""
    python3 scripts/bench_takeover.py --a "$(url_of a)" --a-pid "$(cat "$work/a.pid")" \
        --b "$(url_of b)" --token "$token" --sessions "$SESSIONS" --lease-ms "$LEASE_MS" \
        --records-cmd "$records_cmd"
    exit $?
fi
if [[ "$mode" == memory ]]; then
    export LAZARUS_TOKEN="$token" OPENAI_API_KEY=bench
    start_gateway a --session-dir "$work/sessions"
    python3 scripts/bench_memory.py --url "$(url_of a)" --pid "$(cat "$work/a.pid")" \
        --token "$token" --sessions "$SESSIONS" --settle "$SETTLE" --allocator "${ALLOCATOR:-default}"
    exit $?
fi
if [[ "$mode" == wake ]]; then
    start_pg ""
    start_gateway a --store "$store"
    start_gateway b --store "$store"
    tab=$'\t'
    records_cmd="$psql -At -F '$tab' -c \"SELECT session_id, convert_from(line, 'UTF8')::json->'data'->>'input_id', extract(epoch FROM (convert_from(line, 'UTF8')::json->>'ts')::timestamptz) FROM bench.records WHERE kind = 'input'\""
    kill_cmd="$psql -At -c \"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'lazarus mail listener pid=$(cat "$work/a.pid") host=$(hostname)'\""
    python3 scripts/bench_wake.py --a "$(url_of a)" --b "$(url_of b)" --token "$token" \
        --sessions "$SESSIONS" --records-cmd "$records_cmd" --kill-listener-cmd "$kill_cmd"
    exit $?
fi
if [[ "$mode" == pg ]]; then
    start_pg "&lease_ttl_ms=3000"
    for g in a b c; do
        # one workspace root (as on a shared file system): a session taken over keeps its workspace
        start_gateway "$g" --store "$store" --takeover-interval 1s
    done
    urls="$(url_of a),$(url_of b),$(url_of c)"
    gpids="$(cat "$work/a.pid"),$(cat "$work/b.pid"),$(cat "$work/c.pid")"
    kill_arg=(--kill 1)
    tab=$'\t'   # a literal tab: the client runs the command with /bin/sh
    records_cmd="$psql -At -F '$tab' -f scripts/bench_scale_records.sql"
    psql_arg=(--psql "$psql")
else
    ulimit -n 1024
    export LAZARUS_TOKEN="$token" OPENAI_API_KEY=bench
    start_gateway a --session-dir "$work/sessions"
    urls="$(url_of a)"
    gpids="$(cat "$work/a.pid")"
    kill_arg=()
    records_cmd="python3 scripts/bench_scale_records.py '$work/sessions'"
    psql_arg=()
fi
python3 scripts/bench_scale_client.py --urls "$urls" --pids "$gpids" --token "$token" \
    --sessions "$SESSIONS" --messages "$MESSAGES" --deadline "$DEADLINE" \
    --settle "$SETTLE" --active "$ACTIVE" \
    "${kill_arg[@]}" "${psql_arg[@]}" --records-cmd "$records_cmd"
