"""LangGraph's three durability modes on LazarusSaver: graphs of many shapes through the sync
and the async API, a thousand invokes in a loop, and kill -9 at every step of a graph with
side effects, each mode keeping what LangGraph's documentation promises of it."""

from __future__ import annotations

import asyncio
import json
import operator
import subprocess
import sys
import textwrap
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

from conftest import assert_verified, kinds, lazarus
from lazarus.langgraph import LazarusSaver

MODES = ["async", "exit", "sync"]


class Log(TypedDict):
    log: Annotated[list, operator.add]


def chain(n: int) -> StateGraph:
    g = StateGraph(Log)
    names = [f"n{i}" for i in range(n)]
    for name in names:
        g.add_node(name, lambda s, name=name: {"log": [name]})
    g.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g


def branches() -> StateGraph:
    """a fans out to b and c (one step), d joins them; then a conditional edge to e or f."""
    g = StateGraph(Log)
    for name in "abcdef":
        g.add_node(name, lambda s, name=name: {"log": [name]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("a", "c")
    g.add_edge(["b", "c"], "d")
    g.add_conditional_edges("d", lambda s: "e" if len(s["log"]) % 2 else "f")
    g.add_edge("e", END)
    g.add_edge("f", END)
    return g


def subgraph() -> StateGraph:
    """A node that is a graph of its own (its checkpoints in a namespace of their own)."""
    inner = chain(3).compile()
    g = StateGraph(Log)
    g.add_node("before", lambda s: {"log": ["before"]})
    g.add_node("inner", inner)
    g.add_node("after", lambda s: {"log": ["after"]})
    g.add_edge(START, "before")
    g.add_edge("before", "inner")
    g.add_edge("inner", "after")
    g.add_edge("after", END)
    return g


def map_reduce() -> StateGraph:
    """Send: one task per item, in one step."""
    g = StateGraph(Log)
    g.add_node("split", lambda s: {})
    g.add_node("work", lambda item: {"log": [f"w{item['i']}"]})
    g.add_node("join", lambda s: {"log": ["join"]})
    g.add_edge(START, "split")
    g.add_conditional_edges("split", lambda s: [Send("work", {"i": i}) for i in range(4)])
    g.add_edge("work", "join")
    g.add_edge("join", END)
    return g


SHAPES = [(f"chain-{n}", lambda n=n: chain(n)) for n in (1, 2, 3, 4, 5, 8, 13, 20)] + [
    ("branches", branches),
    ("subgraph", subgraph),
    ("map-reduce", map_reduce),
]


def _expected(name: str, runs: int) -> list:
    """What `runs` invokes of a shape leave in `log`, computed without any checkpointer."""
    from langgraph.checkpoint.memory import InMemorySaver

    app = dict(SHAPES)[name]().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "x"}}
    for _ in range(runs):
        out = app.invoke({"log": []}, config)
    return out["log"]


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("mode", MODES)
def test_every_durability_mode_on_graphs_of_every_shape(tmp_path, mode, api):
    where = {"directory": str(tmp_path / "sessions")}
    runs = 3
    with LazarusSaver(**where) as saver:
        for name, build in SHAPES:
            app = build().compile(checkpointer=saver)
            config = {"configurable": {"thread_id": f"{name}/{mode}:{api}"}}
            for _ in range(runs):
                if api == "sync":
                    out = app.invoke({"log": []}, config, durability=mode)
                else:
                    out = asyncio.run(app.ainvoke({"log": []}, config, durability=mode))
            assert sorted(out["log"]) == sorted(_expected(name, runs)), name
            # what a program reads back is what it ran: the saved state, its history
            state = app.get_state(config)
            assert sorted(state.values["log"]) == sorted(out["log"]) and not state.next, name
            history = list(app.get_state_history(config))
            assert len(history) >= runs, (name, len(history))
    out = lazarus(where, "verify", "--all")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"checked {len(SHAPES)} sessions: {len(SHAPES)} clean" in out.stdout + out.stderr


def test_an_interrupted_graph_resumes_with_the_answer_in_every_mode(tmp_path):
    class S(TypedDict):
        log: Annotated[list, operator.add]

    def ask(s):
        answer = interrupt({"question": "go on?"})
        return {"log": [f"answer:{answer}"]}

    g = StateGraph(S)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("ask", ask)
    g.add_edge(START, "a")
    g.add_edge("a", "ask")
    g.add_edge("ask", END)
    with LazarusSaver(directory=str(tmp_path / "s")) as saver:
        app = g.compile(checkpointer=saver)
        for mode in MODES:
            config = {"configurable": {"thread_id": f"ask-{mode}"}}
            first = app.invoke({"log": []}, config, durability=mode)
            assert first["__interrupt__"][0].value == {"question": "go on?"}, mode
            assert app.get_state(config).next == ("ask",), mode
            done = app.invoke(Command(resume="yes"), config, durability=mode)
            assert done["log"] == ["a", "answer:yes"], mode


