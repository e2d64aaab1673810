"""Codex scenarios: the real `codex exec` against the scripted OpenAI Responses server
(reasoning items with encrypted content included), SIGKILLed at known points."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from harness import Server, base_env, kill_tree, mcp_counter, wait_for, FALLBACK, after, reply_text, says, step  # noqa: F401


def reply_call(cid, cmd, reasoning="I will run the command."):
    """An exec_command call, with a reasoning item (encrypted content) before it."""
    return {"kind": "response", "reasoning": reasoning,
            "tool_calls": [{"id": cid, "name": "exec_command", "arguments": {"cmd": cmd}}]}


def reply_mcp_call(cid, server, tool, args, reasoning="I will call the MCP tool."):
    """A call of MCP server `server`'s tool: Codex sends an MCP server's tools as a
    `namespace` tool named `mcp__<server>`, and the model's call names both."""
    return {"kind": "response", "reasoning": reasoning,
            "tool_calls": [{"id": cid, "name": tool, "namespace": f"mcp__{server}",
                            "arguments": args}]}


class Codex:
    def __init__(self, box: Path, bins: dict, server: Server, mcp: bool = False):
        self.box = box
        self.home = box / "home"
        self.codex_home = self.home / ".codex"
        self.work = box / "work"
        self.codex_home.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.bins = bins
        self.server = server
        (self.codex_home / "config.toml").write_text(f'''model = "scripted-model"
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.scripted]
name = "Scripted"
base_url = "{server.url}/v1"
env_key = "SCRIPTED_API_KEY"
wire_api = "responses"
request_max_retries = 1
stream_max_retries = 0
''' + (self.mcp_table() if mcp else ""))
        self.env = base_env(self.home, bins["NODE_BIN"])
        self.env.update({"CODEX_HOME": str(self.codex_home), "SCRIPTED_API_KEY": "sk-test"})
        self.proc = None

    def mcp_table(self) -> str:
        """[mcp_servers.side]: the counter MCP server (its `bump` counts, then sleeps)."""
        m = mcp_counter(self.box / "count.txt")
        env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in m["env"].items())
        return (f"\n[mcp_servers.side]\ncommand = {json.dumps(m['command'])}\n"
                f"args = {json.dumps(m['args'])}\nenv = {{ {env} }}\n")

    def exec(self, prompt: str):
        self.proc = subprocess.Popen(
            [self.bins["CODEX_BIN"], "exec", "--skip-git-repo-check", prompt], cwd=self.work,
            env=self.env, stdin=subprocess.DEVNULL, stdout=open(self.box / "codex.out", "a"),
            stderr=open(self.box / "codex.err", "a"), start_new_session=True)

    def rollouts(self) -> list[Path]:
        d = self.codex_home / "sessions"
        return sorted(d.rglob("rollout-*.jsonl*")) if d.exists() else []

    def lines(self) -> list[dict]:
        out = []
        for f in self.rollouts():
            for l in f.read_text(errors="replace").splitlines():
                try:
                    out.append(json.loads(l))
                except ValueError:
                    pass
        return out

    def kill(self):
        if self.proc and self.proc.poll() is None:
            kill_tree(self.proc.pid)
            self.proc.wait()


def sleeper(box, name):
    return f"touch {box / (name + '.started')}; sleep 300"


def r_finished(c: Codex):
    c.exec("please make the file")
    wait_for("codex exec to exit", lambda: c.proc.poll() is not None, 120)


def r_in_tool(c: Codex):
    c.exec("please make the file")
    wait_for("the exec_command tool to start", lambda: (c.box / "tool.started").exists(), 120)
    time.sleep(1.5)


def r_in_mcp_tool(c: Codex):
    c.exec("please bump the counter")
    # the MCP server's bump counted its effect, then sleeps: the call is running
    wait_for("the MCP tool's effect", lambda: (c.box / "count.txt").exists(), 120)
    time.sleep(1.5)


