#!/usr/bin/env bash
# Benchmark: `lazarus boot-resume` vs the seed's shell approach (tail -n 1 | jq per file), on
# two sets of files, in one run:
#
#   crates/boot-resume/bench/compare-shell.sh [--quick] [N] [SHELL_SUBSET] [REAL_N]
#
# - sparse: N synthetic session files (default 100000; all formats, 10 KB - 5 MB, the middle
#   of each a sparse hole), made by gen.py from the fixtures;
# - real: REAL_N real-shaped Claude Code files (default 20000; 5-60 KB, made by gen_real.py
#   from the real captures in tests/fixtures/real/claude), laid out as in ~/.claude, scanned
#   as `--source claude-code:DIR/projects`; then the same files 5 times over (100,000) for
#   the time of 10^5 of them.
# --quick: N = 20000, SHELL_SUBSET = 100, REAL_N = 20000.
# lazarus scans each set warm (best of 3 wall times, after one warm-up run); the shell loop
# runs on SHELL_SUBSET files of each set (default 300) and is extrapolated per file. Prints
# files/s of each and the ratios, then the torn-file and parallel-call cases the shell loop
# gets wrong. Ends with RESULT lines (name, value, target) for each set: the ratio to the
# shell loop, and the time for 100,000 files (measured, or scaled from N).
set -euo pipefail
quick=0
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
if [ $quick = 1 ]; then N=${1:-20000}; SUB=${2:-100}; else N=${1:-100000}; SUB=${2:-300}; fi
REAL_N=${3:-20000}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BENCH_DIR=${BENCH_DIR:-/tmp/lazarus-boot-resume-bench}
LAZARUS=${LAZARUS:-}
command -v jq >/dev/null || { echo "jq is needed: apt-get install -y jq" >&2; exit 2; }
if [ -z "$LAZARUS" ]; then
  (cd "$ROOT" && cargo build --release -q -p lazarus-cli)
  LAZARUS=${CARGO_TARGET_DIR:-$ROOT/target}/release/lazarus
fi
DATA="$BENCH_DIR/n$N"
if [ ! -f "$DATA/.done" ]; then
  rm -rf "$DATA"
  echo "generating $N files in $DATA ..." >&2
  python3 "$HERE/gen.py" "$HERE/../tests/fixtures" "$DATA" "$N"
  touch "$DATA/.done"
fi
count=$(find "$DATA" -name '*.jsonl' | wc -l)
echo "files: $count  (apparent size $(du -sh --apparent-size "$DATA" | cut -f1), on disk $(du -sh "$DATA" | cut -f1))"

scan() { "$LAZARUS" boot-resume --source "auto:$DATA" --window 0 --skip-pattern '' --dry-run --json > "$BENCH_DIR/out.jsonl"; }
scan  # warm-up (page cache)
best=999999
for _ in 1 2 3; do
  t0=$(date +%s.%N); scan; t1=$(date +%s.%N)
  t=$(echo "$t1 - $t0" | bc -l)
  best=$(echo "if ($t < $best) $t else $best" | bc -l)
done
lines=$(wc -l < "$BENCH_DIR/out.jsonl")
lz_rate=$(echo "$count / $best" | bc -l)
printf 'lazarus boot-resume: %d files in %.3f s (best of 3, warm) = %.0f files/s; %d report lines\n' "$count" "$best" "$lz_rate" "$lines"

# The seed's check, per file: tail -n 1, then three jq calls (type, content, tool_calls).
seed_check() {
  local f=$1 last
  last=$(tail -n 1 "$f")
  t=$(echo "$last" | jq -r '.type' 2>/dev/null) || { echo "$f parse-error"; return; }
  c=$(echo "$last" | jq -r '.content // ""' 2>/dev/null) || true
  n=$(echo "$last" | jq -r '.tool_calls // [] | length' 2>/dev/null) || true
  if [ "$t" = toolResult ]; then echo "$f resume"
  elif [ "$t" = assistant ] && [ -z "$c" ] && [ "${n:-0}" -gt 0 ]; then echo "$f resume"
  elif [ "$t" = user ]; then echo "$f resume"
  else echo "$f no"; fi
}
mapfile -t subset < <(find "$DATA" -name '*.jsonl' | head -n "$SUB")
for f in "${subset[@]:0:50}"; do seed_check "$f" > /dev/null; done  # warm
t0=$(date +%s.%N)
for f in "${subset[@]}"; do seed_check "$f"; done > "$BENCH_DIR/shell.out"
t1=$(date +%s.%N)
st=$(echo "$t1 - $t0" | bc -l)
sh_rate=$(echo "${#subset[@]} / $st" | bc -l)
printf 'seed shell loop    : %d files in %.3f s = %.1f files/s (extrapolated to %d files: %.0f s)\n' "${#subset[@]}" "$st" "$sh_rate" "$count" "$(echo "$count / $sh_rate" | bc -l)"
ratio=$(echo "$lz_rate / $sh_rate" | bc -l)
printf 'ratio              : %.0fx faster\n' "$ratio"

