#!/usr/bin/env python3
"""End to end: real agents killed mid-tool, resumed by `lazarus boot-resume`.

1. OpenClaw: an embedded run (`agent --local`) and a gateway run, each SIGKILLed while its
   exec tool runs; the gateway is started again over the killed state and recovers its own
   run; `lazarus boot-resume --preset openclaw` runs three times and must resume the embedded
   session exactly once (through the real gateway) and leave the gateway's session alone.
2. Claude Code: an interactive session SIGKILLed while its Bash tool runs;
   `lazarus boot-resume --preset claude` runs three times and must resume it exactly once
   (`claude -p --resume`, in the session's permission mode: the resumed turn runs a tool
   unattended) to its final answer.
   claude-mcp: the same, killed inside an MCP tool (the counter server, reached through
   ToolSearch): the resume runs in bypassPermissions (in `default` the resumed MCP call is
   refused), its message names the call, its server and arguments, the resumed turn runs an
   MCP tool unattended, and the interrupted one is not run again.
3. pi (`pi -p`) and Codex (`codex exec`), each SIGKILLed in its tool and resumed exactly once
   by its preset to its final answer.
4. Gemini CLI (`gemini -p`, yolo, against gemini_server.py) and OpenCode (`opencode run`),
   each SIGKILLed while its shell tool runs (the command appends a line to count.txt, then,
   the first time only, sleeps); `lazarus boot-resume --preset gemini|opencode` runs three
   times over the sandbox's ~/.gemini / ~/.local/share/opencode and must report the session
   `interrupted_tool_call` and resume it exactly once (`gemini --resume UUID -p MESSAGE`,
   `opencode run --session ID MESSAGE`), the program itself carrying the session to its final
   answer. The scripted model answers the resume message with text and never asks for the
   tool again, so count.txt must still have 1 line; the message the model received must say
   the running call's effect is unknown (OpenCode: naming `bash`; Gemini CLI, which records
   no running call: saying it was not recorded).
5. The opaque reasoning round trip, real clients against the testkit's streams: Claude Code
   (`claude -p`, thinking on) must send the `thinking` block the scripted Anthropic server
   issued, with its `signature`, back byte-identical with the tool result; this is what
   proves the testkit's `thinking_delta` / `signature_delta` events are what a real client
   consumes (Codex's encrypted reasoning items are checked in its capture).

    e2e.py [CASE...]   CASE: claude claude-mcp openclaw pi codex gemini opencode claude-thinking
                       (default: all)

Needs NODE_BIN and each chosen case's program (OPENCLAW_BIN CLAUDE_BIN CODEX_BIN PI_BIN
GEMINI_BIN OPENCODE_BIN, from scripts/capture-real/install.sh), LAZARUS (the binary) and
SCRIPTED_MODEL_SERVER. Exit 0 when every check held; prints each check.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import HERE, Server, log, wait_for  # noqa: E402
import claude as cc  # noqa: E402
import openclaw as oc  # noqa: E402

RESUME_WORDS = "the gateway restarted or the machine slept"
failures: list[str] = []
passed: list[str] = []


def check(ok: bool, what: str):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    (passed if ok else failures).append(what)


def boot_resume(lazarus: str, env: dict, args: list[str]) -> list[dict]:
    p = subprocess.run([lazarus, "boot-resume", "--window", "0", "--json", *args], env=env,
                       capture_output=True, text=True, timeout=600)
    if p.stderr.strip():
        log("boot-resume stderr: " + p.stderr.strip()[-2000:])
    reports = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    for r in reports:
        log(f"  {r['format']} {r.get('session_key') or r['id']}: {r['verdict']}"
            f"{'/' + r['why'] if r.get('why') else ''} -> {r['action']}"
            f" {r.get('action_detail') or ''}")
    return reports


def attempts(state_home: Path) -> list[dict]:
    p = state_home / "lazarus/boot-resume/decisions.jsonl"
    if not p.exists():
        return []
    return [e for e in map(json.loads, p.read_text().splitlines()) if e.get("event") == "attempt"]


def openclaw_e2e(bins: dict, lazarus: str, root: Path):
    box = root / "openclaw"
    box.mkdir(parents=True)
    steps = [
        oc.step(oc.reply_text("EMB resumed and done."), when=oc.after("emb01"), repeat=True),
        oc.step(oc.reply_text("GW recovered and done."), when=oc.after("gw01"), repeat=True),
        oc.step(oc.reply_text("EMB resumed and done."), when=oc.says(RESUME_WORDS), repeat=True),
        oc.step(oc.reply_call("emb01", "exec", {
            "command": f"echo ran >> {box}/side-emb.txt; touch {box}/emb.started; sleep 300"}),
            when=oc.says("EMBEDDED TASK")),
        oc.step(oc.reply_call("gw01", "exec", {
            "command": f"echo ran >> {box}/side-gw.txt; touch {box}/gw.started; sleep 300"}),
            when=oc.says("GATEWAY TASK")),
        oc.FALLBACK,
    ]
    server = Server({"steps": steps}, box)
    o = oc.OpenClaw(box, bins, server)
    try:
        t0 = time.monotonic()
        # An embedded run, killed in its tool.
        o.spawn(["agent", "--local", "--agent", "main", "--session-key", "agent:main:emb",
                 "--message", "EMBEDDED TASK: make the file", "--json"], "emb")
        wait_for("the embedded run's tool", lambda: (box / "emb.started").exists(), 240)
        time.sleep(1)
        o.kill_all()
        o.procs.clear()
        log(f"openclaw: embedded run killed in its tool after {time.monotonic() - t0:.0f} s")
        # A gateway run, killed (the whole gateway) in its tool.
        o.gateway()
        o.spawn(["agent", "--agent", "main", "--session-key", "agent:main:gw",
                 "--message", "GATEWAY TASK: make the file", "--json", "--timeout", "600"],
                "client")
        wait_for("the gateway run's tool", lambda: (box / "gw.started").exists(), 240)
        time.sleep(1)
        o.kill_all()
        o.procs.clear()
        log(f"openclaw: gateway killed in its run's tool after {time.monotonic() - t0:.0f} s")
        # The gateway comes back over the killed state (as systemd would restart it).
        o.gateway()
        log(f"openclaw: gateway restarted after {time.monotonic() - t0:.0f} s")
        env = dict(o.env)
        env["PATH"] = f"{Path(bins['OPENCLAW_BIN']).parent}:{env['PATH']}"
        env["XDG_STATE_HOME"] = str(box / "xdg")
        src = ["--source", f"openclaw:{o.home / '.openclaw'}", "--preset", "openclaw"]
        runs = []
        for i in range(3):
            log(f"openclaw: boot-resume run {i + 1}")
            runs.append(boot_resume(lazarus, env, src))
            if i == 0:
                wait_for("the embedded session to reach its final answer", lambda: o.has_event(
                    lambda e: oc.is_final_text(e, "EMB resumed and done")), 240)
            wait_for("the gateway's own recovery to finish", lambda: o.has_event(
                lambda e: oc.is_final_text(e, "GW recovered and done")), 240)
        by_key = lambda rs, k: [r for r in rs if r.get("session_key") == k]
        emb_actions = [r["action"] for rs in runs for r in by_key(rs, "agent:main:emb")]
        gw_actions = [r["action"] for rs in runs for r in by_key(rs, "agent:main:gw")]
        check(emb_actions.count("resumed") == 1 and "failed" not in emb_actions,
              f"openclaw: the embedded session was resumed exactly once in 3 runs ({emb_actions})")
        check(bool(gw_actions) and all(a == "none" for a in gw_actions),
              f"openclaw: the gateway session was left to OpenClaw ({gw_actions}; verdicts "
              f"{[r['verdict'] + '/' + str(r.get('why')) for rs in runs for r in by_key(rs, 'agent:main:gw')]})")
        ok = [a for a in attempts(box / "xdg") if a.get("ok")]
        check(len(ok) == 1, f"openclaw: one accepted injection in the decision log ({len(ok)})")
        check(o.has_event(lambda e: oc.is_final_text(e, "EMB resumed and done")),
              "openclaw: the embedded session continued to its final answer")
        check(o.has_event(lambda e: oc.is_final_text(e, "GW recovered and done")),
              "openclaw: the gateway recovered its own session")
        ours = [r for r in server.requests() if RESUME_WORDS in json.dumps(r)]
        check(len(ours) >= 1 and all("EMBEDDED TASK" in json.dumps(r) for r in ours),
              f"openclaw: boot-resume's message reached the model only in the embedded session "
              f"({len(ours)} requests)")
        side = (box / "side-emb.txt").read_text().splitlines()
        check(len(side) == 1, f"openclaw: the embedded tool ran once ({len(side)})")
        log(f"openclaw e2e took {time.monotonic() - t0:.0f} s")
    finally:
        o.kill_all()
        server.stop()


def claude_e2e(bins: dict, lazarus: str, root: Path):
    box = root / "claude"
    box.mkdir(parents=True)
    steps = [
        cc.step(cc.reply_text("CC resumed and done."),
                when={"kind": "any_tool_result", "call_id": "toolu_02"}, repeat=True),
        cc.step(cc.reply_call("toolu_02", "Bash", {
            "command": f"echo resumed >> {box}/resumed.txt", "description": "finish"}),
            when={"kind": "any_message_contains", "text": RESUME_WORDS}),
        cc.step(cc.reply_call("toolu_01", "Bash", {
            "command": f"echo ran >> {box}/side-cc.txt; touch {box}/cc.started; sleep 300",
            "description": "make the file"}),
            when={"kind": "any_message_contains", "text": "CLAUDE TASK"}),
        cc.FALLBACK,
    ]
    server = Server({"steps": steps}, box)
    c = cc.Claude(box, bins, server)
    try:
        t0 = time.monotonic()
        c.interactive("CLAUDE TASK: make the file")
        wait_for("the Bash tool", lambda: (box / "cc.started").exists(), 120)
        time.sleep(1)
        c.kill()
        log(f"claude: killed in its Bash tool after {time.monotonic() - t0:.0f} s")
        env = dict(c.env)
        env["PATH"] = f"{Path(bins['CLAUDE_BIN']).parent}:{env['PATH']}"
        env["XDG_STATE_HOME"] = str(box / "xdg")
        src = ["--source", f"claude-code:{c.home / '.claude' / 'projects'}", "--preset", "claude"]
        final = lambda: c.has_line(lambda l: l.get("type") == "assistant"
                                   and "CC resumed and done" in json.dumps(l.get("message")))
        runs = []
        for i in range(3):
            log(f"claude: boot-resume run {i + 1}")
            runs.append(boot_resume(lazarus, env, src))
            if i == 0:
                wait_for("the resumed session's final answer", final, 180)
                time.sleep(2)
        actions = [r["action"] for rs in runs for r in rs]
        check(actions.count("resumed") == 1 and "failed" not in actions,
              f"claude: resumed exactly once in 3 runs ({actions})")
        check(final(), "claude: the session continued to its final answer")
        resumed = (box / "resumed.txt").read_text().splitlines() if (box / "resumed.txt").exists() else []
        check(len(resumed) == 1,
              f"claude: the resumed turn ran its tool unattended (permission mode carried) ({len(resumed)})")
        side = (box / "side-cc.txt").read_text().splitlines()
        check(len(side) == 1, f"claude: the interrupted tool was not run again ({len(side)})")
        ok = [a for a in attempts(box / "xdg") if a.get("ok")]
        check(len(ok) == 1, f"claude: one accepted injection in the decision log ({len(ok)})")
        log(f"claude e2e took {time.monotonic() - t0:.0f} s")
    finally:
        c.kill()
        server.stop()


def claude_mcp_e2e(bins: dict, lazarus: str, root: Path):
    """Claude Code killed inside an MCP tool it reached through ToolSearch (the counter server
    as `side`, configured for the user, so the resumed `claude -p` has it too). The resume
    must run in the session's permission mode (bypassPermissions: in `default` the resumed
    turn's MCP call is refused, "Claude requested permissions to use mcp__side__…, but you
    haven't granted it yet") and its message must name the cut-off call, its server and
    arguments, and say its effect is unknown."""
    from harness import mcp_counter
    box = root / "claude-mcp"
    box.mkdir(parents=True)
    count = box / "count.txt"
    steps = [
        cc.step(cc.reply_text("MCP resumed and done."),
                when={"kind": "any_tool_result", "call_id": "toolu_p1"}, repeat=True),
        cc.step(cc.reply_call("toolu_p1", "mcp__side__peek", {}),
                when={"kind": "any_tool_result", "call_id": "toolu_s2"}),
        # the resumed turn: only when the message names the cut-off call with its arguments
        cc.step(cc.reply_call("toolu_s2", "ToolSearch",
                              {"query": "select:mcp__side__peek", "max_results": 1}),
                when={"kind": "all", "of": [
                    {"kind": "any_message_contains", "text": RESUME_WORDS},
                    {"kind": "any_message_contains",
                     "text": 'mcp__side__bump {"sleep_secs":300} (call toolu_b1, MCP server side)'}]}),
        cc.step(cc.reply_call("toolu_b1", "mcp__side__bump", {"sleep_secs": 300}),
                when={"kind": "any_tool_result", "call_id": "toolu_s1"}),
        cc.step(cc.reply_call("toolu_s1", "ToolSearch",
                              {"query": "select:mcp__side__bump", "max_results": 1}),
                when={"kind": "any_message_contains", "text": "MCP TASK"}),
        cc.FALLBACK,
    ]
    server = Server({"steps": steps}, box)
    c = cc.Claude(box, bins, server)
    # the server for this user: the interactive session and the resumed `claude -p` alike
    cfg = json.loads((c.home / ".claude.json").read_text())
    cfg["mcpServers"] = {"side": mcp_counter(count)}
    (c.home / ".claude.json").write_text(json.dumps(cfg))
    try:
        t0 = time.monotonic()
        c.interactive("MCP TASK: bump the counter")
        wait_for("the MCP tool's effect", lambda: count.exists(), 120)
        time.sleep(1.5)
        c.kill()
        log(f"claude mcp: killed in mcp__side__bump after {time.monotonic() - t0:.0f} s")
        env = dict(c.env)
        env["PATH"] = f"{Path(bins['CLAUDE_BIN']).parent}:{env['PATH']}"
        env["XDG_STATE_HOME"] = str(box / "xdg")
        src = ["--source", f"claude-code:{c.home / '.claude' / 'projects'}", "--preset", "claude"]
        final = lambda: c.has_line(lambda l: l.get("type") == "assistant"
                                   and "MCP resumed and done" in json.dumps(l.get("message")))
        runs = []
        for i in range(3):
            runs.append(boot_resume(lazarus, env, src))
            if i == 0:
                wait_for("the resumed session's final answer", final, 180)
                time.sleep(2)
        first = runs[0][0] if runs[0] else {}
        check(first.get("permission_mode") == "bypassPermissions",
              f"claude mcp: resumed in the mode it ran in ({first.get('permission_mode')})")
        calls = first.get("interrupted_calls") or []
        check([(x.get("tool"), x.get("mcp_server")) for x in calls] == [("mcp__side__bump", "side")],
              f"claude mcp: the cut-off call named with its server ({calls})")
        actions = [r["action"] for rs in runs for r in rs]
        check(actions.count("resumed") == 1 and "failed" not in actions,
              f"claude mcp: resumed exactly once in 3 runs ({actions})")
        check(final(), "claude mcp: the session continued to its final answer")
        lines = count.read_text().split("\n") if count.exists() else []
        bumps = sum(1 for l in lines if l.startswith("bump "))
        peeks = sum(1 for l in lines if l.startswith("peek "))
        check(peeks == 1, f"claude mcp: the resumed turn ran an MCP tool unattended ({peeks})")
        check(bumps == 1, f"claude mcp: the interrupted MCP call was not run again ({bumps})")
        said = [json.dumps(r.get("messages", [])) for r in server.requests()]
        check(any("MCP server side" in m and "effect is unknown" in m for m in said),
              "claude mcp: the model was told the call, its server, and that its effect is unknown")
        log(f"claude mcp e2e took {time.monotonic() - t0:.0f} s")
    finally:
        c.kill()
        server.stop()


# The scripted servers' opaque value for request N (crates/testkit `ScriptedResponse::opaque`).
OPAQUE = re.compile(r"^RXNjcmlwdGVk[0-9]{6}/c2lnbmF0dXJl\+Zw==$")
THOUGHT = "I should run the echo first, then answer."


def claude_thinking_e2e(bins: dict, root: Path):
    box = root / "claude-thinking"
    box.mkdir(parents=True)
    steps = [
        cc.step(cc.reply_text("THOUGHT ROUND TRIP DONE"),
                when={"kind": "any_tool_result", "call_id": "toolu_th1"}, repeat=True),
        cc.step({"kind": "response", "reasoning": THOUGHT,
                 "tool_calls": [{"id": "toolu_th1", "name": "Bash",
                                 "arguments": {"command": "echo thought", "description": "echo"}}]},
                when={"kind": "any_message_contains", "text": "THINK TASK"}),
        cc.FALLBACK,
    ]
    server = Server({"steps": steps}, box)
    c = cc.Claude(box, bins, server)
    c.env["MAX_THINKING_TOKENS"] = "2048"
    try:
        t0 = time.monotonic()
        c.print_mode(["--dangerously-skip-permissions", "THINK TASK: echo, then answer"])
        wait_for("claude -p to exit", lambda: c.proc.poll() is not None, 180)
        out = (box / "print.out").read_text(errors="replace")
        check("THOUGHT ROUND TRIP DONE" in out, f"claude thinking: the run reached its answer ({out[-200:]!r})")
        issued_in = None
        echoed = []
        for n, r in enumerate(server.requests()):
            for m in r.get("messages", []):
                if m.get("role") != "assistant" or not isinstance(m.get("content"), list):
                    continue
                for b in m["content"]:
                    if b.get("type") == "thinking":
                        echoed.append((n, b.get("thinking"), b.get("signature")))
            if issued_in is None and "THINK TASK" in json.dumps(r.get("messages", [])) \
                    and "toolu_th1" not in json.dumps(r):
                issued_in = n
        # request N (1-based) is answered with opaque value N
        issued = f"RXNjcmlwdGVk{(issued_in or 0) + 1:06}/c2lnbmF0dXJl+Zw=="
        exact = [e for e in echoed if e[1] == THOUGHT and e[2] == issued and OPAQUE.match(issued)]
        check(bool(exact) and len(exact) == len(echoed),
              f"claude thinking: the thinking block came back with its signature byte-identical "
              f"({len(exact)} of {len(echoed)} echoed; issued in request {issued_in})")
        log(f"claude thinking e2e took {time.monotonic() - t0:.0f} s")
    finally:
        c.kill()
        server.stop()


def simple_e2e(name: str, mod, runner_cls, start, files, bins: dict, lazarus: str, root: Path,
               preset: str, fmt: str, source_dir):
    """A print-mode agent killed in its tool, resumed by its preset (codex, pi)."""
    box = root / name
    box.mkdir(parents=True)
    steps = [
        mod.step(mod.reply_text(f"{name.upper()} resumed and done."), when=mod.after("call02"),
                 repeat=True),
        mod.step(mod.reply_call("call02", f"echo resumed >> {box}/resumed.txt"),
                 when=mod.says(RESUME_WORDS)),
        mod.step(mod.reply_call("call01", f"echo ran >> {box}/side.txt; touch {box}/t.started; "
                                          "sleep 300"), when=mod.says("AGENT TASK")),
        mod.FALLBACK,
    ]
    server = Server({"steps": steps}, box)
    a = runner_cls(box, bins, server)
    try:
        t0 = time.monotonic()
        start(a, "AGENT TASK: make the file")
        wait_for(f"{name}'s tool", lambda: (box / "t.started").exists(), 120)
        time.sleep(1)
        a.kill()
        env = dict(a.env)
        env["PATH"] = f"{Path(bins[name.upper() + '_BIN']).parent}:{env['PATH']}"
        env["XDG_STATE_HOME"] = str(box / "xdg")
        src = ["--source", f"{fmt}:{source_dir(a)}", "--preset", preset]
        done = lambda: any(f"{name.upper()} resumed and done" in p.read_text(errors="replace")
                           for p in files(a))
        runs = []
        for i in range(3):
            runs.append(boot_resume(lazarus, env, src))
            if i == 0:
                wait_for(f"{name}'s final answer", done, 180)
                time.sleep(2)
        actions = [r["action"] for rs in runs for r in rs]
        check(actions.count("resumed") == 1 and "failed" not in actions,
              f"{name}: resumed exactly once in 3 runs ({actions})")
        check(done(), f"{name}: the session continued to its final answer")
        side = (box / "side.txt").read_text().splitlines()
        check(len(side) == 1, f"{name}: the interrupted tool was not run again ({len(side)})")
        log(f"{name} e2e took {time.monotonic() - t0:.0f} s")
    finally:
        a.kill()
        server.stop()


# The resume message boot-resume sends a session cut off in its tool: the default message,
# which says the running call's effect is unknown and names the call where the session
# recorded it. The scripted models issue the tool call once, for the task, and answer the
# resume message with their final text, so count.txt says whether anything else re-ran it.
UNKNOWN_EFFECT = "effect is unknown"
RESUME_MARKERS = (UNKNOWN_EFFECT, RESUME_WORDS, "Your previous turn was interrupted")


def any_of(conds: list[dict]) -> dict:
    """A disjunction from `all` and `not` (the Gemini server has no `any`)."""
    return {"kind": "not", "cond": {"kind": "all", "of": [{"kind": "not", "cond": c}
                                                          for c in conds]}}


def gemini_texts(req: dict) -> list[str]:
    body = req.get("body") or {}
    return [p["text"] for c in body.get("contents", []) or [] for p in c.get("parts", []) or []
            if isinstance(p.get("text"), str)]


def openai_texts(req: dict) -> list[str]:
    out = []
    for m in req.get("messages", []) or []:
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out.extend(p["text"] for p in c if isinstance(p, dict)
                       and isinstance(p.get("text"), str))
    return out


def resumed_by_preset(name: str, fmt: str, lazarus: str, env: dict, src: list[str],
                      state_home: Path, done, count, received, says_call, t0: float):
    """Three boot-resume runs over a session killed in its tool, and the checks. `done()`:
    the session holds its final answer; `count()`: lines in count.txt; `received()`: the
    texts of the model requests made after the kill; `says_call(message)`: the resume
    message says what is known of the running call."""
    runs = []
    for i in range(3):
        log(f"{name}: boot-resume run {i + 1}")
        runs.append([r for r in boot_resume(lazarus, env, src) if r["format"] == fmt])
        if i == 0 and any(r["action"] == "resumed" for r in runs[0]):
            wait_for(f"{name}'s final answer", done, 180)
            time.sleep(2)
    first = runs[0]
    vw = lambda rs: [r["verdict"] + "/" + str(r.get("why")) for r in rs]
    check(len(first) == 1 and first[0]["verdict"] == "interrupted_tool_call",
          f"{name}: the killed session was reported interrupted_tool_call "
          f"({vw(first)})")
    actions = [r["action"] for rs in runs for r in rs]
    check(actions.count("resumed") == 1 and "failed" not in actions
          and [r["action"] for r in first] == ["resumed"],
          f"{name}: resumed exactly once in 3 runs ({actions}; "
          f"{[r.get('action_detail') for rs in runs for r in rs if r.get('action_detail')]})")
    # Later runs find the session finished (or already resumed). Other files may turn up:
    # Gemini CLI resumed in another minute than it started writes a second chat file with
    # the same session id and only the session context (skipped/empty); the actions check
    # above says nothing else was resumed.
    killed = {r["path"] for r in first}
    later = [r for rs in runs[1:] for r in rs if r["path"] in killed]
    others = [r for rs in runs for r in rs if r["path"] not in killed]
    check(len(later) == 2 and all(r["verdict"] == "finished" or r.get("why") == "already_resumed"
                                  for r in later),
          f"{name}: later runs left it alone (finished, or skipped/already_resumed) "
          f"({vw(later)}; other files: {vw(others)})")
    ok = [a for a in attempts(state_home) if a.get("ok")]
    check(len(ok) == 1, f"{name}: one accepted injection in the decision log ({len(ok)})")
    check(done(), f"{name}: the program continued the session to its final answer")
    n = count()
    check(n == 1, f"{name}: the side effect happened once, the interrupted tool was not run "
                  f"again ({n} lines in count.txt)")
    msgs = [t for t in received() if UNKNOWN_EFFECT in t]
    log(f"{name}: resume message received: {msgs[-1] if msgs else None!r}")
    check(bool(msgs), f"{name}: the model received the resume message saying the running "
                      f"call's effect is unknown ({len(msgs)} texts)")
    check(bool(msgs) and all(says_call(m) for m in msgs),
          f"{name}: the resume message says what is known of the running call")
    log(f"{name} e2e took {time.monotonic() - t0:.0f} s")


def gemini_e2e(bins: dict, lazarus: str, root: Path):
    """Gemini CLI (`gemini -p`, yolo) killed in its run_shell_command, resumed by
    `--preset gemini` (`gemini --resume UUID -p MESSAGE`, the user's approval mode)."""
    import gemini as gm
    box = root / "gemini"
    box.mkdir(parents=True)
    final = "GEMINI resumed and done."
    steps = [
        gm.step(gm.text(final), when=any_of([gm.cond_text(t) for t in RESUME_MARKERS]),
                repeat=True),
        gm.step(gm.text("Done: wrote the line."), when=gm.cond_result()),
        gm.step(gm.call("call01", gm.counted(box, sleep_first=True)),
                when=gm.cond_text("AGENT TASK")),
        gm.FALLBACK,
    ]
    server = Server({"steps": steps}, box, program=[sys.executable, str(HERE / "gemini_server.py")])
    g = gm.Gemini(box, bins, server)
    try:
        t0 = time.monotonic()
        g.prompt("AGENT TASK: make the file")
        wait_for("gemini's shell tool", lambda: (box / "tool.started").exists(), 120)
        time.sleep(1)
        g.kill()
        log(f"gemini: killed in its shell tool after {time.monotonic() - t0:.0f} s")
        before = server.count()
        env = dict(g.env)
        env["PATH"] = f"{Path(bins['GEMINI_BIN']).parent}:{env['PATH']}"
        src = ["--source", f"gemini-cli:{g.gemini_home}", "--preset", "gemini"]
        chats = lambda: [p for p in g.sessions() if "/chats/" in str(p)]
        done = lambda: any(final in p.read_text(errors="replace") for p in chats())
        resumed_by_preset(
            "gemini", "gemini-cli", lazarus, env, src, g.home / ".local" / "state", done,
            g.count, lambda: [t for r in server.requests()[before:] for t in gemini_texts(r)],
            lambda m: "not recorded" in m, t0)
    finally:
        g.kill()
        server.stop()


def opencode_rows(o, sql: str) -> list[tuple]:
    """Rows of OpenCode's database, read from a copy (with its WAL): opening the live one
    could checkpoint it, and change what boot-resume sees."""
    with tempfile.TemporaryDirectory() as tmp:
        for f in o.files():
            shutil.copy(f, Path(tmp) / f.name)
        db = Path(tmp) / "opencode.db"
        if not db.exists():
            return []
        c = sqlite3.connect(str(db))
        try:
            return c.execute(sql).fetchall()
        finally:
            c.close()


def opencode_e2e(bins: dict, lazarus: str, root: Path):
    """OpenCode (`opencode run`) killed in its bash tool, resumed by `--preset opencode`
    (`opencode run --session ID MESSAGE`)."""
    import opencode as ocm
    box = root / "opencode"
    box.mkdir(parents=True)
    final = "OPENCODE resumed and done."
    steps = [
        ocm.step(ocm.text(final), when=ocm.main_turn(
            {"kind": "any", "of": [ocm.says(t) for t in RESUME_MARKERS]}), repeat=True),
        ocm.step(ocm.text("Done: wrote the line."), when=ocm.main_turn(
            {"kind": "last_tool_result", "call_id": "call01"})),
        ocm.step(ocm.call("call01", ocm.counted(box, sleep_first=True)),
                 when=ocm.main_turn(ocm.says("AGENT TASK"))),
        ocm.FALLBACK,
    ]
    server = Server({"steps": steps}, box)
    o = ocm.OpenCode(box, bins, server)
    try:
        t0 = time.monotonic()
        o.prepare_db()
        o.prompt("AGENT TASK: make the file")
        wait_for("opencode's bash tool", lambda: (o.work / "tool.started").exists(), 120)
        time.sleep(1)
        o.kill()
        log(f"opencode: killed in its bash tool after {time.monotonic() - t0:.0f} s")
        before = server.count()
        env = dict(o.env)
        env["PATH"] = f"{Path(bins['OPENCODE_BIN']).parent}:{env['PATH']}"
        src = ["--source", f"opencode:{o.data}", "--preset", "opencode"]
        done = lambda: bool(opencode_rows(
            o, "SELECT id FROM part WHERE json_extract(data, '$.type') = 'text' AND "
               f"json_extract(data, '$.text') LIKE '%{final}%'"))
        resumed_by_preset(
            "opencode", "opencode", lazarus, env, src, o.home / ".local" / "state", done,
            o.count, lambda: [t for r in server.requests()[before:] if r.get("tools")
                              for t in openai_texts(r)],
            lambda m: "bash" in m, t0)
    finally:
        o.kill()
        server.stop()


# case name (on the command line) -> the program binary it needs besides NODE_BIN
CASES = {"claude": "CLAUDE_BIN", "claude-mcp": "CLAUDE_BIN", "openclaw": "OPENCLAW_BIN",
         "pi": "PI_BIN",
         "codex": "CODEX_BIN", "claude-thinking": "CLAUDE_BIN", "gemini": "GEMINI_BIN",
         "opencode": "OPENCODE_BIN"}


def main():
    which = sys.argv[1:] or list(CASES)
    unknown = [w for w in which if w not in CASES]
    if unknown:
        raise SystemExit(f"unknown case {', '.join(unknown)}; known: {', '.join(CASES)}")
    need = ["NODE_BIN"] + sorted({CASES[w] for w in which})
    bins = {k: os.environ.get(k, "") for k in need}
    lazarus = os.environ.get("LAZARUS", "")
    if not all(bins.values()) or not lazarus:
        raise SystemExit(f"set {' '.join(need)} LAZARUS (see scripts/e2e-real-agents.sh)")
    root = Path(tempfile.mkdtemp(prefix="lazarus-e2e-"))

    def pi_e2e():
        import pi as pim
        simple_e2e("pi", pim, pim.Pi, lambda a, m: a.print_mode(m), lambda a: a.sessions(),
                   bins, lazarus, root, "pi", "pi",
                   lambda a: a.home / ".pi" / "agent" / "sessions")

    def codex_e2e():
        import codex as cxm
        simple_e2e("codex", cxm, cxm.Codex, lambda a, m: a.exec(m), lambda a: a.rollouts(),
                   bins, lazarus, root, "codex", "codex",
                   lambda a: a.codex_home / "sessions")

    runs = {
        "claude": lambda: claude_e2e(bins, lazarus, root),
        "claude-mcp": lambda: claude_mcp_e2e(bins, lazarus, root),
        "claude-thinking": lambda: claude_thinking_e2e(bins, root),
        "openclaw": lambda: openclaw_e2e(bins, lazarus, root),
        "pi": pi_e2e,
        "codex": codex_e2e,
        "gemini": lambda: gemini_e2e(bins, lazarus, root),
        "opencode": lambda: opencode_e2e(bins, lazarus, root),
    }
    try:
        for case, run in runs.items():
            if case not in which:
                continue
            try:
                run()
            except Exception as e:  # noqa: BLE001 - a step that never happened is a failure
                check(False, f"{case}: e2e step failed: {e}")
    finally:
        if failures:
            log(f"kept {root} for inspection")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"e2e-real-agents: {len(passed)} passed, {len(failures)} failed", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
