"""OpenCode scenarios: the real `opencode run` against the scripted OpenAI-compatible server
(crates/testkit), SIGKILLed at known points; and its own `run --continue` of a killed session,
with the tool's side effect counted.

OpenCode keeps everything in one SQLite database in WAL mode,
$XDG_DATA_HOME/opencode/opencode.db (here $HOME/.local/share/opencode). Before each scenario
the sandbox's database is created by OpenCode itself (`opencode session list` runs its
migrations), then checkpointed and vacuumed by this script, so the committed main file holds
the schema and the scenario's own rows sit in the -wal file as the kill left them.

The database and its WAL are stored zstd-compressed (opencode.db.zst, opencode.db-wal.zst: about
1 MB raw per scenario, ~15 KB compressed); endings.json has each raw file's size and SHA-256.

Every tool call is `bash`, whose command appends a line to count.txt in the project: the number
of lines is the number of times the tool really ran.
"""
from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path

from harness import Server, base_env, kill_tree, log, wait_for

COMPRESS = ("opencode.db", "opencode.db-wal")
PROMPT = "please make the file"
MODEL = "scripted-model"


def step(reply, when=None, repeat=False, delay_ms=0):
    s = {"reply": reply, "repeat": repeat, "delay_ms": delay_ms}
    if when:
        s["when"] = when
    return s


def text(t):
    return {"kind": "response", "text": t}


def call(cid, cmd):
    return {"kind": "response", "tool_calls": [{"id": cid, "name": "bash", "arguments": {
        "command": cmd, "description": "append a line to count.txt"}}]}


def main_turn(cond):
    """A request of the agent itself (with tools), not the title generator's (without)."""
    return {"kind": "all", "of": [{"kind": "has_tools", "yes": True}, cond]}


def says(t):
    return {"kind": "any_message_contains", "text": t}


def after(cid):
    return {"kind": "any_tool_result", "call_id": cid}


FALLBACK = step(text("ok"), repeat=True)

# Startup work that would reach past 127.0.0.1 (models.dev catalogue, updates, LSP downloads,
# sharing, Claude Code compatibility files) switched off.
QUIET = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    # Without it OpenCode 1.18.33 looks up @opencode-ai/plugin, web-tree-sitter and
    # @opentui/core in the npm registry at every start (they land in ~/.npm/_cacache); with
    # npm's offline switch it asks nothing and the run works the same. The provider package
    # @ai-sdk/openai-compatible is not fetched at all: nothing is installed anywhere.
    "npm_config_offline": "true",
}


class OpenCode:
    def __init__(self, box: Path, bins: dict, server: Server):
        self.box = box
        self.home = box / "home"
        self.work = box / "work"
        self.data = self.home / ".local" / "share" / "opencode"
        self.home.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.bins = bins
        self.server = server
        (self.work / "opencode.json").write_text(json.dumps({
            "$schema": "https://opencode.ai/config.json",
            "provider": {"scripted": {
                "npm": "@ai-sdk/openai-compatible", "name": "Scripted",
                "options": {"baseURL": server.url + "/v1", "apiKey": "sk-test"},
                "models": {MODEL: {"name": "Scripted"}}}},
            "model": f"scripted/{MODEL}",
            "permission": {"bash": "allow"},
            "autoupdate": False,
            "share": "disabled",
        }, indent=1))
        self.env = base_env(self.home, bins["NODE_BIN"])
        # OpenCode takes the project from $PWD, not from the working directory.
        self.env.update({"PWD": str(self.work), **QUIET})
        self.proc = None

    def prepare_db(self):
        """OpenCode creates its database (migrations only), then it is checkpointed here."""
        r = subprocess.run([self.bins["OPENCODE_BIN"], "session", "list"], cwd=self.work,
                           env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=120)
        db = self.data / "opencode.db"
        if not db.exists():
            raise RuntimeError(f"opencode session list made no database: {r.stderr[-500:]}")
        c = sqlite3.connect(str(db))
        try:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            c.execute("VACUUM")
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            c.close()
        for suffix in ("-wal", "-shm"):
            p = Path(str(db) + suffix)
            if p.exists() and p.stat().st_size == 0:
                p.unlink()

    def run(self, *args: str):
        argv = [self.bins["OPENCODE_BIN"], "run", *args]
        log("opencode " + " ".join(argv[1:]))
        self.proc = subprocess.Popen(
            argv, cwd=self.work, env=self.env, stdin=subprocess.DEVNULL,
            stdout=open(self.box / "opencode.out", "a"),
            stderr=open(self.box / "opencode.err", "a"), start_new_session=True)

    def prompt(self, p: str = PROMPT):
        self.run(p)

    def files(self) -> list[Path]:
        """The database with its -wal (the -shm is an index SQLite rebuilds: left out)."""
        return sorted(p for p in self.data.glob("opencode.db*") if not p.name.endswith("-shm"))

    def count(self) -> int:
        f = self.work / "count.txt"
        return len(f.read_text().splitlines()) if f.exists() else 0

    def kill(self):
        if self.proc and self.proc.poll() is None:
            kill_tree(self.proc.pid)
            self.proc.wait()

    def exited(self, timeout=120):
        wait_for("opencode to exit", lambda: self.proc.poll() is not None, timeout)
        return self.proc.returncode


