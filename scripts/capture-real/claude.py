"""Claude Code scenarios: each runs the real `claude` (interactive, in tmux; or `claude -p`)
against the scripted Anthropic Messages server and SIGKILLs it at a known point."""
from __future__ import annotations

import json
import time
from pathlib import Path

from harness import Server, Tmux, base_env, kill_tree, log, mcp_counter, wait_for, step  # noqa: F401

KEY = "sk-ant-api03-scripted-test-key-000000000000"


def reply_text(text, **kw):
    return {"kind": "response", "text": text, **kw}


def reply_call(cid, name, args, text=None):
    r = {"kind": "response", "tool_calls": [{"id": cid, "name": name, "arguments": args}]}
    if text:
        r["text"] = text
    return r


def user_says(text):
    return {"kind": "last_user_contains", "text": text}


def after(cid):
    return {"kind": "last_tool_result", "call_id": cid}


# Anything else (title generation, a stray request): a short answer, so nothing hangs on 422.
FALLBACK = step(reply_text("ok"), repeat=True)


class Claude:
    def __init__(self, sandbox: Path, bins: dict, server: Server):
        self.box = sandbox
        self.home = sandbox / "home"
        self.work = sandbox / "work"
        self.home.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.bins = bins
        self.server = server
        (self.home / ".claude.json").write_text(json.dumps({
            "hasCompletedOnboarding": True, "theme": "dark",
            "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []},
            "projects": {str(self.work): {"hasTrustDialogAccepted": True,
                                          "hasCompletedProjectOnboarding": True}}}))
        self.env = base_env(self.home, bins["NODE_BIN"])
        self.env.update({
            "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": KEY,
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "1", "IS_SANDBOX": "1"})
        self.tmux = None

    def mcp_config(self) -> Path:
        """An --mcp-config file naming the counter MCP server as `side` (its tools are
        mcp__side__bump, …; Claude Code defers them behind ToolSearch)."""
        cfg = self.box / "mcp.json"
        cfg.write_text(json.dumps({"mcpServers": {"side": mcp_counter(self.box / "count.txt")}}))
        return cfg

    def interactive(self, prompt: str, args: list[str] = ()):
        self.tmux = Tmux("claude", [self.bins["CLAUDE_BIN"], "--dangerously-skip-permissions",
                                    *args], self.env, self.work)
        wait_for("the claude prompt or the bypass dialog",
                 lambda: "Yes, I accept" in self.tmux.screen() or "bypass permissions on" in self.tmux.screen(), 60)
        if "Yes, I accept" in self.tmux.screen():
            self.tmux.keys("Down")
            time.sleep(0.3)
            self.tmux.keys("Enter")
        wait_for("the claude input box", lambda: "bypass permissions on" in self.tmux.screen(), 60)
        time.sleep(0.5)
        self.tmux.type(prompt)

    def print_mode(self, args: list[str]):
        """`claude -p ...` as a plain child in its own session (no terminal)."""
        import subprocess
        self.proc = subprocess.Popen([self.bins["CLAUDE_BIN"], "-p", *args], cwd=self.work,
                                     env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=open(self.box / "print.out", "a"),
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def transcripts(self) -> list[Path]:
        root = self.home / ".claude" / "projects"
        return sorted(p for p in root.rglob("*.jsonl")) if root.exists() else []

    def main_transcript(self) -> Path:
        return wait_for("a transcript", lambda: next(
            (p for p in self.transcripts() if "subagents" not in p.parts), None), 60)

    def lines(self) -> list[dict]:
        out = []
        try:
            text = self.main_transcript().read_text()
        except FileNotFoundError:
            return out
        for l in text.splitlines():
            try:
                out.append(json.loads(l))
            except ValueError:
                pass
        return out

    def has_line(self, pred) -> bool:
        return any(pred(l) for l in self.lines())

    def kill(self):
        if getattr(self, "proc", None) is not None and self.proc.poll() is None:
            kill_tree(self.proc.pid)
            self.proc.wait()
        if self.tmux:
            self.tmux.kill()
            self.tmux.close()
            self.tmux = None

    def marker(self, name: str) -> Path:
        return self.box / f"{name}.started"


def turn_ended(l):
    return l.get("type") == "system" and l.get("subtype") == "turn_duration"


def sleeper(c: Claude, name: str, secs=120) -> str:
    return f"touch {c.marker(name)}; sleep {secs}"


# Each scenario: (name, true ending, expected verdict, expected why/transient, runner).
def s_finished(c: Claude):
    c.interactive("please make the file")
    wait_for("turn_duration", lambda: c.has_line(turn_ended), 60)
    time.sleep(1)


def s_killed_in_tool(c: Claude):
    c.interactive("please make the file")
    wait_for("the Bash tool to start", lambda: c.marker("tool").exists(), 60)
    time.sleep(1)


def s_waiting_first_answer(c: Claude):
    c.interactive("please make the file")
    wait_for("the first model request", lambda: c.server.count() >= 1, 60)
    time.sleep(1.5)


def s_waiting_after_tool(c: Claude):
    c.interactive("please make the file")
    wait_for("the request with the tool result", lambda: any(
        "toolu_01" in json.dumps(r.get("messages", [])[-1:]) for r in c.server.requests()), 60)
    time.sleep(1.5)


def s_mid_stream(c: Claude):
    c.interactive("please make the file")
    wait_for("the streaming request", lambda: c.server.count() >= 1, 60)
    time.sleep(2)


def s_api_error(c: Claude):
    c.interactive("please make the file")
    wait_for("the API error line", lambda: c.has_line(lambda l: l.get("isApiErrorMessage")), 120)
    time.sleep(1.5)


def s_user_esc(c: Claude):
    c.interactive("please make the file")
    wait_for("the Bash tool to start", lambda: c.marker("tool").exists(), 60)
    time.sleep(1)
    c.tmux.keys("Escape")
    wait_for("the interrupt to be recorded", lambda: c.has_line(
        lambda l: "Request interrupted by user" in json.dumps(l.get("message", {}))), 30)
    time.sleep(1)


def s_background_subagent(c: Claude):
    c.interactive("please investigate in the background")
    wait_for("the sub-agent's tool to start", lambda: c.marker("sub").exists(), 90)
    wait_for("the parent's turn to end", lambda: c.has_line(turn_ended), 60)
    time.sleep(1)


def s_background_subagent_done(c: Claude):
    c.interactive("please investigate in the background")
    wait_for("the answer to the sub-agent's report", lambda: c.has_line(
        lambda l: l.get("type") == "assistant" and "Report received" in json.dumps(l.get("message", {}))), 90)
    wait_for("the parent's turn to end", lambda: sum(1 for l in c.lines() if turn_ended(l)) >= 2, 60)
    time.sleep(1)


def s_killed_in_mcp_tool(c: Claude):
    c.interactive("please bump the counter", ["--mcp-config", str(c.mcp_config())])
    # the MCP server's bump counted its effect, then sleeps: the call is running
    wait_for("the MCP tool's effect", lambda: (c.box / "count.txt").exists(), 90)
    time.sleep(1.5)


def s_waiting_after_tool_search(c: Claude):
    c.interactive("please bump the counter", ["--mcp-config", str(c.mcp_config())])
    # (the request log's last message may be a system note on the deferred tools)
    wait_for("the request with ToolSearch's result", lambda: any(
        "toolu_search" in json.dumps(r.get("messages", [])) for r in c.server.requests()), 90)
    time.sleep(1.5)


def s_sdk_killed_in_tool(c: Claude):
    c.print_mode(["--dangerously-skip-permissions", "please make the file"])
    wait_for("the Bash tool to start", lambda: c.marker("tool").exists(), 60)
    time.sleep(1)


def s_resumed_by_print_killed_in_tool(c: Claude):
    c.interactive("please make the file")
    wait_for("the Bash tool to start", lambda: c.marker("tool").exists(), 60)
    time.sleep(1)
    c.kill()
    c.tmux = None
    sid = c.main_transcript().stem
    # What the `claude` preset does: resume in print mode, in the session's cwd.
    c.print_mode(["--resume", sid, "--permission-mode", "bypassPermissions",
                  "[System] Your previous turn was interrupted. Continue the task."])
    wait_for("the resumed Bash tool to start", lambda: c.marker("tool2").exists(), 60)
    time.sleep(1)


COMMON_TOOL = lambda c, cmd: [
    step(reply_call("toolu_01", "Bash", {"command": cmd, "description": "write the file"}),
         when={"kind": "all", "of": [user_says("make the file"), {"kind": "has_tools", "yes": True}]}),
]


def scenarios(c_factory):
    """name -> (ending, expected verdict, extra expectations, script builder, runner)."""
    return {
        "finished": ("finished", "finished", {},
                     lambda c: COMMON_TOOL(c, "echo hi > out.txt") + [
                         step(reply_text("Done: wrote out.txt."), when=after("toolu_01"))],
                     s_finished),
        "killed-in-tool": ("killed while the Bash tool ran", "interrupted_tool_call", {},
                           lambda c: COMMON_TOOL(c, sleeper(c, "tool")) + [
                               step(reply_text("Done."), when=after("toolu_01"))],
                           s_killed_in_tool),
        "killed-waiting-first-answer": (
            "killed while the first model request was open", "interrupted_stream", {},
            lambda c: [step(reply_text("late"), when=user_says("make the file"), delay_ms=600000)],
            s_waiting_first_answer),
        "killed-waiting-after-tool": (
            "killed while the request carrying the tool result was open",
            "interrupted_after_tool_result", {},
            lambda c: COMMON_TOOL(c, "echo hi > out.txt") + [
                step(reply_text("late"), when=after("toolu_01"), delay_ms=600000)],
            s_waiting_after_tool),
        "killed-mid-stream": (
            "killed while the answer streamed (half the events sent)", "interrupted_stream", {},
            lambda c: [step({"kind": "stream_then_hang", "after_chunks": 6,
                             "response": {"text": "I will now write a long answer " * 20}},
                            when=user_says("make the file"))],
            s_mid_stream),
        "api-error-overloaded": (
            "every request answered 529 overloaded_error", "failed", {"transient": True},
            lambda c: [step({"kind": "status", "status": 529, "error_type": "overloaded_error",
                             "body": "Overloaded"}, repeat=True)],
            s_api_error),
        "api-error-context-overflow": (
            "answered 400: prompt too long (215029 tokens > 200000)", "failed", {"transient": False},
            lambda c: [step({"kind": "status", "status": 400, "error_type": "invalid_request_error",
                             "body": "prompt is too long: 215029 tokens > 200000 maximum"},
                            repeat=True)],
            s_api_error),
        "user-esc": ("the user pressed Esc while the Bash tool ran", "user_stopped", {},
                     lambda c: COMMON_TOOL(c, sleeper(c, "tool")) + [
                         step(reply_text("Done."), when=after("toolu_01"))],
                     s_user_esc),
        "background-subagent": (
            "killed while a background sub-agent worked (the parent's turn had ended)",
            "interrupted_tool_call", {},
            lambda c: [
                step(reply_call("toolu_agent", "Agent", {
                    "description": "Investigate", "subagent_type": "general-purpose",
                    "prompt": "SUBAGENT TASK: run the slow check", "run_in_background": True}),
                    when=user_says("investigate in the background")),
                step(reply_call("toolu_sub", "Bash", {"command": sleeper(c, "sub"),
                                                      "description": "slow check"}),
                     when=user_says("SUBAGENT TASK")),
                step(reply_text("Started the investigation in the background."),
                     when=after("toolu_agent")),
                step(reply_text("Check finished."), when=after("toolu_sub")),
            ],
            s_background_subagent),
        "background-subagent-done": (
            "finished: the background sub-agent reported back and the parent answered",
            "finished", {},
            lambda c: [
                step(reply_call("toolu_agent", "Agent", {
                    "description": "Investigate", "subagent_type": "general-purpose",
                    "prompt": "SUBAGENT TASK: run the quick check", "run_in_background": True}),
                    when=user_says("investigate in the background")),
                step(reply_call("toolu_sub", "Bash", {"command": "echo checked",
                                                      "description": "quick check"}),
                     when=user_says("SUBAGENT TASK")),
                step(reply_text("Check finished: all good."), when=after("toolu_sub")),
                step(reply_text("Started the investigation in the background."),
                     when=after("toolu_agent")),
                step(reply_text("Report received: all good."),
                     when={"kind": "any_message_contains", "text": "task-notification"}),
            ],
            s_background_subagent_done),
        "killed-in-mcp-tool": (
            "killed while an MCP tool ran (mcp__side__bump, found through ToolSearch; the "
            "server counted its effect, then slept)", "interrupted_tool_call",
            {"permission_mode": "bypassPermissions", "interrupted_calls": ["mcp__side__bump"]},
            lambda c: [
                step(reply_call("toolu_search", "ToolSearch",
                                {"query": "select:mcp__side__bump", "max_results": 1}),
                     when={"kind": "all", "of": [user_says("bump the counter"),
                                                 {"kind": "has_tools", "yes": True}]}),
                step(reply_call("toolu_bump", "mcp__side__bump", {"sleep_secs": 300}),
                     when=after("toolu_search")),
                step(reply_text("Bumped."), when=after("toolu_bump")),
            ],
            s_killed_in_mcp_tool),
        "killed-waiting-after-tool-search": (
            "killed while the request carrying ToolSearch's result (a tool_reference to "
            "mcp__side__bump) was open", "interrupted_after_tool_result",
            {"permission_mode": "bypassPermissions"},
            lambda c: [
                step(reply_call("toolu_search", "ToolSearch",
                                {"query": "select:mcp__side__bump", "max_results": 1}),
                     when={"kind": "all", "of": [user_says("bump the counter"),
                                                 {"kind": "has_tools", "yes": True}]}),
                step(reply_text("late"), when=after("toolu_search"), delay_ms=600000),
            ],
            s_waiting_after_tool_search),
        "sdk-killed-in-tool": (
            "a `claude -p` run (SDK entrypoint) killed while the Bash tool ran",
            "skipped", {"why": "sdk_owned"},
            lambda c: COMMON_TOOL(c, sleeper(c, "tool")),
            s_sdk_killed_in_tool),
        "resumed-by-print-killed-in-tool": (
            "an interactive session, killed in a tool, resumed with `claude -p --resume`, "
            "killed again in a tool", "interrupted_tool_call", {},
            lambda c: COMMON_TOOL(c, sleeper(c, "tool")) + [
                step(reply_call("toolu_02", "Bash", {"command": sleeper(c, "tool2"),
                                                     "description": "write again"}),
                     when=user_says("previous turn was interrupted"))],
            s_resumed_by_print_killed_in_tool),
    }


def run(name: str, spec, box: Path, bins: dict) -> dict:
    ending, verdict, extra, build, runner = spec
    box.mkdir(parents=True, exist_ok=True)
    # The script is built before the server starts; markers only need the sandbox path.
    probe = type("P", (), {"marker": lambda self, n: box / f"{n}.started"})()
    steps = build(probe) + [FALLBACK]
    server = Server({"steps": steps}, box)
    c = Claude(box, bins, server)
    try:
        runner(c)
    finally:
        c.kill()
        server.stop()
    files = c.transcripts()
    if not files:
        raise RuntimeError(f"claude/{name}: no transcript was written")
    # Every scenario runs with --dangerously-skip-permissions (the resumed one with
    # --permission-mode bypassPermissions): the mode a resume must carry.
    return {"ending": ending, "verdict": verdict, "permission_mode": "bypassPermissions",
            **extra, "files": files, "root": box, "requests": server.count()}
