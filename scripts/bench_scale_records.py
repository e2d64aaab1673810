#!/usr/bin/env python3
"""For scripts/bench-scale.sh (local store): prints `session<TAB>input_id` for every input
record, and `session<TAB>#final` for a session whose last record is a final answer (a response
with no tool call and no failure), of every ledger in DIR."""
import json
import os
import sys

d = sys.argv[1]
out = sys.stdout
for name in os.listdir(d):
    if not name.endswith(".jsonl"):
        continue
    sid = name[: -len(".jsonl")]
    last = None
    with open(os.path.join(d, name), "rb") as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a torn last line of a running session
            last = r
            if r.get("kind") == "input":
                out.write(f"{sid}\t{r['data']['input_id']}\n")
    if last and last.get("kind") == "response" and not last["data"].get("failure") and not any(
        i.get("type") == "tool_call" for i in last["data"].get("items", [])
    ):
        out.write(f"{sid}\t#final\n")