def counted(box: Path, sleep_first=False) -> str:
    """Paths relative to the project (the tool runs there): OpenCode asks before a command
    touches a file outside the project, and `opencode run` takes that as a refusal."""
    c = "echo run >> count.txt"
    if sleep_first:
        c += "; if [ ! -e tool.started ]; then touch tool.started; sleep 300; fi"
    return c


def tool_script(box, sleep_first=False, after_reply=None):
    """The prompt gets a bash call; its result gets `after_reply` (default: an answer). The
    call step repeats, so a later request that carries the prompt but no result for the call
    is answered with the same call again."""
    return [step(after_reply or text("Done: wrote the line."), when=after("call01")),
            step(call("call01", counted(box, sleep_first)), when=main_turn(says(PROMPT)),
                 repeat=True)]


def main_requests(o: OpenCode):
    return [r for r in o.server.requests() if r.get("tools")]


def r_finished(o: OpenCode):
    o.prompt()
    o.exited()


def r_in_tool(o: OpenCode):
    o.prompt()
    wait_for("the bash tool to start", lambda: (o.work / "tool.started").exists(), 120)
    time.sleep(1.5)
    o.kill()


def r_first_answer(o: OpenCode):
    o.prompt()
    wait_for("the first model request", lambda: len(main_requests(o)) >= 1, 120)
    time.sleep(2)
    o.kill()


def r_after_tool(o: OpenCode):
    o.prompt()
    wait_for("the request carrying the tool result", lambda: any(
        any(m.get("role") == "tool" for m in r.get("messages", []))
        for r in o.server.requests()), 120)
    time.sleep(2)
    o.kill()


def r_exits(o: OpenCode):
    o.prompt()
    o.exited(300)


def r_continue_after_kill_in_tool(o: OpenCode):
    """Killed in the tool; then `opencode run --continue …` runs to its end."""
    r_in_tool(o)
    o.extra["count_after_kill"] = o.count()
    before = len(o.server.requests())
    o.run("--continue", "Your previous turn was interrupted. Carry on.")
    o.extra["continue_exit"] = o.exited()
    o.extra["count_after_continue"] = o.count()
    resumed = [r for r in o.server.requests()[before:] if r.get("tools")]
    if resumed:
        o.extra["continue_request_messages"] = summary(resumed[0])


def r_continue_after_kill_waiting_after_tool(o: OpenCode):
    """Killed while the request carrying the tool result was open; then continued."""
    r_after_tool(o)
    o.extra["count_after_kill"] = o.count()
    before = len(o.server.requests())
    o.run("--continue", "Your previous turn was interrupted. Carry on.")
    o.extra["continue_exit"] = o.exited()
    o.extra["count_after_continue"] = o.count()
    resumed = [r for r in o.server.requests()[before:] if r.get("tools")]
    if resumed:
        o.extra["continue_request_messages"] = summary(resumed[0])


