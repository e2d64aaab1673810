#!/usr/bin/env python3
"""Generates N real-shaped Claude Code session files of 5-60 KB from the real captures.

Each file is one of the Claude Code 2.1.332 transcripts in tests/fixtures/real/claude (the
files the real program wrote when killed at known points), cut to a size drawn uniformly from
5-60 KB by leaving out its largest bookkeeping lines (request shapes and blobs, attachments,
snapshots: never a conversation line, so every file keeps the verdict of its capture), under
a session id of its own. The files are laid out as in ~/.claude: 200 sessions per project
directory, a capture's sub-agent transcripts in `<session>/subagents/`, and a `sessions/`
directory holding the pid files a killed Claude Code leaves behind.

Usage: gen_real.py REAL_CLAUDE_CAPTURES OUT_DIR N
"""
import glob, json, os, random, sys, uuid

captures, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(44)
# record types that are never conversation (docs/boot-resume.md, "Claude Code")
BOOKKEEPING = {"attachment", "api-request-shape", "api-request-blob", "file-history-snapshot",
               "tools-used", "queue-operation", "last-prompt", "cost-state", "atis-latch", "mode"}
MIN, MAX = 5_000, 60_000

templates = []
for path in sorted(glob.glob(os.path.join(captures, "*/home/.claude/projects/*/*.jsonl"))):
    sid = os.path.basename(path)[: -len(".jsonl")]
    lines = [l + b"\n" for l in open(path, "rb").read().split(b"\n") if l]
    kinds = [json.loads(l).get("type") for l in lines]
    subs = []
    sub_dir = os.path.join(os.path.dirname(path), sid, "subagents")
    for s in sorted(glob.glob(os.path.join(sub_dir, "*.jsonl"))):
        subs.append((os.path.basename(s), open(s, "rb").read()))
    templates.append((sid.encode(), lines, kinds, subs))
if not templates:
    sys.exit(f"no Claude Code captures under {captures}")

projects = os.path.join(out, "projects")
sizes = []
for i in range(n):
    sid, lines, kinds, subs = templates[i % len(templates)]
    target = rnd.randint(MIN, MAX)
    keep = [True] * len(lines)
    total = sum(len(l) for l in lines)
    # the largest bookkeeping lines first, never below MIN
    for j in sorted((j for j, k in enumerate(kinds) if k in BOOKKEEPING),
                    key=lambda j: -len(lines[j])):
        if total <= target:
            break
        if total - len(lines[j]) >= MIN:
            keep[j] = False
            total -= len(lines[j])
    new = str(uuid.UUID(int=rnd.getrandbits(128), version=4)).encode()
    body = b"".join(l for l, k in zip(lines, keep) if k).replace(sid, new)
    d = os.path.join(projects, "-home-dev-project-%03d" % (i // 200))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, new.decode() + ".jsonl"), "wb") as f:
        f.write(body)
    sizes.append(len(body))
    if subs:
        sd = os.path.join(d, new.decode(), "subagents")
        os.makedirs(sd, exist_ok=True)
        for name, data in subs:
            with open(os.path.join(sd, name), "wb") as f:
                f.write(data.replace(sid, new))
# pid files a killed Claude Code left behind (their processes are gone)
sessions = os.path.join(out, "sessions")
os.makedirs(sessions, exist_ok=True)
for k in range(20):
    pid = 4_000_000 + k
    with open(os.path.join(sessions, f"{pid}.json"), "w") as f:
        json.dump({"pid": pid, "sessionId": str(uuid.UUID(int=rnd.getrandbits(128), version=4)),
                   "procStart": "1", "status": "busy"}, f)
sizes.sort()
print(f"{n} files, {sizes[0]}-{sizes[-1]} bytes (median {sizes[len(sizes) // 2]}), "
      f"from {len(templates)} captures", file=sys.stderr)
