"""OpenClaw scenarios: the real `openclaw` (embedded `agent --local` runs, and runs through a
foreground `openclaw gateway run`) against the scripted OpenAI-compatible server, SIGKILLed
at known points. OpenClaw keeps everything in SQLite
(`~/.openclaw/agents/<agent>/agent/openclaw-agent.sqlite`, WAL mode), so the capture is the
database with its `-wal` file, as the kill left them."""
from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

from harness import Server, base_env, kill_tree, log, wait_for, FALLBACK, after, reply_text, says, step  # noqa: F401

TOKEN = "capture-token-0123456789abcdef0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reply_call(cid, name, args):
    return {"kind": "response", "tool_calls": [{"id": cid, "name": name, "arguments": args}]}


class OpenClaw:
    def __init__(self, box: Path, bins: dict, server: Server):
        self.box = box
        self.home = box / "home"
        self.work = box / "work"
        (self.home / ".openclaw").mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.bins = bins
        self.server = server
        self.port = free_port()
        config = {
            "update": {"checkOnStart": False},
            "models": {"mode": "merge", "providers": {"scripted": {
                "baseUrl": server.url + "/v1", "apiKey": "sk-test", "api": "openai-completions",
                "models": [{"id": "scripted-model", "name": "Scripted", "reasoning": False,
                            "input": ["text"], "contextWindow": 128000, "maxTokens": 4096}]}}},
            "agents": {"defaults": {"model": {"primary": "scripted/scripted-model"},
                                    "workspace": str(self.work)}},
            "gateway": {"mode": "local", "port": self.port, "bind": "loopback",
                        "auth": {"mode": "token", "token": TOKEN}},
        }
        (self.home / ".openclaw" / "openclaw.json").write_text(json.dumps(config, indent=1))
        self.env = base_env(self.home, bins["NODE_BIN"])
        self.env.update({
            "OPENCLAW_NO_AUTO_UPDATE": "1", "OPENCLAW_DISABLE_BONJOUR": "1",
            "OPENCLAW_SKIP_CHANNELS": "1", "OPENCLAW_SKIP_CRON": "1",
            "OPENCLAW_SKIP_CANVAS_HOST": "1", "OPENCLAW_SKIP_GMAIL_WATCHER": "1",
            "OPENCLAW_GATEWAY_TOKEN": TOKEN})
        self.procs: list[subprocess.Popen] = []

    def spawn(self, args: list[str], name: str) -> subprocess.Popen:
        p = subprocess.Popen([self.bins["OPENCLAW_BIN"], *args], cwd=self.work, env=self.env,
                             stdin=subprocess.DEVNULL, stdout=open(self.box / f"{name}.out", "a"),
                             stderr=open(self.box / f"{name}.err", "a"), start_new_session=True)
        self.procs.append(p)
        return p

    def embedded(self, message: str) -> subprocess.Popen:
        return self.spawn(["agent", "--local", "--agent", "main", "--message", message, "--json"],
                          "agent")

    def gateway(self) -> subprocess.Popen:
        g = self.spawn(["gateway", "run", "--port", str(self.port), "--bind", "loopback"],
                       "gateway")
        wait_for("the gateway to listen", lambda: self._listening() or g.poll() is not None, 120)
        if g.poll() is not None:
            raise RuntimeError(f"gateway exited {g.returncode}: "
                               f"{(self.box / 'gateway.err').read_text()[-2000:]}")
        return g

    def _listening(self) -> bool:
        with socket.socket() as s:
            s.settimeout(0.2)
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def via_gateway(self, message: str) -> subprocess.Popen:
        return self.spawn(["agent", "--agent", "main", "--message", message, "--json",
                           "--timeout", "600"], "client")

    def db(self) -> Path:
        return self.home / ".openclaw" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"

    def rows(self, sql: str, args=()) -> list:
        if not self.db().exists():
            return []
        try:
            c = sqlite3.connect(f"file:{self.db()}?mode=ro", uri=True, timeout=1)
            try:
                return c.execute(sql, args).fetchall()
            finally:
                c.close()
        except sqlite3.Error:
            return []

    def events(self) -> list[dict]:
        out = []
        for (j,) in self.rows("SELECT event_json FROM transcript_events ORDER BY session_id, seq"):
            try:
                out.append(json.loads(j))
            except (TypeError, ValueError):
                pass
        return out

    def has_event(self, pred) -> bool:
        return any(pred(e) for e in self.events())

    def marker(self, name: str) -> Path:
        return self.box / f"{name}.started"

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                kill_tree(p.pid)
                p.wait()


def is_final_text(e, text):
    m = e.get("message") or {}
    return (e.get("type") == "message" and m.get("role") == "assistant"
            and text in json.dumps(m.get("content")))


def sleeper(box: Path, name: str, secs=300) -> str:
    return f"touch {box / (name + '.started')}; sleep {secs}"


