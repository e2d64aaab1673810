#!/usr/bin/env python3
"""The Python package against the savers it replaces, in one process, on the same work:

- LangGraph: the same 2-node graph invoked with ``durability="sync"`` (each step's checkpoint
  saved before the next starts) on ``LazarusSaver`` and on LangGraph's ``SqliteSaver`` with
  WAL and ``synchronous=FULL`` (so both are durable): checkpoints saved per second.
- The OpenAI Agents SDK: ``LazarusSession.add_items`` and ``SQLiteSession.add_items`` (the
  SDK's own, WAL; ``synchronous=FULL`` checked), one turn's items per call: items per second.

The two sides take turns, round after round, each in a fresh directory of the same disk; the
best round of each is compared (the machine is shared: the best is the least disturbed).
Prints ``RESULT`` lines, the ratio Lazarus/baseline last (>= 1.0: as fast or faster).

    scripts/bench-python.sh [--quick]      # installs what it needs, then runs this
    scripts/python-run.sh scripts/bench_python.py [--quick]   # the same, BENCH_DIR your choice
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import os
import sqlite3
import tempfile
import time
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    log: Annotated[list, operator.add]
    n: int


def graph():
    g = StateGraph(State)
    g.add_node("a", lambda s: {"log": ["a"], "n": s.get("n", 0) + 1})
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g


class Counting:
    """Counts the checkpoints a saver is asked to save (the same for both: LangGraph's)."""

    def __init__(self, saver):
        self.saver = saver
        self.puts = 0
        put = saver.put

        def counted(*args, **kwargs):
            self.puts += 1
            return put(*args, **kwargs)

        saver.put = counted


def run_graph(saver, invokes: int, threads: int) -> tuple[int, float]:
    counter = Counting(saver)
    app = graph().compile(checkpointer=saver)
    start = time.perf_counter()
    for i in range(invokes):
        config = {"configurable": {"thread_id": f"t-{i % threads}"}}
        app.invoke({"log": [], "n": 0}, config, durability="sync")
    return counter.puts, time.perf_counter() - start


def lazarus_graph(invokes: int, threads: int) -> tuple[int, float]:
    from lazarus.langgraph import LazarusSaver

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        with LazarusSaver(directory=d) as saver:
            return run_graph(saver, invokes, threads)


def sqlite_graph(invokes: int, threads: int) -> tuple[int, float]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        conn = sqlite3.connect(os.path.join(d, "graph.db"), check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        saver = SqliteSaver(conn)
        saver.setup()
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2, "not FULL"
        try:
            return run_graph(saver, invokes, threads)
        finally:
            conn.close()


TURN = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "It is sunny, 21 C.", "annotations": []}],
    },
]


async def run_items(session, turns: int, one_by_one: bool = False) -> tuple[int, float]:
    start = time.perf_counter()
    for _ in range(turns):
        if one_by_one:
            for item in TURN:
                await session.add_items([item])
        else:
            await session.add_items(TURN)
    return turns * len(TURN), time.perf_counter() - start


def lazarus_items(turns: int, one_by_one: bool = False) -> tuple[int, float]:
    """`one_by_one`: each item its own record and sync, as the package wrote a turn before
    `host_items` (the first approach, kept for the comparison)."""
    from lazarus.agents import LazarusSession

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        s = LazarusSession("bench", directory=d)
        try:
            return asyncio.run(run_items(s, turns, one_by_one))
        finally:
            s.close()


def sqlite_items(turns: int) -> tuple[int, float]:
    from agents import SQLiteSession

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        db = os.path.join(d, "chats.db")
        s = SQLiteSession("bench", db)
        # its connections (one per worker thread) keep SQLite's default: FULL, so each commit
        # syncs its WAL before add_items returns
        assert sqlite3.connect(db).execute("PRAGMA synchronous").fetchone()[0] == 2, "not FULL"
        try:
            return asyncio.run(run_items(s, turns))
        finally:
            s.close()


def best(rounds: int, fns: dict) -> dict[str, float]:
    """Each side's best rate over `rounds` rounds, the sides taking turns."""
    rates: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            n, secs = fn()
            rates[name].append(n / secs)
    return {k: max(v) for k, v in rates.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small run (about 20 s)")
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args()
    invokes, turns, rounds = (30, 30, 3) if args.quick else (150, 150, 5)
    rounds = args.rounds or rounds

    g = best(
        rounds,
        {
            "lazarus": lambda: lazarus_graph(invokes, threads=3),
            "sqlite": lambda: sqlite_graph(invokes, threads=3),
        },
    )
    print(
        f"RESULT langgraph_sync_2_nodes checkpoints_per_s lazarus={g['lazarus']:.1f} "
        f"sqlite_saver={g['sqlite']:.1f} ratio={g['lazarus'] / g['sqlite']:.2f}",
        flush=True,
    )
    a = best(
        rounds,
        {
            "lazarus": lambda: lazarus_items(turns),
            "one_by_one": lambda: lazarus_items(turns, one_by_one=True),
            "sqlite": lambda: sqlite_items(turns),
        },
    )
    print(
        f"RESULT agents_add_items_one_record_per_item items_per_s lazarus={a['one_by_one']:.1f} "
        f"sqlite_session={a['sqlite']:.1f} ratio={a['one_by_one'] / a['sqlite']:.2f}",
        flush=True,
    )
    print(
        f"RESULT agents_add_items_4_per_call items_per_s lazarus={a['lazarus']:.1f} "
        f"sqlite_session={a['sqlite']:.1f} ratio={a['lazarus'] / a['sqlite']:.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
