"""Shared pieces of the capture scripts: the scripted model server, programs run in tmux or
as plain children, waiting for a known point, SIGKILL of a whole process tree, scrubbing.

Standard library only. Every program is pointed at 127.0.0.1 and has its telemetry and
update checks switched off by the caller's environment.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def log(*a):
    print("capture:", *a, file=sys.stderr, flush=True)


class Timeout(Exception):
    pass


def wait_for(what: str, pred, timeout: float = 60.0, every: float = 0.1):
    """Polls `pred` until it returns a truthy value; raises Timeout naming `what`."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise Timeout(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def server_bin() -> str:
    b = os.environ.get("SCRIPTED_MODEL_SERVER")
    if b:
        return b
    target = os.environ.get("CARGO_TARGET_DIR", str(REPO / "target"))
    for prof in ("release", "debug"):
        p = Path(target) / prof / "scripted-model-server"
        if p.exists():
            return str(p)
    raise SystemExit("scripted-model-server not built: cargo build -p lazarus-testkit --bin scripted-model-server")


class Server:
    """The scripted model server (crates/testkit) as a child process."""

    def __init__(self, script: dict, workdir: Path, program: list[str] | None = None):
        """`program`: another server taking the same flags and printing the same first line
        (default: the testkit's scripted-model-server)."""
        self.dir = workdir
        self.script_path = workdir / "script.json"
        self.log_path = workdir / "requests.jsonl"
        self.script_path.write_text(json.dumps(script))
        self.proc = subprocess.Popen(
            (program or [server_bin()])
            + ["--script", str(self.script_path), "--requests-log", str(self.log_path)],
            stdout=subprocess.PIPE, stderr=open(workdir / "server.err", "w"), text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            raise SystemExit(f"scripted-model-server did not start: {line!r}")
        self.url = line[len("listening on "):]

    def requests(self) -> list[dict]:
        try:
            text = self.log_path.read_text()
        except FileNotFoundError:
            return []
        out = []
        for l in text.splitlines():
            try:
                out.append(json.loads(l))
            except ValueError:
                pass
        return out

    def count(self) -> int:
        return len(self.requests())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc), children first."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    out: list[int] = []

    def walk(p):
        for c in kids.get(p, []):
            walk(c)
        out.append(p)

    walk(pid)
    return out


def kill_tree(pid: int):
    """SIGKILL `pid` and all its descendants at once (like a power cut for that tree)."""
    procs = descendants(pid)
    for p in procs:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    log(f"SIGKILL {len(procs)} processes under pid {pid}")


def wait_gone(pids: list[int], timeout: float = 10.0):
    """Waits until every pid has died and been reaped (a zombie still looks alive)."""
    wait_for("killed processes to be reaped",
             lambda: not any(os.path.exists(f"/proc/{p}") for p in pids), timeout)


class Tmux:
    """A program in a detached tmux session (a real terminal for interactive UIs)."""

    def __init__(self, name: str, argv: list[str], env: dict, cwd: Path, width=220, height=50):
        self.name = name
        self.socket = str(Path(tempfile.gettempdir()) / f"lazarus-capture-{os.getpid()}.tmux")
        envargs = [f"{k}={v}" for k, v in env.items()]
        cmd = ["env", "-i"] + envargs + argv
        subprocess.run(["tmux", "-S", self.socket, "new-session", "-d", "-s", name,
                        "-x", str(width), "-y", str(height), "-c", str(cwd),
                        " ".join(shell_quote(a) for a in cmd)], check=True)
        self.pid = int(subprocess.run(["tmux", "-S", self.socket, "display", "-p", "-t", name,
                                       "#{pane_pid}"], check=True, capture_output=True,
                                      text=True).stdout.strip())

    def screen(self) -> str:
        r = subprocess.run(["tmux", "-S", self.socket, "capture-pane", "-p", "-t", self.name],
                           capture_output=True, text=True)
        return r.stdout

    def keys(self, *keys: str, literal=False):
        args = ["tmux", "-S", self.socket, "send-keys", "-t", self.name]
        if literal:
            args.append("-l")
        subprocess.run(args + list(keys), check=True)

    def type(self, text: str):
        self.keys(text, literal=True)
        time.sleep(0.3)
        self.keys("Enter")

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def kill(self):
        procs = descendants(self.pid)
        kill_tree(self.pid)
        try:
            wait_gone(procs)
        except Timeout as e:
            log(f"warning: {e}")

    def close(self):
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)


def shell_quote(s: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_./:=@%+,-]+", s):
        return s
    return "'" + s.replace("'", "'\\''") + "'"


def base_env(home: Path, node_bin: str) -> dict:
    """A clean environment: own HOME, loopback only, no proxies, telemetry off."""
    path = f"{Path(node_bin).parent}:/usr/local/bin:/usr/bin:/bin"
    return {
        "HOME": str(home),
        "PATH": path,
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "NO_PROXY": "127.0.0.1,localhost",
        "DO_NOT_TRACK": "1",
    }


def scrub_text(text: str, replacements: list[tuple[str, str]]) -> str:
    for old, new in replacements:
        text = text.replace(old, new)
    return text


def copy_scrubbed(src: Path, dst: Path, replacements):
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(scrub_text(src.read_text(), replacements))


def mcp_counter(count_file: Path) -> dict:
    """The MCP test server `crates/testkit/mcp-servers/counter_server.py` (official Python SDK,
    from the virtualenv scripts/mcp-servers/setup.sh makes) over stdio: its `bump` tool appends
    a line to `count_file` and then sleeps `sleep_secs`, so a kill mid-call leaves one counted
    effect. Returns {"command", "args", "env"} for a client's server table."""
    cache = os.environ.get("LAZARUS_MCP_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lazarus-mcp")
    python = Path(cache) / "venv/bin/python"
    if not python.exists():
        raise SystemExit(f"{python} is missing: run scripts/mcp-servers/setup.sh first")
    return {"command": str(python),
            "args": [str(REPO / "crates/testkit/mcp-servers/counter_server.py"), "stdio"],
            "env": {"COUNTER_FILE": str(count_file)}}


# The scripted model server's script, in the testkit's JSON (crates/testkit/src/script.rs).
def reply_text(text, reasoning=None):
    """A text answer (with a reasoning item first when `reasoning` is given)."""
    r = {"kind": "response", "text": text}
    if reasoning:
        r["reasoning"] = reasoning
    return r


def step(reply, when=None, repeat=False, delay_ms=0):
    s = {"reply": reply, "repeat": repeat, "delay_ms": delay_ms}
    if when:
        s["when"] = when
    return s


def says(text):
    """Matches a request where any message contains `text`."""
    return {"kind": "any_message_contains", "text": text}


def after(cid):
    """Matches a request that carries the result of call `cid` anywhere."""
    return {"kind": "any_tool_result", "call_id": cid}


# Anything else (title generation, a stray request): a short answer, so nothing hangs on 422.
FALLBACK = step(reply_text("ok"), repeat=True)
