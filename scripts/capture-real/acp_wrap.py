"""`lazarus acp --wrap` in front of the real Gemini CLI (`gemini --acp`) and OpenCode
(`opencode acp`), each talking only to a scripted model server, driven by an editor written
here (JSON-RPC over the proxy's stdin and stdout, standard library only).

Each scenario kills something at one step of a shell call and checks what a person in the
editor would see and what the world holds:

  gemini-permission    the agent killed while it asks permission for the call: the call did
                       not run (count 0), the editor is told so, the turn goes on
  gemini-in-tool       the agent killed inside the call: the editor sees the call failed and
                       in doubt, the agent is told, the turn ends, the effect happened once
  gemini-after-tool    the agent killed after the call finished: nothing in doubt, count 1
  gemini-proxy-killed  the proxy and the agent killed together inside the call, a new proxy,
                       session/load within the same minute (Gemini CLI alone answers "No
                       previous sessions found"): the history comes back from the proxy's
                       journal, the call in doubt, the next prompt goes on, count 1
  opencode-permission  as gemini-permission
  opencode-in-tool     as gemini-in-tool (OpenCode has session/resume)
  opencode-after-tool  as gemini-after-tool
  opencode-proxy-killed  as gemini-proxy-killed: OpenCode's load replays the call in_progress
                       and leaves it there; the editor is told it is failed, in doubt

Usage: acp_wrap.py [SCENARIO...]   (env LAZARUS, SCRIPTED_MODEL_SERVER, NODE_BIN, GEMINI_BIN,
OPENCODE_BIN, as scripts/e2e-real-agents.sh exports them). Exits non-zero on the first failure.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemini as g  # noqa: E402
import opencode as oc  # noqa: E402
from harness import HERE, Server, descendants, kill_tree, log, wait_for, wait_gone  # noqa: E402

LAZARUS = os.environ.get("LAZARUS", "lazarus")
INTERRUPTED = "[System] Your previous turn was interrupted"
TIMEOUT = 120


class Failed(Exception):
    pass


def check(ok, what):
    if not ok:
        raise Failed(what)


class Editor:
    """An ACP client on the proxy's stdio. `permission`: "allow" answers allow_once, "hold"
    never answers (the kill lands while the question is open)."""

    def __init__(self, argv, env, cwd, log_path: Path, permission="allow"):
        self.p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=open(str(log_path) + ".err", "a"),
                                  start_new_session=True)
        self.log = open(log_path, "a")
        self.next = 0
        self.responses: dict = {}
        self.updates: list[dict] = []
        self.asked: list[dict] = []
        self.permission = permission
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            try:
                m = json.loads(line)
            except ValueError:
                self.log.write("NOT JSON " + line.decode(errors="replace"))
                continue
            self.log.write("<- " + json.dumps(m)[:4000] + "\n")
            self.log.flush()
            with self.cv:
                if "method" not in m and "id" in m:
                    self.responses[m["id"]] = m
                elif m.get("method") == "session/update":
                    self.updates.append(m["params"]["update"])
                elif m.get("method") == "session/request_permission":
                    self.asked.append(m)
                self.cv.notify_all()
            if "method" in m and "id" in m:
                self._answer(m)
        with self.cv:
            self.cv.notify_all()

    def _answer(self, m):
        if m["method"] == "session/request_permission":
            if self.permission == "hold":
                return
            opts = m["params"]["options"]
            pick = next((o for o in opts if o["kind"] == "allow_once"), opts[0])
            self.send({"jsonrpc": "2.0", "id": m["id"], "result": {
                "outcome": {"outcome": "selected", "optionId": pick["optionId"]}}})
        else:
            self.send({"jsonrpc": "2.0", "id": m["id"],
                       "error": {"code": -32601, "message": "not supported by this editor"}})

    def send(self, m):
        self.log.write("-> " + json.dumps(m)[:4000] + "\n")
        self.log.flush()
        self.p.stdin.write((json.dumps(m) + "\n").encode())
        self.p.stdin.flush()

    def request(self, method, params, wait=True):
        i = self.next
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        return self.wait(i) if wait else i

    def wait(self, i, timeout=TIMEOUT):
        end = time.monotonic() + timeout
        with self.cv:
            while i not in self.responses:
                if self.p.poll() is not None:
                    raise Failed(f"the proxy exited ({self.p.returncode}) before answering {i}")
                if time.monotonic() > end:
                    raise Failed(f"no answer to request {i} in {timeout} s")
                self.cv.wait(timeout=0.2)
            r = self.responses[i]
        if "error" in r:
            raise Failed(f"request {i} failed: {r['error']}")
        return r["result"]

    def text(self) -> str:
        """Every agent message chunk's text, in order."""
        with self.cv:
            return "".join(u.get("content", {}).get("text", "") for u in self.updates
                           if u.get("sessionUpdate") == "agent_message_chunk")

    def call_updates(self) -> list[dict]:
        with self.cv:
            return [u for u in self.updates
                    if u.get("sessionUpdate") in ("tool_call", "tool_call_update")]

    def close(self):
        if self.p.poll() is None:
            kill_tree(self.p.pid)
            self.p.wait()


