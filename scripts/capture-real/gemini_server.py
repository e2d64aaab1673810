#!/usr/bin/env python3
"""A scripted stand-in for Google's Gemini API (generateContent / streamGenerateContent), for
driving the real Gemini CLI in the capture scripts. Standard library only; deterministic.

    gemini_server.py --script script.json --requests-log requests.jsonl
    -> prints "listening on http://127.0.0.1:PORT" on stdout, then serves until killed

Script: {"steps": [STEP, ...]}. Each request is answered by the first step not yet used up
(a step is used once unless "repeat": true) whose "when" matches; no step matching -> 404 with
a Google-style error body. STEP:

  {"when": COND?, "reply": REPLY, "repeat": false, "delay_ms": 0}

COND (absent: any request):
  {"kind": "any_text_contains", "text": "..."}    a text part of any content contains it
  {"kind": "function_response", "name": "..."}    a functionResponse part for that function
                                                  (optionally "id": "...") is in the contents
  {"kind": "last_is_function_response"}           the last content holds a functionResponse
  {"kind": "all", "of": [COND, ...]} / {"kind": "not", "cond": COND}

REPLY:
  {"kind": "text", "text": "...", "thought": "..."?}      an answer (thought part first)
  {"kind": "call", "name": "run_shell_command", "args": {...}, "id": "call01"?, "text": ""?}
  {"kind": "hang"}                          headers never sent; the request stays open
  {"kind": "stream_then_hang", "text": "...", "after_chunks": N}
                                            N chunks of the text sent, then silence
  {"kind": "stream_then_close", "text": "...", "after_chunks": N}
                                            N chunks sent, then the connection is dropped
  {"kind": "status", "status": 400, "message": "...", "reason": "INVALID_ARGUMENT"}

A request whose generationConfig asks for JSON (the CLI's helper calls: model routing, next-
speaker and loop checks) never takes a step: it is answered at once with an object built from
its responseJsonSchema (strings "scripted", numbers 1, booleans false, first enum value).

A streamed answer is cut into chunks of CHUNK characters, one SSE event each
(`data: {GenerateContentResponse}` + CRLF CRLF, as the real API with `alt=sse`); the last
event carries finishReason STOP and usageMetadata. A non-streaming request (generateContent)
gets the whole answer as one JSON body. Every request is appended to the requests log as one
JSON line: {"n", "path", "method", "body"} (body parsed when it is JSON).
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 12
MODEL_VERSION = "scripted-gemini"


def texts(body: dict) -> list[str]:
    out = []
    for c in body.get("contents", []) or []:
        for p in c.get("parts", []) or []:
            if isinstance(p.get("text"), str):
                out.append(p["text"])
    return out


def function_responses(content: dict) -> list[dict]:
    return [p["functionResponse"] for p in content.get("parts", []) or []
            if isinstance(p.get("functionResponse"), dict)]


def matches(cond, body: dict) -> bool:
    if not cond:
        return True
    k = cond.get("kind")
    if k == "any_text_contains":
        return any(cond["text"] in t for t in texts(body))
    if k == "function_response":
        for c in body.get("contents", []) or []:
            for fr in function_responses(c):
                if fr.get("name") == cond["name"] and (
                        "id" not in cond or fr.get("id") == cond["id"]):
                    return True
        return False
    if k == "last_is_function_response":
        cs = body.get("contents", []) or []
        return bool(cs) and bool(function_responses(cs[-1]))
    if k == "all":
        return all(matches(c, body) for c in cond["of"])
    if k == "not":
        return not matches(cond["cond"], body)
    raise ValueError(f"unknown condition kind {k!r}")


def json_mode(body: dict) -> bool:
    gc = body.get("generationConfig", {}) or {}
    return gc.get("responseMimeType") == "application/json"


def from_schema(schema):
    """A value that fits a (Gemini- or JSON-) schema: deterministic, minimal."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    t = str(schema.get("type", "object")).lower()
    if isinstance(schema.get("type"), list):
        t = str(schema["type"][0]).lower()
    if t == "object":
        props = schema.get("properties", {}) or {}
        return {k: from_schema(v) for k, v in props.items()}
    if t == "array":
        return []
    if t == "string":
        return "scripted"
    if t in ("integer", "number"):
        return 1
    if t == "boolean":
        return False
    return None


