#!/usr/bin/env python3
"""For scripts/bench-scale.sh (local store): prints `session<TAB>input_id` for every input
record and `session<TAB>-` for every response record of every ledger in DIR."""
import json
import os
import sys

d = sys.argv[1]
out = sys.stdout
for name in os.listdir(d):
    if not name.endswith(".jsonl"):
        continue
    sid = name[: -len(".jsonl")]
    with open(os.path.join(d, name), "rb") as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a torn last line of a running session
            if r.get("kind") == "input":
                out.write(f"{sid}\t{r['data']['input_id']}\n")
            elif r.get("kind") == "response":
                out.write(f"{sid}\t-\n")
