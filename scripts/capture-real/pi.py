"""pi scenarios: the real `pi -p` against the scripted OpenAI-compatible server, SIGKILLed at
known points."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from harness import Server, base_env, kill_tree, wait_for, FALLBACK, after, reply_text, says, step  # noqa: F401


def reply_call(cid, cmd):
    return {"kind": "response", "tool_calls": [{"id": cid, "name": "bash",
                                                "arguments": {"command": cmd}}]}


class Pi:
    def __init__(self, box: Path, bins: dict, server: Server):
        self.box = box
        self.home = box / "home"
        self.work = box / "work"
        agent = self.home / ".pi" / "agent"
        agent.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.bins = bins
        self.server = server
        (agent / "models.json").write_text(json.dumps({"providers": {"scripted": {
            "baseUrl": server.url + "/v1", "api": "openai-completions", "apiKey": "sk-test",
            "models": [{"id": "scripted-model", "name": "Scripted", "reasoning": False,
                        "input": ["text"], "contextWindow": 128000, "maxTokens": 4096,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]}}}))
        (agent / "settings.json").write_text(json.dumps(
            {"defaultProvider": "scripted", "defaultModel": "scripted-model"}))
        self.env = base_env(self.home, bins["NODE_BIN"])
        self.env["PI_OFFLINE"] = "1"
        self.proc = None

    def print_mode(self, prompt: str):
        self.proc = subprocess.Popen(
            [self.bins["PI_BIN"], "-p", "--provider", "scripted", "--model", "scripted-model",
             prompt], cwd=self.work, env=self.env, stdin=subprocess.DEVNULL,
            stdout=open(self.box / "pi.out", "a"), stderr=open(self.box / "pi.err", "a"),
            start_new_session=True)

    def sessions(self) -> list[Path]:
        d = self.home / ".pi" / "agent" / "sessions"
        return sorted(d.rglob("*.jsonl")) if d.exists() else []

    def kill(self):
        if self.proc and self.proc.poll() is None:
            kill_tree(self.proc.pid)
            self.proc.wait()


def sleeper(box, name):
    return f"touch {box / (name + '.started')}; sleep 300"


def r_finished(p: Pi):
    p.print_mode("please make the file")
    wait_for("pi to exit", lambda: p.proc.poll() is not None, 120)


def r_in_tool(p: Pi):
    p.print_mode("please make the file")
    wait_for("the bash tool to start", lambda: (p.box / "tool.started").exists(), 120)
    time.sleep(1.5)


def r_first_answer(p: Pi):
    p.print_mode("please make the file")
    wait_for("the first model request", lambda: p.server.count() >= 1, 120)
    time.sleep(2)


def r_after_tool(p: Pi):
    p.print_mode("please make the file")
    wait_for("the request with the tool result", lambda: any(
        any(m.get("role") == "tool" for m in r.get("messages", []))
        for r in p.server.requests()), 120)
    time.sleep(2)


def tool_script(box, cmd):
    return [step(reply_text("Done: wrote out.txt."), when=after("call01")),
            step(reply_call("call01", cmd), when=says("please make the file"))]


def scenarios(_):
    return {
        "finished": ("a `pi -p` run that finished", "finished", {},
                     lambda box: tool_script(box, "echo hi > out.txt"), r_finished),
        "killed-in-tool": ("killed while the bash tool ran", "interrupted_tool_call", {},
                           lambda box: tool_script(box, sleeper(box, "tool")), r_in_tool),
        "killed-waiting-first-answer": (
            "killed while the first model request was open: pi writes the session file only "
            "once the first answer arrived, so nothing is left to resume", "absent", {},
            lambda box: [step(reply_text("late"), when=says("please make the file"),
                              delay_ms=600000)], r_first_answer),
        "killed-waiting-after-tool": (
            "killed while the request carrying the tool result was open",
            "interrupted_after_tool_result", {},
            lambda box: [step(reply_text("late"), when=after("call01"), delay_ms=600000)]
            + tool_script(box, "echo hi > out.txt")[1:], r_after_tool),
        "killed-mid-stream-after-tool": (
            "killed while the answer after the tool result streamed",
            "interrupted_after_tool_result", {},
            lambda box: [step({"kind": "stream_then_hang", "after_chunks": 8,
                               "response": {"text": "A long answer " * 30}},
                              when=after("call01"))]
            + tool_script(box, "echo hi > out.txt")[1:], r_after_tool),
        "api-error-context-overflow": (
            "every request answered 400: context length exceeded", "failed",
            {"transient": False},
            lambda box: [step({"kind": "status", "status": 400,
                               "error_type": "invalid_request_error",
                               "body": "This model's maximum context length is 128000 tokens. "
                                       "However, your messages resulted in 215029 tokens."},
                              repeat=True)], r_finished),
    }


def run(name: str, spec, box: Path, bins: dict) -> dict:
    ending, verdict, extra, build, runner = spec
    server = Server({"steps": build(box) + [FALLBACK]}, box)
    p = Pi(box, bins, server)
    try:
        runner(p)
    finally:
        p.kill()
        server.stop()
    files = p.sessions()
    if not files and verdict != "absent":
        raise RuntimeError(f"pi/{name}: no session file was written")
    return {"ending": ending, "verdict": verdict, **extra, "files": files, "root": box,
            "requests": server.count()}