def the_agent(proxy_pid: int, lazarus: str) -> int | None:
    """The wrapped agent: the topmost process below the proxy that is not Lazarus (the proxy
    starts it under a reaper, a fork of itself)."""
    def argv0(pid):
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            return ""

    def parent(pid):
        try:
            st = Path(f"/proc/{pid}/stat").read_text()
            return int(st[st.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            return 0

    lz = os.path.realpath(lazarus)
    for pid in reversed(descendants(proxy_pid)):
        if pid != proxy_pid and os.path.realpath(argv0(pid)) != lz \
                and os.path.realpath(argv0(parent(pid))) == lz:
            return pid
    return None


class Agent:
    """One wrapped agent in a box: its command, environment, workspace and tool counter."""

    def __init__(self, kind: str, box: Path, resumed_reply: str, step: str = "in-tool"):
        self.kind = kind
        self.box = box
        bins = {"NODE_BIN": os.environ["NODE_BIN"]}
        told = None
        if kind == "gemini":
            bins["GEMINI_BIN"] = os.environ["GEMINI_BIN"]
            told = g.step(g.text(resumed_reply), when=g.cond_text(INTERRUPTED), repeat=True)
            steps = [told, g.step(g.text("Going on."), when=g.cond_text("go on"), repeat=True)]
            steps += g.tool_script(box, sleep_first=step == "in-tool")
            if step == "after-tool":  # the answer to the call's result comes late: killed then
                steps[-2]["delay_ms"] = 60000
            self.server = Server({"steps": steps + [g.FALLBACK]}, box,
                                 program=[sys.executable, str(HERE / "gemini_server.py")])
            a = g.Gemini(box, bins, self.server)
            self.argv = [bins["GEMINI_BIN"], "--acp", "-m", g.MODEL]
            self.prompt = g.PROMPT
            self.counter = box / "count.txt"
            self.started = box / "tool.started"
        else:
            bins["OPENCODE_BIN"] = os.environ["OPENCODE_BIN"]
            told = oc.step(oc.text(resumed_reply), when=oc.main_turn(oc.says(INTERRUPTED)),
                           repeat=True)
            steps = [told, oc.step(oc.text("Going on."), when=oc.main_turn(oc.says("go on")),
                                   repeat=True)]
            steps += oc.tool_script(box, sleep_first=step == "in-tool")
            if step == "after-tool":
                steps[-2]["delay_ms"] = 60000
            self.server = Server({"steps": steps + [oc.FALLBACK]}, box)
            a = oc.OpenCode(box, bins, self.server)
            cfg = json.loads((a.work / "opencode.json").read_text())
            cfg["permission"] = {"bash": "ask"}
            (a.work / "opencode.json").write_text(json.dumps(cfg))
            a.prepare_db()
            self.argv = [bins["OPENCODE_BIN"], "acp"]
            self.prompt = oc.PROMPT
            self.counter = a.work / "count.txt"
            self.started = a.work / "tool.started"
        self.env = a.env
        self.work = a.work
        self.journal = box / "journal"

    def count(self) -> int:
        return len(self.counter.read_text().splitlines()) if self.counter.exists() else 0

    def model_requests(self) -> list[dict]:
        return self.server.requests()

    def editor(self, name: str, permission="allow") -> Editor:
        argv = [LAZARUS, "acp", "--session-dir", str(self.journal), "--wrap", "--", *self.argv]
        return Editor(argv, self.env, self.work, self.box / f"{name}.log", permission)


def start(ed: Editor, a: Agent) -> str:
    init = ed.request("initialize", {"protocolVersion": 1, "clientCapabilities": {
        "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}})
    check(init.get("agentCapabilities", {}).get("loadSession") is True,
          f"the proxy passes on the agent's loadSession: {init}")
    return ed.request("session/new", {"cwd": str(a.work), "mcpServers": []})["sessionId"]


def kill_agent(ed: Editor):
    pid = wait_for("the wrapped agent", lambda: the_agent(ed.p.pid, LAZARUS), 30)
    procs = descendants(pid)
    kill_tree(pid)
    wait_gone(procs)
    wait_for("a new agent", lambda: (the_agent(ed.p.pid, LAZARUS) or pid) != pid, 60)


def in_doubt_card(ed: Editor) -> dict | None:
    return next((u for u in ed.call_updates() if u.get("status") == "failed"
                 and "Cut off" in json.dumps(u.get("content"))), None)


def told_agent(a: Agent) -> list[str]:
    """The texts of the model requests that carry the proxy's resume message."""
    return [json.dumps(r) for r in a.model_requests() if INTERRUPTED in json.dumps(r)]


def verify_journal(a: Agent, sid: str):
    r = subprocess.run([LAZARUS, "sessions", "list", "--json", "--session-dir", str(a.journal)],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"sessions list: {r.stderr}")
    ids = [json.loads(line)["id"] for line in r.stdout.splitlines()]
    check(len(ids) == 1, f"one journal session: {ids}")
    r = subprocess.run([LAZARUS, "sessions", "verify", ids[0], "--session-dir", str(a.journal)],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"sessions verify {ids[0]}: {r.stdout}{r.stderr}")
    return ids[0]


def killed_agent(kind: str, step: str, box: Path):
    """The agent killed at `step` of the call, the proxy alive: the same editor goes on."""
    a = Agent(kind, box, "Resumed: I will check before running anything again.", step)
    ed = a.editor("editor", permission="hold" if step == "permission" else "allow")
    try:
        sid = start(ed, a)
        turn = ed.request("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": a.prompt}]}, wait=False)
        if step == "permission":
            wait_for("the permission question", lambda: ed.asked, TIMEOUT)
        elif step == "in-tool":
            wait_for("the call to start", a.started.exists, TIMEOUT)
            time.sleep(0.5)
        else:
            wait_for("the call to finish", lambda: any(
                u.get("status") == "completed" for u in ed.call_updates()), TIMEOUT)
        kill_agent(ed)
        end = ed.wait(turn)
        check(end.get("stopReason") == "end_turn", f"the turn ends: {end}")
        said = ed.text()
        check("Lazarus: the agent" in said and "killed by signal 9" in said,
              f"the editor is told the agent died: {said!r}")
        if step == "permission":
            check(a.count() == 0, f"a call refused by the kill never ran: count {a.count()}")
            check("did not run" in said, f"the editor is told it did not run: {said!r}")
            check(any("did not run" in t for t in told_agent(a)), "the agent is told")
        elif step == "in-tool":
            check(a.count() == 1, f"the effect once: count {a.count()}")
            card = in_doubt_card(ed)
            check(card is not None, f"the call failed, in doubt: {ed.call_updates()}")
            check("in doubt" in said, f"the editor's notice names the call in doubt: {said!r}")
            check(told_agent(a), "the agent is told its turn was interrupted")
        else:
            check(a.count() == 1, f"count {a.count()}")
            check(in_doubt_card(ed) is None, "nothing in doubt after a finished call")
        check("Resumed" in said or "Done" in said, f"the turn went on: {said!r}")
        # the session goes on in the same editor
        nxt = ed.request("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": "go on"}]})
        check(nxt.get("stopReason") == "end_turn", f"the next turn: {nxt}")
        check(a.count() == (0 if step == "permission" else 1),
              f"no side effect twice: count {a.count()}")
        verify_journal(a, sid)
    finally:
        ed.close()
        a.server.stop()


