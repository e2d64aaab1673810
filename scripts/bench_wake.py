#!/usr/bin/env python3
"""The `wake` mode of scripts/bench-scale.sh: how soon a message accepted into the inbox of a
session that another gateway holds is seen by that session.

Gateway A holds SESSIONS open, idle sessions (created through it); one message per session
is sent through gateway B, which answers 202 queued (A holds the writer). For each message:
the time from B's answer (accepted, durable) to the session recording it as an input (the
record's own timestamp, written by A when its writer drained the inbox). Messages go one at a
time, GAP seconds apart, so this measures the wake-up, not a queue. Half-way, A's listening
connection is killed (pg_terminate_backend): the second half measures that it keeps working.

Prints one JSON object on stdout (p50/p99/max per half and overall, lost); RESULT lines on
stderr. Only the standard library; loopback only.
"""

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from bench_takeover import log, pct, request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="URL of gateway A (holds the sessions)")
    ap.add_argument("--b", required=True, help="URL of gateway B (accepts the messages)")
    ap.add_argument("--token", required=True)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--gap", type=float, default=0.05)
    ap.add_argument("--deadline", type=float, default=60)
    ap.add_argument("--records-cmd", required=True,
                    help="prints session<TAB>input_id<TAB>unix_ts per input record")
    ap.add_argument("--kill-listener-cmd", required=True,
                    help="terminates A's LISTEN connection; prints how many it killed")
    a = ap.parse_args()

    ids = [f"w{i:05d}" for i in range(a.sessions)]
    log(f"creating {len(ids)} sessions on gateway A")
    with ThreadPoolExecutor(8) as ex:
        for st, body in ex.map(lambda s: request(a.a, a.token, "POST", "/v1/sessions", {"id": s}), ids):
            assert st == 201, (st, body)
    accepted = {}
    killed = None
    for i, s in enumerate(ids):
        if i == len(ids) // 2:
            out = subprocess.run(a.kill_listener_cmd, shell=True, capture_output=True, text=True)
            killed = out.stdout.strip()
            log(f"killed A's listening connection ({killed}); sending the second half")
            time.sleep(0.5)
        st, body = request(a.b, a.token, "POST", f"/v1/sessions/{s}/messages",
                           {"message_id": f"wake-{s}", "text": f"wake {s}"})
        accepted[s] = time.time()
        assert st == 202 and json.loads(body).get("queued") is True, (st, body)
        time.sleep(a.gap)
    waits = {}
    t0 = time.time()
    while time.time() - t0 < a.deadline and len(waits) < len(ids):
        out = subprocess.run(a.records_cmd, shell=True, capture_output=True, text=True, check=True)
        for line in out.stdout.splitlines():
            parts = line.split("\t")
            if len(parts) != 3 or not parts[1].startswith("wake-"):
                continue
            sid, ts = parts[0], float(parts[2])
            if sid in accepted:
                waits.setdefault(sid, ts - accepted[sid])
        time.sleep(0.2)
    half = len(ids) // 2

    def stats(group):
        v = [waits[s] * 1000 for s in group if s in waits]
        return {"n": len(v), "p50_ms": pct(v, 0.5), "p99_ms": pct(v, 0.99),
                "max_ms": max(v) if v else None}

    report = {
        "sessions": len(ids),
        "lost": len(ids) - len(waits),
        "listener_killed": killed,
        "all": stats(ids),
        "before_kill": stats(ids[:half]),
        "after_kill": stats(ids[half:]),
    }
    print(json.dumps(report))
    al = report["all"]
    log(f"RESULT wake_p50_ms {al['p50_ms']:.1f} <=20" if al["p50_ms"] is not None else "RESULT wake_p50_ms none <=20")
    log(f"RESULT wake_p99_ms {al['p99_ms']:.1f} <=100" if al["p99_ms"] is not None else "RESULT wake_p99_ms none <=100")
    log(f"RESULT wake_after_listener_killed_p99_ms {report['after_kill']['p99_ms']} <=100")
    log(f"RESULT wake_lost {report['lost']} ==0")
    ok = report["lost"] == 0 and al["p50_ms"] is not None and al["p50_ms"] <= 20 and al["p99_ms"] <= 100
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
