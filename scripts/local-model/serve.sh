#!/usr/bin/env bash
# Usage: serve.sh PORT
# Starts serve.py in the background (log in <repo>/.model/serve-PORT.log), waits
# until GET /v1/models answers (at most 60 s), then prints the server's pid.
# Stop it with: kill PID
set -euo pipefail
port="${1:?usage: serve.sh PORT}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${LAZARUS_VENV:-$repo/.venv}"
if [ ! -x "$venv/bin/python" ]; then
    echo "serve: no virtualenv at $venv; run scripts/local-model/setup.sh first" >&2
    exit 1
fi
mkdir -p "$repo/.model"
log="$repo/.model/serve-$port.log"
nohup "$venv/bin/python" "$here/serve.py" "$port" >"$log" 2>&1 </dev/null &
pid=$!
for _ in $(seq 1 300); do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "serve: server exited early; log follows" >&2
        cat "$log" >&2
        exit 1
    fi
    if curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
        echo "$pid"
        exit 0
    fi
    sleep 0.2
done
echo "serve: no answer on port $port after 60 s; stopping pid $pid" >&2
kill "$pid" 2>/dev/null || true
exit 1