def r_first_answer(c: Codex):
    c.exec("please make the file")
    wait_for("the first model request", lambda: c.server.count() >= 1, 120)
    time.sleep(2)


def r_after_tool(c: Codex):
    c.exec("please make the file")
    wait_for("the request with the tool output", lambda: any(
        any(it.get("type") == "function_call_output" for it in r.get("input", []))
        for r in c.server.requests()), 120)
    time.sleep(2)


def r_error(c: Codex):
    c.exec("please make the file")
    wait_for("codex exec to exit", lambda: c.proc.poll() is not None, 180)


def tool_script(box, cmd):
    return [step(reply_text("Done: wrote out.txt.", "The file is written."), when=after("call01")),
            step(reply_call("call01", cmd), when=says("please make the file"))]


def scenarios(_):
    return {
        "finished": ("a `codex exec` turn that finished (reasoning, a tool call, an answer)",
                     "finished", {}, lambda box: tool_script(box, "echo hi > out.txt"),
                     r_finished),
        "killed-in-tool": ("killed while exec_command ran", "interrupted_tool_call", {},
                           lambda box: tool_script(box, sleeper(box, "tool")), r_in_tool),
        "killed-in-mcp-tool": (
            "killed while an MCP tool ran ([mcp_servers] side: its bump counted its effect, "
            "then slept), after a reasoning item", "interrupted_tool_call",
            {"interrupted_calls": ["mcp__side__bump"], "mcp": True},
            lambda box: [
                step(reply_text("Bumped.", "The counter is bumped."), when=after("call01")),
                step(reply_mcp_call("call01", "side", "bump", {"sleep_secs": 300}),
                     when=says("please bump the counter"))],
            r_in_mcp_tool),
        "killed-waiting-first-answer": (
            "killed while the first model request was open", "pending_input", {},
            lambda box: [step(reply_text("late"), when=says("please make the file"),
                              delay_ms=600000)], r_first_answer),
        "killed-waiting-after-tool": (
            "killed while the request carrying the tool output was open",
            "interrupted_after_tool_result", {},
            lambda box: [step(reply_text("late"), when=after("call01"), delay_ms=600000)]
            + tool_script(box, "echo hi > out.txt")[1:], r_after_tool),
        "killed-mid-stream": (
            "killed while the answer streamed", "pending_input", {},
            lambda box: [step({"kind": "stream_then_hang", "after_chunks": 8,
                               "response": {"text": "A long answer " * 30,
                                            "reasoning": "thinking"}},
                              when=says("please make the file"))], r_first_answer),
        "api-error-context-overflow": (
            "every request answered 400 context_length_exceeded", "failed",
            {"transient": False},
            lambda box: [step({"kind": "status", "status": 400,
                               "error_type": "context_length_exceeded",
                               "body": "Your input exceeds the context window of this model."},
                              repeat=True)], r_error),
    }


def run(name: str, spec, box: Path, bins: dict) -> dict:
    ending, verdict, extra, build, runner = spec
    server = Server({"steps": build(box) + [FALLBACK]}, box)
    c = Codex(box, bins, server, mcp=bool(extra.get("mcp")))
    try:
        runner(c)
    finally:
        c.kill()
        server.stop()
    files = c.rollouts()
    if not files:
        raise RuntimeError(f"codex/{name}: no rollout was written")
    extra = {k: v for k, v in extra.items() if k != "mcp"}
    return {"ending": ending, "verdict": verdict, **extra, "files": files, "root": box,
            "requests": server.count(),
            "opaque_round_trips": opaque_report(server)}


def opaque_report(server: Server) -> str:
    """Whether each encrypted reasoning item came back byte-identical (from the request log)."""
    issued = [r for r in server.requests() if r.get("input")]
    echoed = sum(1 for r in issued for it in r.get("input", [])
                 if it.get("type") == "reasoning" and it.get("encrypted_content"))
    return f"{echoed} reasoning items sent back"