def killed_proxy(kind: str, box: Path):
    """The proxy and its agent killed together inside the call; a new proxy loads."""
    a = Agent(kind, box, "Resumed: I will check before running anything again.")
    ed = a.editor("editor")
    try:
        sid = start(ed, a)
        ed.request("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": a.prompt}]}, wait=False)
        wait_for("the call to start", a.started.exists, TIMEOUT)
        time.sleep(0.5)
        procs = descendants(ed.p.pid)
        ed.close()
        wait_gone(procs)
    finally:
        ed.close()
    ed = a.editor("editor2")
    try:
        init = ed.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        check(init.get("agentCapabilities", {}).get("loadSession") is True, f"{init}")
        ed.request("session/load", {"sessionId": sid, "cwd": str(a.work), "mcpServers": []})
        time.sleep(1)  # a late replay (Gemini CLI streams its history after answering)
        with ed.cv:
            users = "".join(u.get("content", {}).get("text", "") for u in ed.updates
                            if u.get("sessionUpdate") == "user_message_chunk")
        check(a.prompt in users, f"the history comes back: {ed.updates[:5]}")
        check(in_doubt_card(ed) is not None,
              f"the cut-off call is shown failed, in doubt: {ed.call_updates()}")
        open_calls = {}
        for u in ed.call_updates():
            if "status" in u:
                open_calls[u["toolCallId"]] = u["status"]
        check(all(s in ("completed", "failed") for s in open_calls.values()),
              f"no call left pending or in_progress: {open_calls}")
        nxt = ed.request("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": "go on"}]})
        check(nxt.get("stopReason") == "end_turn", f"the next turn: {nxt}")
        check(a.count() == 1, f"the effect once: count {a.count()}")
        verify_journal(a, sid)
    finally:
        ed.close()
        a.server.stop()