def summary(req) -> list[str]:
    out = []
    for m in req.get("messages", []):
        c = m.get("content")
        if isinstance(c, list):
            c = " ".join(p.get("text", "") for p in c if isinstance(p, dict))
        s = f"{m.get('role')}:"
        if m.get("tool_calls"):
            s += "tool_calls=" + ",".join(t.get("id", "?") for t in m["tool_calls"])
        elif m.get("role") == "tool":
            s += f"result({m.get('tool_call_id')}):" + str(c)[:40]
        else:
            s += str(c)[:40].replace("\n", " ")
        out.append(s)
    return out


HANG = 600000
LONG = "A long answer that streams slowly. " * 20


def scenarios(_):
    return {
        "finished": ("an `opencode run` that finished (a bash call, its result, an answer)",
                     "finished", {}, lambda box: tool_script(box), r_finished),
        "killed-in-tool": ("killed while the bash tool ran", "interrupted_tool_call", {},
                           lambda box: tool_script(box, sleep_first=True), r_in_tool),
        "killed-waiting-first-answer": (
            "killed while the first model request was open (OpenCode had already written the "
            "assistant message it was waiting for)", "interrupted_stream", {},
            lambda box: [step(text("late"), when=main_turn(says(PROMPT)), delay_ms=HANG)],
            r_first_answer),
        "killed-mid-stream": (
            "killed while the first answer streamed (8 chunks sent, then silence)",
            "interrupted_stream", {},
            lambda box: [step({"kind": "stream_then_hang", "after_chunks": 8,
                               "response": {"text": LONG}}, when=main_turn(says(PROMPT)))],
            r_first_answer),
        "killed-waiting-after-tool": (
            "killed while the request carrying the tool result was open",
            "interrupted_after_tool_result", {},
            lambda box: [step(text("late"), when=after("call01"), delay_ms=HANG)]
            + tool_script(box)[1:], r_after_tool),
        "killed-mid-stream-after-tool": (
            "killed while the answer after the tool result streamed",
            "interrupted_after_tool_result", {},
            lambda box: tool_script(box, after_reply={
                "kind": "stream_then_hang", "after_chunks": 8, "response": {"text": LONG}}),
            r_after_tool),
        "api-error-context-overflow": (
            "every request answered 400: context length exceeded", "failed",
            {"transient": False},
            lambda box: [step({"kind": "status", "status": 400,
                               "error_type": "invalid_request_error",
                               "body": "This model's maximum context length is 128000 tokens. "
                                       "However, your messages resulted in 215029 tokens."},
                              repeat=True)], r_exits),
        "continued-after-kill-in-tool": (
            "killed while the bash tool ran, then continued by `opencode run --continue` to "
            "its end", "finished", {},
            lambda box: tool_script(box, sleep_first=True), r_continue_after_kill_in_tool),
        "continued-after-kill-waiting-after-tool": (
            "killed while the request carrying the tool result was open, then continued by "
            "`opencode run --continue` to its end", "finished", {},
            lambda box: [step(text("late"), when=after("call01"), delay_ms=HANG)]
            + tool_script(box), r_continue_after_kill_waiting_after_tool),
    }


def run(name: str, spec, box: Path, bins: dict) -> dict:
    ending, verdict, extra, build, runner = spec
    server = Server({"steps": build(box) + [FALLBACK]}, box)
    o = OpenCode(box, bins, server)
    o.extra = {}
    try:
        o.prepare_db()
        runner(o)
    finally:
        o.kill()
        server.stop()
    files = o.files()
    if not files:
        raise RuntimeError(f"opencode/{name}: no database was written")
    out = {"ending": ending, "verdict": verdict, **extra, "files": files, "root": box,
           "requests": server.count(), "tool_runs": o.count()}
    if o.proc is not None and o.proc.returncode is not None and o.proc.returncode >= 0:
        out["exit"] = o.proc.returncode
    out.update(o.extra)
    return out
