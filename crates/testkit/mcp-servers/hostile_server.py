"""A misbehaving MCP server over stdio, written by hand (no SDK) so it can break the protocol
on purpose. One mode per run:

    python hostile_server.py MODE

Modes:
  exit-at-start     prints a message on stderr and exits 3 before reading anything
  silent            never answers initialize
  garbage           after initialize, prints non-JSON lines, answers to unknown ids and
                    unknown notifications around every real answer
  wrong-id          answers initialize with an id the client never sent
  no-schema         lists a tool without an inputSchema (and one with a valid one)
  hang-call         answers everything except tools/call (writes the cancellations it gets to
                    $HOSTILE_LOG)
  die-in-call       exits (status 9) when a tool is called
  huge-line         answers tools/call with a line of $HOSTILE_MIB MiB (default 4)
  dup-names         lists two tools whose names differ only in characters the model cannot see
"""

import json
import os
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "garbage"


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def log(line):
    path = os.environ.get("HOSTILE_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def tools():
    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    if MODE == "no-schema":
        return [
            {"name": "schemaless", "description": "no inputSchema at all"},
            {"name": "ok", "description": "fine", "inputSchema": schema},
        ]
    if MODE == "dup-names":
        return [
            {"name": "do.it", "inputSchema": schema},
            {"name": "do_it", "inputSchema": schema},
        ]
    return [{"name": "work", "description": "does work", "inputSchema": schema}]


def main():
    if MODE == "exit-at-start":
        sys.stderr.write("hostile: cannot find my configuration file\n")
        sys.stderr.flush()
        sys.exit(3)
    initialized = False
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method = msg.get("method")
        mid = msg.get("id")
        if method == "notifications/cancelled":
            log("cancelled " + json.dumps(msg.get("params", {})))
            continue
        if mid is None:
            continue
        if MODE == "silent":
            continue
        if MODE == "wrong-id" and method == "initialize":
            mid = 987654
        # (a 2026-07-28 client probes with server/discover first: answered like any
        # unknown method, before the misbehaving starts)
        if MODE == "garbage" and initialized:
            sys.stdout.write("this is not JSON\n")
            send({"jsonrpc": "2.0", "id": 987654, "result": {}})
            send({"jsonrpc": "2.0", "method": "notifications/unknown_thing", "params": {}})
        if method == "initialize":
            initialized = True
            send({
                "jsonrpc": "2.0",
                "id": mid,
                "result": {
                    "protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": "hostile", "version": "0.0.1"},
                },
            })
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools()}})
        elif method == "tools/call":
            log("call " + json.dumps(msg.get("params", {})))
            if MODE == "hang-call":
                continue
            if MODE == "die-in-call":
                sys.exit(9)
            if MODE == "huge-line":
                text = "y" * (int(os.environ.get("HOSTILE_MIB", "4")) * 1024 * 1024)
            else:
                text = "worked"
            send({
                "jsonrpc": "2.0",
                "id": mid,
                "result": {"content": [{"type": "text", "text": text}]},
            })
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        else:
            send({
                "jsonrpc": "2.0",
                "id": mid,
                "error": {"code": -32601, "message": "method not found: " + str(method)},
            })


if __name__ == "__main__":
    main()
