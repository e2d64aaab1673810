"""LazarusSaver against LangGraph's own conformance suite and a real graph, with real
processes, on local files and on PostgreSQL (`where`)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate

from conftest import assert_verified, kinds, listed
from lazarus import CorruptionError, CrashDebrisWarning
from lazarus.langgraph import LazarusSaver

# What every saver must do (the suite's base capabilities), and the optional ones LazarusSaver
# offers too (each a record: the ledger keeps what they remove).
BASE = ["put", "put_writes", "get_tuple", "list", "delete_thread"]
OPTIONAL = ["copy_thread", "delete_for_runs", "prune"]


def test_the_langgraph_conformance_suite_passes(where):
    @checkpointer_test(name="LazarusSaver")
    async def lazarus_saver():
        saver = LazarusSaver(**where)
        yield saver
        saver.close()

    report = asyncio.run(validate(lazarus_saver))
    for cap in BASE + OPTIONAL:
        result = report.results[cap]
        assert result.detected and result.passed is True, f"{cap}: {result.failures}"
        assert result.tests_passed > 0 and result.tests_failed == 0, (cap, result)


def _checkpoint_config(saver: LazarusSaver, thread: str) -> dict:
    from langgraph.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    cp["channel_values"] = {"x": 1}
    cp["channel_versions"] = {"x": saver.get_next_version(None, None)}
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(config, cp, {"source": "input", "step": -1}, cp["channel_versions"])


OTHER_WRITER = textwrap.dedent(
    """
    import json, sys
    from lazarus import LockedError
    from lazarus.langgraph import LazarusSaver
    from langgraph.checkpoint.base import empty_checkpoint

    saver = LazarusSaver(**json.loads(sys.argv[1]))
    config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    seen = saver.get_tuple(config)
    print("read:", seen.checkpoint["channel_values"] if seen else None, flush=True)
    try:
        saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        print("wrote", flush=True)
    except LockedError as e:
        print("locked:", e, flush=True)
    saver.close()
    """
)


def test_one_writer_per_thread_a_second_program_is_locked_out_but_may_read(where):
    saver = LazarusSaver(**where)
    _checkpoint_config(saver, "t1")
    out = subprocess.run(
        [sys.executable, "-c", OTHER_WRITER, json.dumps(where)], capture_output=True, text=True
    )
    assert "read: {'x': 1}" in out.stdout, out.stdout + out.stderr
    assert "locked:" in out.stdout and f"pid {os.getpid()}" in out.stdout, out.stdout + out.stderr
    assert kinds(where, "t1") == ["header", "host_checkpoint"], "the refused put wrote something"
    saver.close()
    out = subprocess.run(
        [sys.executable, "-c", OTHER_WRITER, json.dumps(where)], capture_output=True, text=True
    )
    assert "wrote" in out.stdout, out.stdout + out.stderr
    assert_verified(where, "t1")


GRAPH = textwrap.dedent(
    """
    import json, operator, os, signal, sys
    from typing import Annotated, TypedDict
    from langgraph.graph import StateGraph, START, END
    from lazarus.langgraph import LazarusSaver

    where, effects, kill_before = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]

    class State(TypedDict):
        log: Annotated[list, operator.add]

    def node(name):
        def run(state):
            if name == kill_before:
                os.kill(os.getpid(), signal.SIGKILL)  # between steps: the last one is saved
            with open(effects, "a") as f:  # the side effect, counted
                f.write(name + "\\n")
                f.flush()
                os.fsync(f.fileno())
            return {"log": [name]}
        return run

    g = StateGraph(State)
    for name in "abc":
        g.add_node(name, node(name))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    with LazarusSaver(**where) as saver:
        graph = g.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "graph-1"}}
        started = saver.get_tuple(config) is not None
        out = graph.invoke(None if started else {"log": []}, config, durability="sync")
        print("final:", json.dumps(out["log"]), flush=True)
    """
)


def test_a_graph_killed_between_steps_resumes_from_its_last_checkpoint_each_effect_once(
    tmp_path, where
):
    effects = tmp_path / "effects"
    effects.touch()
    args = [sys.executable, "-c", GRAPH, json.dumps(where), str(effects)]
    for kill_before, done in [("b", ["a"]), ("c", ["a", "b"])]:
        p = subprocess.run(args + [kill_before], capture_output=True, text=True, timeout=120)
        assert p.returncode == -9, f"not killed before {kill_before}: {p.stdout}{p.stderr}"
        assert effects.read_text().split() == done
    p = subprocess.run(args + ["-"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert 'final: ["a", "b", "c"]' in p.stdout, p.stdout
    assert effects.read_text().split() == ["a", "b", "c"], "a node ran twice"
    recorded = kinds(where, "graph-1")
    assert recorded.count("host_checkpoint") >= 4 and "host_pending_writes" in recorded
    assert_verified(where, "graph-1")
    assert listed(where)["graph-1"]["title"] == "LangGraph thread graph-1"


def test_a_damaged_ledger_is_reported_and_a_torn_tail_keeps_what_was_durable(tmp_path):
    where = {"directory": str(tmp_path / "sessions")}
    with LazarusSaver(**where) as saver:
        first = _checkpoint_config(saver, "t2")
        second = _checkpoint_config(saver, "t2")
    ledger = tmp_path / "sessions" / "t2.jsonl"
    good = ledger.read_bytes()

    # a flipped bit in a record a later one follows (so it was acknowledged): an error
    # naming the file and the line, never "no checkpoint"
    lines = good.split(b"\n")
    damaged = bytearray(lines[1])
    damaged[len(damaged) // 2] ^= 0x01
    ledger.write_bytes(b"\n".join([lines[0], bytes(damaged), *lines[2:]]))
    with LazarusSaver(**where) as saver:
        for config in (first, second, {"configurable": {"thread_id": "t2"}}):
            with pytest.raises(CorruptionError) as e:
                saver.get_tuple(config)
            assert "t2.jsonl" in str(e.value) and "line 2" in str(e.value), str(e.value)
        with pytest.raises(CorruptionError):
            _checkpoint_config(saver, "t2")  # nor is anything written after it

    # a torn last write (never acknowledged): the writer cuts it, says so and where it saved
    # it; every acknowledged checkpoint is read
    assert ledger.read_bytes() == b"\n".join([lines[0], bytes(damaged), *lines[2:]])
    ledger.write_bytes(good + b'{"seq":3,"kind":"host_chec')
    with LazarusSaver(**where) as saver:
        with pytest.warns(CrashDebrisWarning, match="cut 26 bytes"):
            _checkpoint_config(saver, "t2")
        assert saver.get_tuple(second).checkpoint["channel_values"] == {"x": 1}
        assert len(list(saver.list({"configurable": {"thread_id": "t2"}}))) == 3


def test_put_writes_is_recorded_once_per_task_and_index(tmp_path):
    where = {"directory": str(tmp_path / "sessions")}
    with LazarusSaver(**where) as saver:
        stored = _checkpoint_config(saver, "t3")
        saver.put_writes(stored, [("ch", "first"), ("other", 1)], "task-1")
        saver.put_writes(stored, [("ch", "second"), ("other", 2)], "task-1")  # a retry
        saver.put_writes(stored, [("ch", "mine")], "task-2")
        writes = saver.get_tuple(stored).pending_writes
    assert sorted(writes) == [("task-1", "ch", "first"), ("task-1", "other", 1), ("task-2", "ch", "mine")]
    assert kinds(where, "t3").count("host_pending_writes") == 2, "a retried put_writes was recorded again"


def test_list_without_a_config_lists_every_thread_and_no_other_session(tmp_path):
    from lazarus.agents import LazarusSession

    where = {"directory": str(tmp_path / "sessions")}
    other = LazarusSession("a-chat", **where)  # an Agents SDK session in the same directory
    asyncio.run(other.add_items([{"role": "user", "content": "hi"}]))
    other.close()
    with LazarusSaver(**where) as saver:
        _checkpoint_config(saver, "held-here")
    with LazarusSaver(**where) as saver:
        _checkpoint_config(saver, "t-2")
        _checkpoint_config(saver, "t-2")
        found = [t.config["configurable"]["thread_id"] for t in saver.list(None)]
        assert sorted(found) == ["held-here", "t-2", "t-2"], found
        assert len(list(saver.list(None, limit=2))) == 2
