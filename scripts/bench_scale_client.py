#!/usr/bin/env python3
"""The client of scripts/bench-scale.sh: creates sessions and sends messages through random
gateways, kills one gateway half-way, waits for every session to finish, then counts from the
store what was lost or duplicated. Prints one JSON report on stdout (progress on stderr).

Only the standard library; loopback only.
"""

import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Gateways:
    def __init__(self, urls, pids, token):
        self.urls = list(urls)
        self.pids = list(pids)
        self.alive = [True] * len(urls)
        self.token = token
        self.lock = threading.Lock()

    def pick(self, rng):
        with self.lock:
            live = [i for i, a in enumerate(self.alive) if a]
        return rng.choice(live)

    def kill(self, i):
        with self.lock:
            self.alive[i] = False
        os.kill(self.pids[i], signal.SIGKILL)

    def request(self, i, method, path, body=None, timeout=60):
        host, port = self.urls[i].removeprefix("http://").split(":")
        c = http.client.HTTPConnection(host, int(port), timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data, headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
            })
            r = c.getresponse()
            text = r.read()
            return r.status, text
        finally:
            c.close()


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.latency = []         # message posts (the accept path)
        self.create_latency = []  # session creations (a file, its directory synced, a workspace)
        self.status = {}
        self.retries = 0
        self.accepted = set()

    def note(self, status, seconds=None, create=False):
        with self.lock:
            self.status[status] = self.status.get(status, 0) + 1
            if seconds is not None:
                (self.create_latency if create else self.latency).append(seconds)


def deliver(gw, stats, rng, method, path, body, what):
    """Sends until a gateway accepts (2xx): a dead gateway or a 429/503 is retried on another
    (the same message id: the store keeps it once). Returns the final status."""
    for attempt in range(200):
        i = gw.pick(rng)
        t0 = time.monotonic()
        try:
            st, text = gw.request(i, method, path, body)
        except OSError:
            stats.note("connection_error")
            stats.retries += 1
            time.sleep(0.05)
            continue
        if st in (429, 503):
            stats.note(st)
            stats.retries += 1
            time.sleep(0.2)
            continue
        stats.note(st, time.monotonic() - t0, create=path == "/v1/sessions")
        if st >= 300:
            raise RuntimeError(f"{what}: {st} {text[:300]!r}")
        return st
    raise RuntimeError(f"{what}: not accepted after 200 attempts")