# The real-shaped Claude Code files: their own scan and shell loop, in this same run.
REAL="$BENCH_DIR/real$REAL_N"
if [ ! -f "$REAL/.done" ]; then
  rm -rf "$REAL"
  echo "generating $REAL_N real-shaped Claude Code files in $REAL ..." >&2
  python3 "$HERE/gen_real.py" "$HERE/../tests/fixtures/real/claude" "$REAL" "$REAL_N"
  touch "$REAL/.done"
fi
rcount=$(find "$REAL/projects" -name '*.jsonl' | wc -l)
echo
echo "real-shaped: $rcount Claude Code files (${REAL_N} sessions of 5-60 KB and their sub-agents), $(du -sh "$REAL" | cut -f1)"
rscan() { "$LAZARUS" boot-resume --source "claude-code:$1" --window 0 --skip-pattern '' --dry-run --json > "$BENCH_DIR/out-real.jsonl"; }
best_of_3() {
  local b=999999 t0 t1 t
  "$@"  # warm-up
  for _ in 1 2 3; do
    t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N)
    t=$(echo "$t1 - $t0" | bc -l)
    b=$(echo "if ($t < $b) $t else $b" | bc -l)
  done
  echo "$b"
}
rbest=$(best_of_3 rscan "$REAL/projects")
rlines=$(wc -l < "$BENCH_DIR/out-real.jsonl")
r_rate=$(echo "$rcount / $rbest" | bc -l)
printf 'lazarus boot-resume: %d files in %.3f s (best of 3, warm) = %.0f files/s; %d report lines\n' "$rcount" "$rbest" "$r_rate" "$rlines"
mapfile -t rsubset < <(find "$REAL/projects" -name '*.jsonl' | head -n "$SUB")
for f in "${rsubset[@]:0:50}"; do seed_check "$f" > /dev/null; done  # warm
t0=$(date +%s.%N)
for f in "${rsubset[@]}"; do seed_check "$f"; done > "$BENCH_DIR/shell-real.out"
t1=$(date +%s.%N)
rst=$(echo "$t1 - $t0" | bc -l)
rsh_rate=$(echo "${#rsubset[@]} / $rst" | bc -l)
printf 'seed shell loop    : %d files in %.3f s = %.1f files/s\n' "${#rsubset[@]}" "$rst" "$rsh_rate"
rratio=$(echo "$r_rate / $rsh_rate" | bc -l)
printf 'ratio              : %.0fx faster\n' "$rratio"
# 10^5 real-shaped files: the same set five times over, in five project trees
R100="$BENCH_DIR/real${REAL_N}x5"
if [ ! -f "$R100/.done" ]; then
  rm -rf "$R100"; mkdir -p "$R100/projects"
  # hard links: the same bytes five times over, without the disk space
  for k in 1 2 3 4 5; do cp -al "$REAL/projects" "$R100/projects/copy$k"; done
  cp -r "$REAL/sessions" "$R100/sessions"
  touch "$R100/.done"
fi
r100count=$(find "$R100/projects" -name '*.jsonl' | wc -l)
r100best=$(best_of_3 rscan "$R100/projects")
printf 'lazarus boot-resume: %d real-shaped files in %.3f s (best of 3, warm)\n' "$r100count" "$r100best"

echo
echo "torn last line (a tool result cut mid-write), fixture openclaw/torn-last-line.jsonl:"
TORN="$HERE/../tests/fixtures/openclaw/torn-last-line.jsonl"
printf '  seed shell loop    : %s\n' "$(seed_check "$TORN" | awk '{print $2}') (jq cannot parse the fragment; the cut-off session is not resumed)"
"$LAZARUS" boot-resume --source "openclaw:$TORN" --window 0 --dry-run --json \
  | jq -r '"  lazarus boot-resume: verdict=\(.verdict) torn=\(.torn) action=\(.action): \(.reason)"'
echo "openclaw/interrupted-tool-call.jsonl (assistant with text and a toolCall, no result):"
PAR="$HERE/../tests/fixtures/openclaw/interrupted-tool-call.jsonl"
printf '  seed shell loop    : %s\n' "$(seed_check "$PAR" | awk '{print $2}')"
"$LAZARUS" boot-resume --source "openclaw:$PAR" --window 0 --dry-run --json \
  | jq -r '"  lazarus boot-resume: verdict=\(.verdict) action=\(.action): \(.reason)"'

echo
printf 'RESULT sparse_scan_vs_shell_loop %.0f >=2000\n' "$ratio"
printf 'RESULT sparse_scan_100k_files_s %.3f <=1.0%s\n' "$(echo "100000 / $lz_rate" | bc -l)" \
  "$([ "$count" -ge 100000 ] || echo " (scaled from $count files)")"
printf 'RESULT real_scan_vs_shell_loop %.0f >=2000\n' "$rratio"
printf 'RESULT real_scan_100k_files_s %.3f <=2.0 (%d files, scaled to 100000)\n' \
  "$(echo "$r100best * 100000 / $r100count" | bc -l)" "$r100count"
