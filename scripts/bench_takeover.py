#!/usr/bin/env python3
"""The `takeover` mode of scripts/bench-scale.sh: how long messages accepted into the inbox of
a gateway that is then killed wait before another gateway records them.

Gateway A (started with --no-run: it holds its sessions and records nothing of its inbox)
creates SESSIONS sessions; one message per session is sent through gateway B, which answers
202 queued (A holds each session). A is SIGKILLed. From that moment the client polls the
store for each message's input record and reports, per message, the time from the kill to
the record's timestamp: p50, p99, max, and how many were lost (never recorded within the
deadline). Prints one JSON object on stdout; RESULT lines on stderr.

Only the standard library; loopback only.
"""

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def request(url, token, method, path, body=None):
    host, port = url.removeprefix("http://").split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data, headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
        })
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="URL of gateway A (killed)")
    ap.add_argument("--a-pid", type=int, required=True)
    ap.add_argument("--b", required=True, help="URL of gateway B (takes over)")
    ap.add_argument("--token", required=True)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--lease-ms", type=int, required=True)
    ap.add_argument("--deadline", type=float, default=120)
    ap.add_argument("--records-cmd", required=True,
                    help="prints session<TAB>input_id<TAB>unix_ts per input record")
    a = ap.parse_args()

    ids = [f"t{i:05d}" for i in range(a.sessions)]
    log(f"creating {len(ids)} sessions on gateway A")
    with ThreadPoolExecutor(16) as ex:
        for st, body in ex.map(lambda s: request(a.a, a.token, "POST", "/v1/sessions", {"id": s}), ids):
            assert st == 201, (st, body)
    log("one message per session through gateway B (A holds them: each waits in the inbox)")
    queued = 0

    def send(s):
        st, body = request(a.b, a.token, "POST", f"/v1/sessions/{s}/messages",
                           {"message_id": f"q-{s}", "text": f"queued for {s}"})
        assert st == 202, (st, body)
        return json.loads(body).get("queued") is True

    with ThreadPoolExecutor(16) as ex:
        queued = sum(ex.map(send, ids))
    log(f"{queued} of {len(ids)} accepted into an inbox (202 queued); killing gateway A")
    os.kill(a.a_pid, signal.SIGKILL)
    killed_at = time.time()
    waits = {}
    while time.time() - killed_at < a.deadline and len(waits) < len(ids):
        out = subprocess.run(a.records_cmd, shell=True, capture_output=True, text=True, check=True)
        for line in out.stdout.splitlines():
            parts = line.split("\t")
            if len(parts) != 3 or not parts[1].startswith("q-"):
                continue
            sid, ts = parts[0], float(parts[2])
            waits.setdefault(sid, ts - killed_at)
        time.sleep(0.2)
    recorded = [w for w in waits.values()]
    lost = len(ids) - len(recorded)
    report = {
        "sessions": len(ids),
        "queued": queued,
        "recorded": len(recorded),
        "lost": lost,
        "lease_ms": a.lease_ms,
        "wait_p50_s": pct(recorded, 0.5),
        "wait_p99_s": pct(recorded, 0.99),
        "wait_max_s": max(recorded) if recorded else None,
    }
    print(json.dumps(report))
    target = a.lease_ms / 1000 + 2
    log(f"RESULT takeover_wait_max_s {report['wait_max_s']} <={target}")
    log(f"RESULT takeover_lost {lost} ==0")
    ok = lost == 0 and recorded and max(recorded) <= target and queued == len(ids)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
