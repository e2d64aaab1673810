#!/usr/bin/env python3
"""The `memory` mode of scripts/bench-scale.sh: does a gateway give memory back once its
sessions go idle?

RSS of gateway A is sampled after it started (and served one session, so its pools and
caches exist); then SESSIONS sessions are created and each gets one message (the scripted
model answers with text), with 16 client threads; then, after --idle-close closed them all
and SETTLE seconds passed, RSS again. Target (issue 28): RSS after idle <= 1.5x RSS before.

Prints one JSON object on stdout; RESULT lines on stderr. Only the standard library.
"""

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from bench_takeover import log, request


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def gauges(url):
    """lazarus_sessions_open, lazarus_runs_active, lazarus_runs_queued from /metrics."""
    st, body = request(url, "", "GET", "/metrics")
    out = {}
    for line in body.decode().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("lazarus_sessions_open", "lazarus_runs_active",
                                            "lazarus_runs_queued"):
            out[parts[0]] = float(parts[1])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--sessions", type=int, default=10000)
    ap.add_argument("--settle", type=float, default=20)
    ap.add_argument("--allocator", default="?")
    a = ap.parse_args()

    def one(s):
        st, body = request(a.url, a.token, "POST", "/v1/sessions", {"id": s})
        assert st == 201, (st, body)
        while True:  # a full run queue answers 429: wait and send the same message again
            st, body = request(a.url, a.token, "POST", f"/v1/sessions/{s}/messages",
                               {"message_id": f"m-{s}", "text": f"hello {s}"})
            if st != 429:
                break
            time.sleep(0.5)
        assert st == 202, (st, body)

    one("warm-up")
    time.sleep(a.settle)
    before = rss_kb(a.pid)
    log(f"RSS before: {before / 1024:.1f} MB; opening {a.sessions} sessions")
    t0 = time.time()
    peak = before
    with ThreadPoolExecutor(16) as ex:
        for i, _ in enumerate(ex.map(one, [f"m{i:05d}" for i in range(a.sessions)])):
            if i % 500 == 0:
                peak = max(peak, rss_kb(a.pid))
    log(f"accepted in {time.time() - t0:.1f} s; waiting for the runs to end and the sessions to close")
    # every run over and every session closed by --idle-close
    deadline = time.time() + 900
    g = {}
    while time.time() < deadline:
        peak = max(peak, rss_kb(a.pid))
        g = gauges(a.url)
        if g and all(v == 0 for v in g.values()):
            break
        time.sleep(2)
    log(f"all runs over, all sessions closed ({g}); settling {a.settle} s")
    time.sleep(a.settle)
    after = rss_kb(a.pid)
    report = {
        "allocator": a.allocator,
        "sessions": a.sessions,
        "rss_before_mb": round(before / 1024, 1),
        "rss_peak_mb": round(peak / 1024, 1),
        "rss_after_idle_mb": round(after / 1024, 1),
        "ratio": round(after / before, 2),
    }
    print(json.dumps(report))
    log(f"RESULT idle_rss_ratio_{a.allocator} {report['ratio']} <=1.5")
    sys.exit(0 if after <= 1.5 * before else 1)


if __name__ == "__main__":
    main()
