#!/usr/bin/env bash
# The whole product in one command: build, start a real small model locally, run an agent
# session, kill it with SIGKILL while its shell tool runs, resume it, show the receipt, and
# print the URL of the session's page in the web view (`lazarus ui`; in a terminal it stays up
# until Ctrl-C).
# Exits non-zero if any promise is broken (CI runs it as the end-to-end test).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "building lazarus"
cargo build -q -p lazarus-cli
bin="$repo/target/debug/lazarus"

say "installing and starting the local model (llama.cpp server + Gemma 3 270M, CPU only)"
bash scripts/local-model/setup.sh
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
model_pid=$(bash scripts/local-model/serve.sh "$port")
work=$(mktemp -d)
ui_pid=""
cleanup() { kill "$model_pid" $ui_pid 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

ws="$work/workspace"; sessions="$work/sessions"; mkdir -p "$ws"
cat > "$ws/slow.sh" <<'SH'
echo "slow.sh started" >> ran.log
sleep 30
echo "slow.sh finished" >> ran.log
SH
chmod +x "$ws/slow.sh"
export PATH="$ws:$PATH"   # the model tends to call scripts by bare name
cat > "$work/examples.json" <<'JSON'
[
  {"role": "user", "content": "Run the fast script."},
  {"role": "assistant", "tool_calls": [{"call_id": "ex1", "name": "shell", "arguments": "{\"command\": \"fast.sh\"}"}]},
  {"role": "tool", "call_id": "ex1", "content": "fast.sh done\n[exit code 0]"},
  {"role": "assistant", "text": "The fast script ran."}
]
JSON
common=(--session-dir "$sessions" --workspace "$ws" --session demo
        --base-url "http://127.0.0.1:$port/v1" --model gemma-3-270m
        --tools shell --examples "$work/examples.json" --max-tokens 48
        --temperature 0)   # greedy: the small model answers the same way every time

say "lazarus run -p 'Run the slow script.'  (will be killed with SIGKILL once the shell tool runs)"
coproc RUN { exec "$bin" run "${common[@]}" --json --max-turns 2 -p "Run the slow script." 2>&1; }
run_pid=$RUN_PID
exec {run_out}<&"${RUN[0]}"   # bash drops RUN[0] when the process ends; keep our own copy
first_call=""
while IFS= read -r line <&"$run_out"; do
  echo "  $line" | cut -c1-200
  case "$line" in
    *'"kind":"response"'*) [ -n "$first_call" ] || first_call=$(printf '%s' "$line" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read())["data"]; c=[i for i in d["items"] if i["type"]=="tool_call"]; print(c[0]["name"] if c else "")') ;;
    *'"kind":"tool_start"'*) sleep 1; kill -9 "$run_pid"; echo "  ** SIGKILL sent to lazarus (pid $run_pid) while the shell tool runs **"; break ;;
  esac
done
wait "$run_pid" 2>/dev/null || true
[ "$first_call" = "shell" ] || { echo "FAIL: the model's first tool call was '$first_call', expected shell"; exit 1; }

say "after the crash"
"$bin" sessions --session-dir "$sessions" list
"$bin" sessions --session-dir "$sessions" verify demo || true
echo "ran.log:"; cat "$ws/ran.log" 2>/dev/null || echo "(empty)"

say "lazarus run --session demo  (resume: no prompt, it continues where it stopped)"
set +e
"$bin" run "${common[@]}" --max-turns 1 | tee "$work/resume.out"
set -e
grep -q "resumed (run)" "$work/resume.out" || { echo "FAIL: no resume receipt shown"; exit 1; }
grep -q "1 in doubt" "$work/resume.out" || { echo "FAIL: the interrupted shell call was not closed as in doubt"; exit 1; }

say "the receipt in the ledger"
"$bin" sessions --session-dir "$sessions" show demo --json | grep '"kind":"resume"'
"$bin" sessions --session-dir "$sessions" verify demo
started=$(grep -c "slow.sh started" "$ws/ran.log" 2>/dev/null || true)
echo "slow.sh started $started time(s) before the model's next turn; Lazarus re-ran nothing itself."
say "done: killed mid-tool, resumed, the in-doubt call was reported to the model, the ledger verifies"

say "the web view: lazarus ui --session-dir … (read-only; --no-auth: loopback only)"
"$bin" ui --session-dir "$sessions" --no-auth --listen 127.0.0.1:0 > "$work/ui.out" 2>/dev/null &
ui_pid=$!
url=""
for _ in $(seq 100); do
  url=$(sed -n 's/^lazarus ui: //p' "$work/ui.out")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "FAIL: lazarus ui printed no URL"; exit 1; }
page="${url}sessions/demo"
python3 - "$page" <<'PY'
import sys, urllib.request
html = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
for what, needle in [("the resume receipt", 'class="entry receipt"'), ("the in-doubt call", " in-doubt")]:
    if needle not in html:
        sys.exit(f"FAIL: the session page does not show {what}")
PY
if [ -t 0 ] && [ -t 1 ] && [ -z "${CI:-}" ]; then
  echo "Open the page in a browser; Ctrl-C ends the demo (and removes its files)."
  echo "The demo session's page (its receipt and in-doubt call): $page"
  wait "$ui_pid" || true
else
  echo "The demo session's page (its receipt and in-doubt call): $page"
fi
