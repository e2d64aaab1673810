"""LazarusSession against the real OpenAI Agents SDK protocol, with real processes, on local
files and on PostgreSQL (`where`), each session checked with `lazarus sessions verify`.

Run: ``scripts/python-tests.sh`` (it builds the binaries and the package first).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import assert_verified, bin_path, kinds, lazarus, listed
from lazarus.agents import LazarusSession


def run(coro):
    return asyncio.run(coro)


def test_items_round_trip_as_equal_json_and_pop_and_clear_are_records(where):
    items = [
        {"role": "user", "content": "What is 2+2?"},
        {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a":2,"b":2}'},
        {"type": "function_call_output", "call_id": "c1", "output": "4"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "4", "annotations": []}]},
    ]

    async def go():
        s = LazarusSession("s1", **where)
        await s.add_items(items)
        assert await s.get_items() == items
        assert await s.get_items(limit=2) == items[2:]
        assert await s.pop_item() == items[-1]
        assert await s.get_items() == items[:-1]
        await s.clear_session()
        assert await s.get_items() == []
        assert await s.pop_item() is None
        s.close()

    run(go())
    # the four items added at once are one record (durable together), each popped by its own
    assert kinds(where, "s1") == ["header", "host_items", "host_pop", "host_clear"]
    assert_verified(where, "s1")
    assert listed(where)["s1"]["title"] == "What is 2+2?"


def test_a_second_process_gets_locked_error_naming_the_holder(where):
    async def go():
        s = LazarusSession("held", **where)
        await s.add_items([{"role": "user", "content": "mine"}])
        code = textwrap.dedent(
            f"""
            from lazarus import LockedError
            from lazarus.agents import LazarusSession
            try:
                LazarusSession("held", **{where!r})
            except LockedError as e:
                print("locked:", e)
            """
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        s.close()
        return out

    out = run(go())
    assert "locked:" in out.stdout, out.stderr
    assert f"pid {os.getpid()}" in out.stdout
    assert kinds(where, "held") == ["header", "host_item"]


WRITER = textwrap.dedent(
    """
    import asyncio, json, sys
    from lazarus.agents import LazarusSession

    async def main():
        s = LazarusSession("loop", **json.loads(sys.argv[1]))
        n = len(await s.get_items())
        while True:  # a turn of three items per call
            await s.add_items([{"role": "user", "content": f"item {n + i}"} for i in range(3)])
            print(n + 2, flush=True)  # acknowledged: durable before add_items returned
            n += 3

    asyncio.run(main())
    """
)


def test_kill_9_while_adding_loses_no_acknowledged_item_adds_none_twice_nor_half_a_call(where):
    acknowledged = -1
    rounds = int(os.environ.get("LAZARUS_PY_KILLS", "200"))
    for round_ in range(rounds):
        p = subprocess.Popen(
            [sys.executable, "-c", WRITER, json.dumps(where)],
            stdout=subprocess.PIPE,
            text=True,
        )
        # let it acknowledge a few (a different number each round), then kill -9
        want = 1 + round_ % 4
        seen = 0
        while seen < want:
            line = p.stdout.readline()
            if not line:
                break
            acknowledged = max(acknowledged, int(line))
            seen += 1
        p.send_signal(signal.SIGKILL)
        p.wait()

    async def check():
        s = LazarusSession("loop", **where)
        items = await s.get_items()
        s.close()
        return items

    items = run(check())
    texts = [i["content"] for i in items]
    # every acknowledged item present, once, in order; nothing after a gap; each call's
    # items all there or none
    assert texts == [f"item {n}" for n in range(len(texts))]
    assert len(texts) % 3 == 0, f"a call's items were cut: {len(texts)} items"
    assert len(texts) > acknowledged
    assert acknowledged >= rounds, "the writers acknowledged fewer items than rounds"
    assert_verified(where, "loop")


RUNNER = textwrap.dedent(
    """
    import asyncio, os, sys
    from openai import AsyncOpenAI
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents import OpenAIChatCompletionsModel
    from lazarus.agents import LazarusSession, LazarusRunHooks

    set_tracing_disabled(True)
    import json
    where, base_url, ws = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]

    @function_tool
    def send_email(to: str) -> str:
        \"\"\"Sends an email (an effect counted in a file).\"\"\"
        with open(os.path.join(ws, "sent"), "a") as f:
            f.write(to + "\\n")
        open(os.path.join(ws, "started"), "w").close()
        while not os.path.exists(os.path.join(ws, "go")):
            import time; time.sleep(0.05)
        return "sent"

    async def main():
        model = OpenAIChatCompletionsModel(
            model="m", openai_client=AsyncOpenAI(base_url=base_url, api_key="x")
        )
        agent = Agent(name="a", instructions="help", model=model, tools=[send_email])
        s = LazarusSession("run", **where)
        settled = await s.settle_in_doubt()
        if settled:
            print("in doubt:", settled, flush=True)
        result = await Runner.run(agent, "email bob", session=s, hooks=LazarusRunHooks(s))
        print("final:", result.final_output, flush=True)
        s.close()

    asyncio.run(main())
    """
)


def test_a_runner_killed_mid_tool_reports_the_call_in_doubt_and_never_runs_it_twice(
    tmp_path, where
):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [
        {"when": {"kind": "any_message_contains", "text": "cut off"}, "repeat": True,
         "reply": {"kind": "response", "text": "It may have been sent; I will not send it again."}},
        {"when": {"kind": "last_tool_result"}, "repeat": True,
         "reply": {"kind": "response", "text": "Sent."}},
        {"repeat": True, "reply": {"kind": "response", "tool_calls": [
            {"id": "call_{n}", "name": "send_email", "arguments": {"to": "bob"}}]}},
    ]}))
    server = subprocess.Popen(
        [bin_path("scripted-model-server"), "--script", str(script)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        line = server.stdout.readline()
        base_url = line.strip().split("listening on ")[1] + "/v1"
        ws = tmp_path / "ws"
        ws.mkdir()
        first = subprocess.Popen(
            [sys.executable, "-c", RUNNER, json.dumps(where), base_url, str(ws)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.time() + 60
        while not (ws / "started").exists():
            assert first.poll() is None, first.stderr.read()
            assert time.time() < deadline, "the tool never started"
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first.wait()
        # the call cut off is in doubt in every view, as a native call's is: the listing
        # (once the dead writer's lock or lease is gone) and `--status in_doubt`
        deadline = time.time() + 30
        while listed(where)["run"]["status"] == "running":
            assert time.time() < deadline, "the killed writer still holds the session"
            time.sleep(0.1)
        assert listed(where)["run"]["status"] == "in_doubt", listed(where)["run"]
        out = lazarus(where, "list", "--status", "in_doubt", "--json")
        assert out.returncode == 0, out.stderr
        assert "run" in [json.loads(l)["id"] for l in out.stdout.splitlines() if l.strip()]
        (ws / "go").touch()
        second = subprocess.run(
            [sys.executable, "-c", RUNNER, json.dumps(where), base_url, str(ws)],
            capture_output=True, text=True, timeout=120,
        )
        assert second.returncode == 0, second.stderr
        assert "in doubt:" in second.stdout, second.stdout
        assert "not send it again" in second.stdout, second.stdout
        assert (ws / "sent").read_text().splitlines() == ["bob"], "the email went out twice"
        recorded = kinds(where, "run")
        # the intent before the (killed) tool, then the notice closing it
        assert recorded.count("host_call_intent") == 1 and recorded.count("host_call_outcome") == 1
        assert_verified(where, "run")
    finally:
        server.terminate()
        server.wait()


def test_a_session_another_program_wrote_is_refused_and_left_as_it_was(tmp_path):
    from lazarus import LazarusError
    from lazarus.langgraph import LazarusSaver

    where = {"directory": str(tmp_path / "sessions")}
    with LazarusSaver(**where) as saver:  # a LangGraph thread
        saver.put({"configurable": {"thread_id": "shared", "checkpoint_ns": ""}},
                  {"id": "cp-1", "channel_versions": {}}, {}, {})
    out = subprocess.run([bin_path("lazarus"), "sessions", "create", "--id", "mine",
                          "--session-dir", where["directory"]], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for sid, writer in [("shared", '"langgraph"'), ("mine", "lazarus itself")]:
        # with crash debris at its end, which an open for writing would cut: not ours to cut
        ledger = tmp_path / "sessions" / f"{sid}.jsonl"
        ledger.write_bytes(ledger.read_bytes() + b'{"seq":9,"ts"')
        before = ledger.read_bytes()
        with pytest.raises(LazarusError, match=f"written by {writer}"):
            LazarusSession(sid, **where)
        assert (tmp_path / "sessions" / f"{sid}.jsonl").read_bytes() == before


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_a_record_a_newer_version_wrote_is_not_called_corruption(tmp_path):
    from lazarus import CorruptionError, LazarusError

    where = {"directory": str(tmp_path / "sessions")}
    s = LazarusSession("newer", **where)
    run(s.add_items([{"role": "user", "content": "hi"}]))
    s.close()
    ledger = tmp_path / "sessions" / "newer.jsonl"
    # a checksum-valid line of a kind this build does not know, framed as the ledger frames
    body = b'{"seq":2,"ts":"2026-12-07T10:00:00.000Z","kind":"host_teleport","data":{}'
    line = body + b',"crc":"%08x"}\n' % _crc32c(body + b"}")
    ledger.write_bytes(ledger.read_bytes() + line)
    before = ledger.read_bytes()
    with pytest.raises(LazarusError) as e:
        LazarusSession("newer", **where)
    assert not isinstance(e.value, CorruptionError), e.value
    assert "upgrade `lazarus`" in str(e.value), e.value
    assert ledger.read_bytes() == before