def test_a_thousand_invokes_with_the_default_durability_refuse_nothing(tmp_path):
    """The default mode ("async") puts a step's writes while its checkpoint is still on its
    way: twenty threads of chains of 1 to 20 nodes, 1,000 invokes in all, not one refused."""
    where = {"directory": str(tmp_path / "sessions")}
    lengths = [1 + i % 20 for i in range(20)]
    with LazarusSaver(**where) as saver:
        apps = [chain(n).compile(checkpointer=saver) for n in lengths]
        for i in range(1000):
            t = i % 20
            config = {"configurable": {"thread_id": f"loop-{t}"}}
            out = apps[t].invoke({"log": []}, config)  # LangGraph's default durability
            assert len(out["log"]) == lengths[t] * (i // 20 + 1)
    recorded = kinds(where, "loop-4")
    assert "host_pending_writes" in recorded, "the writes were not recorded"
    out = lazarus(where, "verify", "--all")
    assert out.returncode == 0 and "checked 20 sessions: 20 clean" in out.stdout + out.stderr, out


KILLED = textwrap.dedent(
    """
    import json, operator, os, signal, sys
    from typing import Annotated, TypedDict
    from langgraph.graph import StateGraph, START, END
    from lazarus.langgraph import LazarusSaver

    where, effects, mode, kill = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    # kill: "RUN:NODE:WHEN" (the invoke, the node, before or after its side effect), or "-"

    class State(TypedDict):
        log: Annotated[list, operator.add]
        done: Annotated[int, operator.add]

    def effect(line):
        with open(effects, "a") as f:
            f.write(line + "\\n")
            f.flush()
            os.fsync(f.fileno())

    def node(name):
        def run(state):
            run_no = state.get("done", 0) + 1
            if kill == f"{run_no}:{name}:before":
                os.kill(os.getpid(), signal.SIGKILL)
            effect(f"{run_no}{name}")  # the side effect, counted
            if kill == f"{run_no}:{name}:after":
                os.kill(os.getpid(), signal.SIGKILL)
            return {"log": [f"{run_no}{name}"], "done": 1 if name == "c" else 0}
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
        config = {"configurable": {"thread_id": "killed"}}
        if saver.get_tuple(config) is not None:
            # an invoke cut off goes on from its last checkpoint (and a finished one stays
            # finished: nothing runs), as LangGraph's documentation resumes a graph
            graph.invoke(None, config, durability=mode)
        while graph.get_state(config).values.get("done", 0) < 2:  # two whole invokes
            graph.invoke({"log": []}, config, durability=mode)
        print("final:", json.dumps(graph.get_state(config).values["log"]), flush=True)
    """
)

KILL_POINTS = [f"{run}:{node}:{when}" for run in (1, 2) for node in "abc" for when in ("before", "after")]
STEPS = ["1a", "1b", "1c", "2a", "2b", "2c"]


@pytest.mark.parametrize("mode", MODES)
def test_kill_9_at_every_step_keeps_what_the_mode_promises(tmp_path, mode):
    """A 3-node graph invoked twice, killed before and after each node's side effect in each
    invoke, then run again. What ran twice is what the mode promises may:
    - "sync" resumes after the last finished step: only the node killed after its effect
      runs again (a node is at least once: the crash came inside it);
    - "async" saves in the background while the next steps run ("a small risk that
      checkpoints might not be written"): the steps whose saving was still under way run
      again, the latest steps before the kill and never one before a step that was kept;
    - "exit" resumes from the start of the invoke cut off (the last completed one is kept).
    Whatever the mode, the state read at the end holds each step once."""
    reran: dict[str, list[str]] = {}
    for point in KILL_POINTS:
        where = {"directory": str(tmp_path / point.replace(":", "-"))}
        effects = tmp_path / f"effects-{point.replace(':', '-')}"
        effects.touch()
        args = [sys.executable, "-c", KILLED, json.dumps(where), str(effects), mode]
        p = subprocess.run(args + [point], capture_output=True, text=True, timeout=120)
        assert p.returncode == -9, f"{point}: not killed: {p.stdout}{p.stderr}"
        p = subprocess.run(args + ["-"], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"{point}: {p.stderr}"
        assert f"final: {json.dumps(STEPS)}" in p.stdout, f"{point}: {p.stdout}"
        ran = effects.read_text().split()
        assert sorted(set(ran)) == STEPS, (point, ran)
        twice = sorted(s for s in set(ran) if ran.count(s) > 1)
        assert all(ran.count(s) <= 2 for s in ran), (point, ran)
        reran[point] = twice
        assert_verified(where, "killed")
    print(f"{mode}: ran again after kill -9 at", json.dumps(reran))

    for point, twice in reran.items():
        run, node, when = point.split(":")
        killed = f"{run}{node}"
        before = STEPS[: STEPS.index(killed)]
        if mode == "sync":
            assert twice == ([killed] if when == "after" else []), (point, twice)
        elif mode == "async":
            # what ran again is the newest steps up to the kill: a suffix, never a gap
            upto = before + ([killed] if when == "after" else [])
            assert twice == upto[len(upto) - len(twice) :], (point, twice)
            assert when == "before" or killed in twice, (point, twice)
        else:
            # the invoke cut off runs again from its start: what it had run before, twice;
            # the invoke completed before it stands
            this_run = [s for s in before if s.startswith(run)]
            assert twice == sorted(this_run + ([killed] if when == "after" else [])), (point, twice)
