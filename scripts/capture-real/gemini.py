"""Gemini CLI scenarios: the real `gemini -p` against the scripted Gemini API server
(gemini_server.py: generateContent / streamGenerateContent with alt=sse), SIGKILLed at known
points; and its own `--resume latest` of a killed session, with the tool's side effect counted.

Every tool call is `run_shell_command`, whose command appends a line to count.txt in the
sandbox: the number of lines is the number of times the tool really ran.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from harness import HERE, Server, base_env, kill_tree, log, wait_for

MODEL = "scripted-model"  # given with -m, so the CLI's model router sends nothing first
PROMPT = "please make the file"


def cond_text(text):
    return {"kind": "any_text_contains", "text": text}


def cond_result(name="run_shell_command"):
    return {"kind": "function_response", "name": name}


def step(reply, when=None, repeat=False, delay_ms=0):
    s = {"reply": reply, "repeat": repeat, "delay_ms": delay_ms}
    if when:
        s["when"] = when
    return s


def text(t, thought=None):
    r = {"kind": "text", "text": t}
    if thought:
        r["thought"] = thought
    return r


def call(cid, cmd):
    return {"kind": "call", "name": "run_shell_command", "id": cid, "args": {"command": cmd}}


FALLBACK = step(text("ok"), repeat=True)


class Gemini:
    def __init__(self, box: Path, bins: dict, server: Server):
        self.box = box
        self.home = box / "home"
        self.gemini_home = self.home / ".gemini"
        self.work = box / "work"
        self.gemini_home.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.bins = bins
        self.server = server
        # Without selectedType it exits 41 ("Invalid auth method selected"); with folder trust
        # on, an untrusted folder turns yolo mode off.
        (self.gemini_home / "settings.json").write_text(json.dumps({
            "security": {"auth": {"selectedType": "gemini-api-key"},
                         "folderTrust": {"enabled": False}},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
        }, indent=1))
        self.env = base_env(self.home, bins["NODE_BIN"])
        self.env.update({"GOOGLE_GEMINI_BASE_URL": server.url, "GEMINI_API_KEY": "dummy",
                         "GEMINI_CLI_NO_RELAUNCH": "true"})
        self.proc = None

    def run(self, *args: str):
        argv = [self.bins["GEMINI_BIN"], *args, "--approval-mode", "yolo", "-m", MODEL]
        log("gemini " + " ".join(argv[1:]))
        self.proc = subprocess.Popen(
            argv, cwd=self.work, env=self.env, stdin=subprocess.DEVNULL,
            stdout=open(self.box / "gemini.out", "a"), stderr=open(self.box / "gemini.err", "a"),
            start_new_session=True)

    def prompt(self, p: str = PROMPT):
        self.run("-p", p)

    def sessions(self) -> list[Path]:
        d = self.gemini_home
        return sorted(p for p in d.rglob("*") if p.is_file()
                      and p.name not in ("installation_id", "settings.json"))

    def count(self) -> int:
        f = self.box / "count.txt"
        return len(f.read_text().splitlines()) if f.exists() else 0

    def kill(self):
        if self.proc and self.proc.poll() is None:
            kill_tree(self.proc.pid)
            self.proc.wait()

    def exited(self, timeout=120):
        wait_for("gemini to exit", lambda: self.proc.poll() is not None, timeout)
        return self.proc.returncode


def counted(box: Path, sleep_first=False) -> str:
    """The tool's command: one line into count.txt per run; with `sleep_first`, the first run
    marks tool.started and sleeps (the kill lands then), a later run returns at once."""
    c = f"echo run >> {box / 'count.txt'}"
    if sleep_first:
        s = box / "tool.started"
        c += f"; if [ ! -e {s} ]; then touch {s}; sleep 300; fi"
    return c


def tool_script(box, sleep_first=False, after=None):
    """The prompt gets a run_shell_command call; its result gets `after` (default: an answer).
    The call step repeats: a request that carries the prompt but no result (the program's own
    resume of a session whose call was never recorded) is answered with the call again, as a
    model that does not see the call would."""
    return [step(after or text("Done: wrote the line."), when=cond_result()),
            step(call("call01", counted(box, sleep_first)), when=cond_text(PROMPT),
                 repeat=True)]


def r_finished(g: Gemini):
    g.prompt()
    g.exited()


def r_in_tool(g: Gemini):
    g.prompt()
    wait_for("the shell tool to start", lambda: (g.box / "tool.started").exists(), 120)
    time.sleep(1.5)
    g.kill()


def r_first_answer(g: Gemini):
    g.prompt()
    wait_for("the first model request", lambda: g.server.count() >= 1, 120)
    time.sleep(2)
    g.kill()


def r_after_tool(g: Gemini):
    g.prompt()
    wait_for("the request carrying the tool result", lambda: any(
        any("functionResponse" in p for c in (r.get("body") or {}).get("contents", [])
            for p in c.get("parts", []))
        for r in g.server.requests()), 120)
    time.sleep(2)
    g.kill()


def r_exits(g: Gemini):
    g.prompt()
    g.exited(300)


def r_resume_after_kill_in_tool(g: Gemini):
    """Killed in the tool; then `gemini --resume latest -p …` runs to its end."""
    r_in_tool(g)
    g.extra["count_after_kill"] = g.count()
    g.extra["requests_before_resume"] = g.server.count()
    g.run("--resume", "latest", "-p", "Your previous turn was interrupted. Carry on.")
    g.extra["resume_exit"] = g.exited()
    g.extra["count_after_resume"] = g.count()
    resumed = g.server.requests()[g.extra["requests_before_resume"]:]
    if resumed:
        g.extra["resume_request_contents"] = summary(resumed[0]["body"])


def r_resume_after_kill_waiting_after_tool(g: Gemini):
    """Killed while the request carrying the tool result was open; then resumed to its end."""
    r_after_tool(g)
    g.extra["count_after_kill"] = g.count()
    g.extra["requests_before_resume"] = g.server.count()
    g.run("--resume", "latest", "-p", "Your previous turn was interrupted. Carry on.")
    g.extra["resume_exit"] = g.exited()
    g.extra["count_after_resume"] = g.count()
    resumed = g.server.requests()[g.extra["requests_before_resume"]:]
    if resumed:
        g.extra["resume_request_contents"] = summary(resumed[0]["body"])


def summary(body) -> list[str]:
    """What a request's contents held, one word per part (role:kind)."""
    out = []
    for c in (body or {}).get("contents", []):
        for p in c.get("parts", []):
            kind = next((k for k in ("functionCall", "functionResponse", "text") if k in p), "?")
            if kind == "text":
                kind = "text:" + p["text"][:40].replace("\n", " ")
            out.append(f"{c.get('role')}:{kind}")
    return out