SCENARIOS = {
    "gemini-permission": lambda box: killed_agent("gemini", "permission", box),
    "gemini-in-tool": lambda box: killed_agent("gemini", "in-tool", box),
    "gemini-after-tool": lambda box: killed_agent("gemini", "after-tool", box),
    "gemini-proxy-killed": lambda box: killed_proxy("gemini", box),
    "opencode-permission": lambda box: killed_agent("opencode", "permission", box),
    "opencode-in-tool": lambda box: killed_agent("opencode", "in-tool", box),
    "opencode-after-tool": lambda box: killed_agent("opencode", "after-tool", box),
    "opencode-proxy-killed": lambda box: killed_proxy("opencode", box),
}


def main(names):
    names = names or list(SCENARIOS)
    keep = os.environ.get("LAZARUS_ACP_WRAP_KEEP")
    failed = []
    for name in names:
        box = Path(tempfile.mkdtemp(prefix=f"acp-wrap-{name}-"))
        t = time.monotonic()
        try:
            SCENARIOS[name](box)
            log(f"acp-wrap/{name}: ok in {time.monotonic() - t:.1f} s")
        except Exception as e:  # noqa: BLE001 - every failure is reported with its box
            log(f"acp-wrap/{name}: FAILED: {e} (logs in {box})")
            failed.append(name)
            keep = True
        if not keep:
            subprocess.run(["rm", "-rf", str(box)])
    if failed:
        raise SystemExit(f"acp-wrap: {len(failed)} of {len(names)} failed: {', '.join(failed)}")
    print(f"acp-wrap: {len(names)} scenarios passed")


if __name__ == "__main__":
    main(sys.argv[1:])