def usage(prompt_chars: int, out_chars: int) -> dict:
    p, o = max(1, prompt_chars // 4), max(1, out_chars // 4)
    return {"promptTokenCount": p, "candidatesTokenCount": o, "totalTokenCount": p + o}


def candidate(parts: list[dict], finish: bool) -> dict:
    c = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        c["finishReason"] = "STOP"
    return c


def events(reply: dict, prompt_chars: int) -> list[dict]:
    """The GenerateContentResponse chunks of a reply, in order (the last one finishes)."""
    k = reply["kind"]
    out = []
    if k in ("text", "stream_then_hang", "stream_then_close"):
        if reply.get("thought"):
            out.append({"candidates": [candidate([{"text": reply["thought"], "thought": True}],
                                                 False)]})
        text = reply.get("text", "")
        pieces = [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]
        for i, piece in enumerate(pieces):
            out.append({"candidates": [candidate([{"text": piece}], i == len(pieces) - 1)]})
        out[-1]["usageMetadata"] = usage(prompt_chars, len(text))
    elif k == "call":
        parts = []
        if reply.get("text"):
            parts.append({"text": reply["text"]})
        fc = {"name": reply["name"], "args": reply.get("args", {})}
        if reply.get("id"):
            fc["id"] = reply["id"]
        parts.append({"functionCall": fc})
        out.append({"candidates": [candidate(parts, True)],
                    "usageMetadata": usage(prompt_chars, 20)})
    else:
        raise ValueError(f"no events for reply kind {k!r}")
    for e in out:
        e["modelVersion"] = MODEL_VERSION
        e["responseId"] = "scripted-response"
    return out


def merged(evts: list[dict]) -> dict:
    """One non-streaming response: every chunk's parts in one candidate."""
    parts = []
    for e in evts:
        parts.extend(e["candidates"][0]["content"]["parts"])
    last = dict(evts[-1])
    last["candidates"] = [candidate(parts, True)]
    return last


class Script:
    def __init__(self, steps: list[dict]):
        self.steps = steps
        self.used = [False] * len(steps)
        self.lock = threading.Lock()

    def pick(self, body: dict):
        with self.lock:
            for i, s in enumerate(self.steps):
                if self.used[i] and not s.get("repeat"):
                    continue
                if matches(s.get("when"), body):
                    self.used[i] = True
                    return s
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "scripted-gemini"

    def log_message(self, fmt, *args):  # quiet: the requests log says what came
        pass

    def _log(self, body):
        srv = self.server
        with srv.log_lock:
            srv.n += 1
            rec = {"n": srv.n, "method": self.command, "path": self.path, "body": body}
            with open(srv.log_path, "a") as f:
                f.write(json.dumps(rec) + "\n")

    def _json(self, status: int, obj: dict):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, status: int, message: str, reason: str):
        self._json(status, {"error": {"code": status, "message": message, "status": reason}})

    def do_GET(self):
        self._log(None)
        self._error(404, f"scripted server: no GET route {self.path}", "NOT_FOUND")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_raw": raw.decode(errors="replace")}
        self._log(body)
        path = self.path.split("?", 1)[0]
        if path.endswith(":countTokens"):
            total = sum(len(t) for t in texts(body)) // 4
            return self._json(200, {"totalTokens": total})
        streaming = path.endswith(":streamGenerateContent")
        if not (streaming or path.endswith(":generateContent")):
            return self._error(404, f"scripted server: no route {path}", "NOT_FOUND")
        if json_mode(body):
            gc = body.get("generationConfig", {}) or {}
            schema = gc.get("responseJsonSchema") or gc.get("responseSchema") or {}
            reply = {"kind": "text", "text": json.dumps(from_schema(schema))}
            evts = events(reply, 0)
            return self._json(200, merged(evts)) if not streaming else self._sse(evts)
        step = self.server.script.pick(body)
        if step is None:
            return self._error(404, "scripted server: no step matches this request", "NOT_FOUND")
        if step.get("delay_ms"):
            time.sleep(step["delay_ms"] / 1000)
        reply = step["reply"]
        k = reply["kind"]
        if k == "hang":
            while True:
                time.sleep(3600)
        if k == "status":
            return self._error(reply.get("status", 500), reply.get("message", "scripted error"),
                               reply.get("reason", "INTERNAL"))
        evts = events(reply, sum(len(t) for t in texts(body)))
        if not streaming:
            return self._json(200, merged(evts))
        self._sse(evts, reply.get("after_chunks") if k.startswith("stream_then_") else None)
        if k == "stream_then_hang":
            while True:
                time.sleep(3600)
        # stream_then_close: dropped without finishing (no last chunk, no finishReason)
        self.close_connection = True

    def _sse(self, evts: list[dict], limit=None):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for i, e in enumerate(evts):
            if limit is not None and i >= limit:
                break
            self.wfile.write(b"data: " + json.dumps(e).encode() + b"\r\n\r\n")
            self.wfile.flush()
            time.sleep(0.02)
        self.close_connection = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--requests-log", required=True)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    with open(a.script) as f:
        steps = json.load(f)["steps"]
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    srv.script = Script(steps)
    srv.log_path = a.requests_log
    srv.log_lock = threading.Lock()
    srv.n = 0
    print(f"listening on http://127.0.0.1:{srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