def proc_stats(pid):
    """(RSS in kB, open descriptors) of a process, (None, None) once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss_kb = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        return rss_kb, len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return None, None


def sample(gw, stats_out, psql, stop, pg_pattern):
    """Peak RSS (kB) and descriptors per gateway, peak server connections."""
    peak = {"rss_kb": [0] * len(gw.pids), "fds": [0] * len(gw.pids), "pg_connections": 0}
    while not stop.is_set():
        for i, pid in enumerate(gw.pids):
            if not gw.alive[i]:
                continue
            rss_kb, fds = proc_stats(pid)
            if rss_kb is not None:
                peak["rss_kb"][i] = max(peak["rss_kb"][i], rss_kb)
                peak["fds"][i] = max(peak["fds"][i], fds)
        if psql:
            out = subprocess.run(psql + ["-Atc", "SELECT count(*) FROM pg_stat_activity "
                                 f"WHERE application_name LIKE '{pg_pattern}'"],
                                 capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip().isdigit():
                peak["pg_connections"] = max(peak["pg_connections"], int(out.stdout))
        time.sleep(0.5)
    stats_out.update(peak)


def held(gw):
    """What each live gateway holds now: open sessions (its gauge), RSS (MB), descriptors."""
    out = []
    for i, pid in enumerate(gw.pids):
        if not gw.alive[i]:
            continue
        rss_kb, fds = proc_stats(pid)
        row = {"gateway": i, "open_sessions": None,
               "rss_mb": round(rss_kb / 1024, 1) if rss_kb is not None else None, "fds": fds}
        try:
            st, text = gw.request(i, "GET", "/metrics")
            for line in text.decode().splitlines():
                if line.startswith("lazarus_sessions_open "):
                    row["open_sessions"] = int(float(line.split()[1]))
        except OSError:
            pass
        out.append(row)
    return out


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", required=True, help="comma-separated gateway URLs")
    ap.add_argument("--pids", required=True, help="their process ids, same order")
    ap.add_argument("--token", required=True)
    ap.add_argument("--sessions", type=int, default=10000)
    ap.add_argument("--messages", type=int, default=3)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--kill", type=int, default=-1, help="gateway index to SIGKILL half-way")
    ap.add_argument("--psql", default="", help="psql command (space-separated) to sample connections")
    ap.add_argument("--records-cmd", required=True,
                    help="command printing `session_id<TAB>input_id` per input record, "
                         "`session_id<TAB>#final` for a session whose last record is a final "
                         "answer, and `session_id<TAB>@takeover<TAB>UNIX_TIME` per takeover "
                         "receipt")
    ap.add_argument("--deadline", type=float, default=3000, help="seconds for the whole run")
    ap.add_argument("--settle", type=float, default=0,
                    help="seconds to wait after the work for idle sessions to close (0: skip "
                         "the idle phase)")
    ap.add_argument("--active", type=int, default=200,
                    help="sessions that get one more message after the idle phase")
    a = ap.parse_args()

    gw = Gateways(a.urls.split(","), [int(p) for p in a.pids.split(",")], a.token)
    stats = Stats()
    ids = [f"b{i:05d}" for i in range(a.sessions)]
    total = a.sessions * a.messages
    sent = [0]
    sent_lock = threading.Lock()
    killed_at = [None]
    killed_wall = [None]
    stop = threading.Event()
    peaks = {}
    psql = a.psql.split() if a.psql else None
    sampler = threading.Thread(target=sample, args=(gw, peaks, psql, stop, "lazarus pid=%"))
    sampler.start()
    t_start = time.monotonic()

    # Work items: create each session, then its messages, interleaved over the clients.
    def work(k):
        rng = random.Random(k)
        for n in range(k, a.sessions, a.clients):
            sid = ids[n]
            deliver(gw, stats, rng, "POST", "/v1/sessions", {"id": sid}, f"create {sid}")
        for m in range(a.messages):
            for n in range(k, a.sessions, a.clients):
                sid = ids[n]
                mid = f"{sid}-m{m}"
                deliver(gw, stats, rng, "POST", f"/v1/sessions/{sid}/messages",
                        {"message_id": mid, "text": f"message {m} of {sid}: use the tool"},
                        f"message {mid}")
                with sent_lock:
                    sent[0] += 1
                    if a.kill >= 0 and killed_at[0] is None and sent[0] >= total // 2:
                        killed_at[0] = time.monotonic()
                        killed_wall[0] = time.time()
                        log(f"SIGKILL gateway {a.kill} after {sent[0]} messages")
                        gw.kill(a.kill)
                    if sent[0] % 1000 == 0:
                        log(f"{sent[0]}/{total} messages accepted, "
                            f"{time.monotonic() - t_start:.0f} s")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t_sent = time.monotonic()
    log(f"all {total} messages accepted after {t_sent - t_start:.1f} s; waiting for the answers")

    # Done when every session has answered every message: count from the store.
    takeovers = []
    def counts():
        out = subprocess.run(a.records_cmd, shell=True, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"records command failed: {out.stderr[:500]}")
        inputs, responses = {}, {}
        takeovers.clear()
        for line in out.stdout.splitlines():
            sid, _, mid = line.partition("\t")
            if mid.startswith("@takeover\t"):
                takeovers.append(float(mid.split("\t")[1]))
            elif mid == "#final":
                responses[sid] = 1
            else:
                inputs.setdefault(sid, []).append(mid)
        return inputs, responses

    def wait_done(want, messages):
        """Waits until every session of `want` has `messages` distinct inputs recorded and
        ends with a final answer; returns (inputs, finished count)."""
        while True:
            inputs, responses = counts()
            # finished: every message recorded, and the last record a final answer
            done = sum(1 for s in want
                       if s in responses and len(set(inputs.get(s, []))) >= messages)
            if done == len(want) or time.monotonic() - t_start > a.deadline:
                return inputs, done
            log(f"{done}/{len(want)} sessions finished, {time.monotonic() - t_start:.0f} s")
            time.sleep(5)

    inputs, done = wait_done(ids, a.messages)
    t_done = time.monotonic()
    stop.set()
    sampler.join()

    # The idle phase: every session is idle now; after --idle-close, what a gateway still
    # holds is what idle sessions cost. Then a few sessions get one more message each (the
    # active ones), and what the gateways hold is sampled again.
    idle = active = None
    active_ids = []
    if a.settle > 0 and done == a.sessions:
        log(f"idle phase: waiting {a.settle:.0f} s for idle sessions to close")
        time.sleep(a.settle)
        idle = held(gw)
        rng = random.Random(7)
        active_ids = rng.sample(ids, min(a.active, len(ids)))
        stop2, peaks2 = threading.Event(), {}
        sampler2 = threading.Thread(target=sample, args=(gw, peaks2, psql, stop2, "lazarus pid=%"))
        sampler2.start()
        for sid in active_ids:
            mid = f"{sid}-m{a.messages}"
            deliver(gw, stats, rng, "POST", f"/v1/sessions/{sid}/messages",
                    {"message_id": mid, "text": f"one more for {sid}: use the tool"},
                    f"message {mid}")
        inputs, active_done = wait_done(active_ids, a.messages + 1)
        stop2.set()
        sampler2.join()
        live = [i for i, al in enumerate(gw.alive) if al]
        active = {
            "sessions": len(active_ids),
            "finished": active_done,
            "peak_rss_mb_per_gateway": [round(peaks2["rss_kb"][i] / 1024, 1) for i in live],
            "peak_fds_per_gateway": [peaks2["fds"][i] for i in live],
        }
        if active_done != len(active_ids):
            done = -1  # reported as a failure below

    lost = dup = 0
    extra = set(active_ids)
    for s in ids:
        got = inputs.get(s, [])
        for m in range(a.messages + (1 if s in extra else 0)):
            c = got.count(f"{s}-m{m}")
            lost += c == 0
            dup += max(0, c - 1)
    report = {
        "sessions": a.sessions,
        "messages": total + len(active_ids),
        "gateways": len(gw.urls),
        "accepted": total + len(active_ids),
        "lost": lost,
        "duplicated": dup,
        "sessions_finished": done,
        "http_status_counts": {str(k): v for k, v in sorted(stats.status.items(), key=str)},
        "retries": stats.retries,
        "accept_latency_ms_p50": round(1000 * pct(stats.latency, 50), 1),
        "accept_latency_ms_p99": round(1000 * pct(stats.latency, 99), 1),
        "create_latency_ms_p50": round(1000 * pct(stats.create_latency, 50), 1),
        "create_latency_ms_p99": round(1000 * pct(stats.create_latency, 99), 1),
        "seconds_to_accept_all": round(t_sent - t_start, 1),
        "seconds_to_finish_all": round(t_done - t_start, 1),
        "killed_gateway": a.kill if a.kill >= 0 else None,
        "takeover_receipts": len(takeovers),
        "seconds_kill_to_first_takeover": round(min(takeovers) - killed_wall[0], 2)
        if takeovers and killed_wall[0] else None,
        "seconds_kill_to_last_takeover": round(max(takeovers) - killed_wall[0], 2)
        if takeovers and killed_wall[0] else None,
        "peak_rss_mb_per_gateway": [round(k / 1024, 1) for k in peaks.get("rss_kb", [])],
        "peak_fds_per_gateway": peaks.get("fds", []),
        "peak_pg_connections": peaks.get("pg_connections") if psql else None,
        "after_idle_close": idle,
        "active_phase": active,
        "after_active_phase": held(gw) if active else None,
    }
    print(json.dumps(report))
    ok = lost == 0 and dup == 0 and done == a.sessions and not any(
        str(k).startswith("5") for k in stats.status)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
