#!/usr/bin/env python3
"""Generates N synthetic session files of all formats (10 KB - 5 MB, log-uniform sizes).

Each file = the fixture's first line (header), a sparse hole, then filler records and the
fixture's remaining lines as the tail. The hole keeps disk use low; both approaches
measured read only the tail, so its content does not matter to either.
Usage: gen.py FIXTURES_DIR OUT_DIR N
"""
import math, os, random, sys

fx_dir, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(42)
fixtures = []
for fmt in sorted(os.listdir(fx_dir)):
    if fmt == "real":  # real captures (SQLite, sub-directories) are not templates
        continue
    for name in sorted(os.listdir(os.path.join(fx_dir, fmt))):
        if not os.path.isfile(os.path.join(fx_dir, fmt, name)):
            continue
        with open(os.path.join(fx_dir, fmt, name), "rb") as f:
            data = f.read()
        head, _, rest = data.partition(b"\n")
        fixtures.append((fmt, name, head + b"\n", rest))
filler = {
    "openclaw": b'{"type":"custom","id":"f0000000","parentId":null,"timestamp":"t","customType":"openclaw.cache-ttl","data":{"pad":"%s"}}\n',
    "pi": b'{"type":"label","id":"f0000000","parentId":null,"timestamp":"t","targetId":"x","label":"%s"}\n',
    "claude-code": b'{"type":"file-history-snapshot","messageId":"m","snapshot":{"pad":"%s"}}\n',
    "codex": b'{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","pad":"%s"}}\n',
    "lazarus": b'{"seq":0,"ts":"t","kind":"fork","data":{"pad":"%s"},"crc":"00000000"}\n',
}
os.makedirs(out, exist_ok=True)
lo, hi = math.log(10_000), math.log(5_000_000)
for i in range(n):
    fmt, name, head, rest = fixtures[i % len(fixtures)]
    d = os.path.join(out, fmt, "d%03d" % (i // 1000))
    os.makedirs(d, exist_ok=True)
    size = int(math.exp(rnd.uniform(lo, hi)))
    pad = filler[fmt] % (b"x" * rnd.randint(200, 2000))
    tail = pad * 2 + rest
    p = os.path.join(d, "s%06d-%s" % (i, name))
    with open(p, "wb") as f:
        f.write(head)
        hole = max(0, size - len(head) - len(tail) - 1)
        if hole:
            f.seek(len(head) + hole)
            f.write(b"\n")
        f.write(tail)
