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
3. pi (`pi -p`) and Codex (`codex exec`), each SIGKILLed in its tool and resumed exactly once
   by its preset to its final answer.
4. The opaque reasoning round trip, real clients against the testkit's streams: Claude Code
   (`claude -p`, thinking on) must send the `thinking` block the scripted Anthropic server
   issued, with its `signature`, back byte-identical with the tool result; this is what
   proves the testkit's `thinking_delta` / `signature_delta` events are what a real client
   consumes (Codex's encrypted reasoning items are checked in its capture).

Needs NODE_BIN OPENCLAW_BIN CLAUDE_BIN (scripts/capture-real/install.sh), LAZARUS (the
binary) and SCRIPTED_MODEL_SERVER. Exit 0 when every check held; prints each check.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Server, log, wait_for  # noqa: E402
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


def main():
    bins = {k: os.environ.get(k, "") for k in
            ("NODE_BIN", "OPENCLAW_BIN", "CLAUDE_BIN", "CODEX_BIN", "PI_BIN")}
    lazarus = os.environ.get("LAZARUS", "")
    if not all(bins.values()) or not lazarus:
        raise SystemExit("set NODE_BIN OPENCLAW_BIN CLAUDE_BIN CODEX_BIN PI_BIN LAZARUS "
                         "(see scripts/e2e-real-agents.sh)")
    root = Path(tempfile.mkdtemp(prefix="lazarus-e2e-"))
    which = sys.argv[1:] or ["claude", "openclaw", "pi", "codex", "claude-thinking"]
    try:
        if "claude" in which:
            claude_e2e(bins, lazarus, root)
        if "claude-thinking" in which:
            claude_thinking_e2e(bins, root)
        if "openclaw" in which:
            openclaw_e2e(bins, lazarus, root)
        if "pi" in which:
            import pi as pim
            simple_e2e("pi", pim, pim.Pi, lambda a, m: a.print_mode(m), lambda a: a.sessions(),
                       bins, lazarus, root, "pi", "pi",
                       lambda a: a.home / ".pi" / "agent" / "sessions")
        if "codex" in which:
            import codex as cxm
            simple_e2e("codex", cxm, cxm.Codex, lambda a, m: a.exec(m), lambda a: a.rollouts(),
                       bins, lazarus, root, "codex", "codex",
                       lambda a: a.codex_home / "sessions")
    except Exception as e:  # noqa: BLE001 - a step that never happened is a failure
        check(False, f"e2e step failed: {e}")
    finally:
        if failures:
            log(f"kept {root} for inspection")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"e2e-real-agents: {len(passed)} passed, {len(failures)} failed", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