# --- scenario runners -------------------------------------------------------------------

def r_embedded_finished(o: OpenClaw):
    p = o.embedded("please make the file")
    wait_for("the embedded run to exit", lambda: p.poll() is not None, 180)


def r_embedded_in_tool(o: OpenClaw):
    o.embedded("please make the file")
    wait_for("the exec tool to start", lambda: o.marker("tool").exists(), 180)
    time.sleep(1.5)


def r_embedded_first_answer(o: OpenClaw):
    o.embedded("please make the file")
    wait_for("the first model request", lambda: o.server.count() >= 1, 180)
    time.sleep(2)


def r_embedded_after_tool(o: OpenClaw):
    o.embedded("please make the file")
    wait_for("the request with the tool result", lambda: any(
        "call01" in json.dumps(r.get("messages", [])) and
        any(m.get("role") == "tool" for m in r.get("messages", []))
        for r in o.server.requests()), 180)
    time.sleep(2)


def r_embedded_error(o: OpenClaw):
    p = o.embedded("please make the file")
    wait_for("the embedded run to exit", lambda: p.poll() is not None, 300)


def r_gateway_in_tool(o: OpenClaw):
    o.gateway()
    o.via_gateway("please make the file")
    wait_for("the exec tool to start", lambda: o.marker("tool").exists(), 180)
    time.sleep(1.5)


def r_gateway_self_recovered(o: OpenClaw):
    r_gateway_in_tool(o)
    o.kill_all()
    o.procs.clear()
    log("openclaw: gateway killed in a tool; starting it again to watch its own recovery")
    o.gateway()
    wait_for("OpenClaw's own restart recovery to finish the turn",
             lambda: o.has_event(lambda e: is_final_text(e, "Recovered and done")), 240)
    time.sleep(3)


def tool_script(box, cmd):
    return [
        # OpenClaw's own recovery (and boot-resume's message) say so; it answers first.
        step(reply_text("Recovered and done."), when=says("previous turn was interrupted"),
             repeat=True),
        step(reply_text("Done: wrote out.txt."), when=after("call01")),
        step(reply_call("call01", "exec", {"command": cmd}), when=says("please make the file")),
    ]


def scenarios(_):
    return {
        "embedded-finished": (
            "an embedded `agent --local` run that finished", "finished", {},
            lambda box: tool_script(box, "echo hi > out.txt"), r_embedded_finished),
        "embedded-killed-in-tool": (
            "an embedded `agent --local` run killed while its exec tool ran (OpenClaw never "
            "recovers these)", "interrupted_tool_call", {},
            lambda box: tool_script(box, sleeper(box, "tool")), r_embedded_in_tool),
        "embedded-killed-waiting-first-answer": (
            "an embedded run killed while the first model request was open", "pending_input", {},
            lambda box: [step(reply_text("late"), when=says("please make the file"),
                              delay_ms=600000)], r_embedded_first_answer),
        "embedded-killed-waiting-after-tool": (
            "an embedded run killed while the request carrying the tool result was open",
            "interrupted_after_tool_result", {},
            lambda box: [step(reply_text("late"), when=after("call01"), delay_ms=600000)]
            + tool_script(box, "echo hi > out.txt")[2:], r_embedded_after_tool),
        "embedded-api-error": (
            "an embedded run whose every model request got 400 (context overflow)",
            "failed", {"transient": False},
            lambda box: [step({"kind": "status", "status": 400,
                               "body": "This model's maximum context length is 128000 tokens. "
                                       "However, your messages resulted in 215029 tokens."},
                              repeat=True)], r_embedded_error),
        "gateway-killed-in-tool": (
            "a gateway run killed (gateway SIGKILLed) while its exec tool ran: OpenClaw's own "
            "restart recovery owns it", "skipped", {"why": "self_recovering"},
            lambda box: tool_script(box, sleeper(box, "tool")), r_gateway_in_tool),
        "gateway-self-recovered": (
            "a gateway run killed in a tool, then the gateway restarted and OpenClaw resumed "
            "and finished the turn itself", "finished", {},
            lambda box: tool_script(box, sleeper(box, "tool", 300)), r_gateway_self_recovered),
    }


def run(name: str, spec, box: Path, bins: dict) -> dict:
    ending, verdict, extra, build, runner = spec
    server = Server({"steps": build(box) + [FALLBACK]}, box)
    o = OpenClaw(box, bins, server)
    try:
        runner(o)
    finally:
        o.kill_all()
        server.stop()
    agent_dir = o.db().parent
    files = [f for f in sorted(agent_dir.iterdir())
             if f.name in ("openclaw-agent.sqlite", "openclaw-agent.sqlite-wal")]
    if not files:
        raise RuntimeError(f"openclaw/{name}: no database was written")
    return {"ending": ending, "verdict": verdict, **extra, "files": files, "root": box,
            "requests": server.count()}