HANG = {"kind": "hang"}
LONG = "A long answer that streams slowly. " * 20


def scenarios(_):
    return {
        "finished": ("a `gemini -p` run that finished (a shell call, its result, an answer)",
                     "finished", {}, lambda box: tool_script(box), r_finished),
        "killed-in-tool": ("killed while run_shell_command ran", "interrupted_tool_call", {},
                           lambda box: tool_script(box, sleep_first=True), r_in_tool),
        "killed-waiting-first-answer": (
            "killed while the first model request was open", "pending_input", {},
            lambda box: [step(HANG, when=cond_text(PROMPT))], r_first_answer),
        "killed-mid-stream": (
            "killed while the first answer streamed (8 chunks sent, then silence)",
            "pending_input", {},
            lambda box: [step({"kind": "stream_then_hang", "text": LONG, "after_chunks": 8},
                              when=cond_text(PROMPT))], r_first_answer),
        "killed-waiting-after-tool": (
            "killed while the request carrying the tool result was open",
            "interrupted_after_tool_result", {},
            lambda box: tool_script(box, after=HANG), r_after_tool),
        "killed-mid-stream-after-tool": (
            "killed while the answer after the tool result streamed",
            "interrupted_after_tool_result", {},
            lambda box: tool_script(box, after={"kind": "stream_then_hang", "text": LONG,
                                                "after_chunks": 8}), r_after_tool),
        "stream-cut-by-server": (
            "the server dropped the connection mid-stream on every request; the CLI gave up "
            "by itself (not killed). The file holds no error: the prompt is rolled back by a "
            "`$set messages` exactly as after the 400 of api-error-context-overflow, so "
            "transient cannot be told from the file", "failed",
            {"transient": True, "expect": "failed/permanent",
             "expect_why": "the file holds the same bytes as after the permanent 400 of "
                           "api-error-context-overflow (the prompt rolled back by `$set "
                           "messages`, no error record), so the cause cannot be read from it; "
                           "boot-resume never guesses a failure transient"},
            lambda box: [step({"kind": "stream_then_close", "text": LONG, "after_chunks": 8},
                              when=cond_text(PROMPT), repeat=True)], r_exits),
        "api-error-context-overflow": (
            "every request answered 400 INVALID_ARGUMENT: input token count exceeds the limit",
            "failed", {"transient": False},
            lambda box: [step({"kind": "status", "status": 400, "reason": "INVALID_ARGUMENT",
                               "message": "The input token count (1215029) exceeds the maximum "
                                          "number of tokens allowed (1048576)."},
                              repeat=True)], r_exits),
        "resumed-after-kill-in-tool": (
            "killed while run_shell_command ran, then resumed by `gemini --resume latest -p` "
            "to its end", "finished", {},
            lambda box: tool_script(box, sleep_first=True), r_resume_after_kill_in_tool),
        "resumed-after-kill-waiting-after-tool": (
            "killed while the request carrying the tool result was open, then resumed by "
            "`gemini --resume latest -p` to its end", "finished", {},
            lambda box: [step(HANG, when=cond_result())] + tool_script(box),
            r_resume_after_kill_waiting_after_tool),
    }


def run(name: str, spec, box: Path, bins: dict) -> dict:
    ending, verdict, extra, build, runner = spec
    server = Server({"steps": build(box) + [FALLBACK]}, box,
                    program=[sys.executable, str(HERE / "gemini_server.py")])
    g = Gemini(box, bins, server)
    g.extra = {}
    try:
        runner(g)
    finally:
        g.kill()
        server.stop()
    files = g.sessions()
    if not any("/chats/" in str(f) for f in files):
        log(f"gemini-cli/{name}: no chat file was written")
    out = {"ending": ending, "verdict": verdict, **extra, "files": files, "root": box,
           "requests": server.count(), "tool_runs": g.count()}
    if g.proc is not None and g.proc.returncode is not None and g.proc.returncode >= 0:
        out["exit"] = g.proc.returncode
    out.update(g.extra)
    return out
