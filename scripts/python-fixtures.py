#!/usr/bin/env python3
"""Writes the host sessions the Rust side's readers are tested on, with the real frameworks:
a LangGraph thread (LangChain messages, a date, a UUID, a subgraph, a Send, an interrupt, a
value of the program's own type and a value naming os.system written by someone else) and an
OpenAI Agents SDK session (a turn with a tool call, a call announced and never finished).

    scripts/python-run.sh scripts/python-fixtures.py

Output: crates/session/tests/fixtures/host/, a session directory: the thread
(`h.user_42_weather.<hash>.jsonl`) and the chat (`chat-paris.jsonl`) as LazarusSaver and
LazarusSession wrote them, and `langgraph-values.json` (each value LangGraph wrote, its base64
and what LangGraph's own loader makes of it as JSON, for the decoder's agreement test).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import json
import operator
import os
import shutil
import sys
import tempfile
import uuid
from typing import Annotated, TypedDict

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "session", "tests", "fixtures", "host")


@dataclasses.dataclass
class Reading:
    """A type of the program's own: outside the allowlist unless the program names it."""

    sensor: str
    celsius: float


def langgraph_thread(d: str) -> str:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, Send, interrupt

    from lazarus import NativeStore
    from lazarus.langgraph import LazarusSaver

    class State(TypedDict, total=False):
        messages: Annotated[list, operator.add]
        facts: dict
        found: Annotated[list, operator.add]
        reading: Reading

    def agent(s):
        return {
            "messages": [AIMessage(content="Let me look that up.")],
            "facts": {"when": datetime.date(2026, 12, 2), "id": uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")},
        }

    class Inner(TypedDict, total=False):
        found: Annotated[list, operator.add]

    inner = StateGraph(Inner)
    inner.add_node("lookup", lambda s: {"found": ["paris: sunny"]})
    inner.add_edge(START, "lookup")
    inner.add_edge("lookup", END)

    def approve(s):
        answer = interrupt({"question": "Send the answer?", "draft": "Sunny, 21 C."})
        return {"messages": [AIMessage(content=f"Sent ({answer}).")], "reading": Reading("roof", 21.5)}

    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_node("search", inner.compile())
    g.add_node("fan", lambda item: {"found": [f"source {item['i']}"]})
    g.add_node("approve", approve)
    g.add_edge(START, "agent")
    g.add_edge("agent", "search")
    g.add_conditional_edges("search", lambda s: [Send("fan", {"i": i}) for i in range(2)])
    g.add_edge("fan", "approve")
    g.add_edge("approve", END)
    thread = "user:42/weather"
    with LazarusSaver(directory=d, allowed_types=[Reading]) as saver:
        app = g.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": thread}}
        app.invoke({"messages": [HumanMessage(content="Is it sunny in Paris?")]}, config)
        app.invoke(Command(resume="yes"), config)
        session_id = saver._writer(thread).session_id
    # someone else's program adds a checkpoint whose value names os.system
    import ormsgpack

    s = NativeStore(d).open(thread, "langgraph")
    cp = empty_checkpoint()
    cp["channel_versions"] = {"messages": "99.0"}
    body = {k: v for k, v in cp.items() if k != "channel_values"}
    b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
    poison = ormsgpack.packb([ormsgpack.Ext(0, ormsgpack.packb(("os", "system", "touch /tmp/pwned")))])
    s.put_checkpoint(
        json.dumps(
            {
                "ns": "",
                "checkpoint_id": cp["id"],
                "checkpoint": {"type": "msgpack", "b64": b64(ormsgpack.packb(body, option=ormsgpack.OPT_NON_STR_KEYS))},
                "metadata": {"type": "msgpack", "b64": b64(ormsgpack.packb({"source": "update", "step": 99}))},
                "channels": [{"channel": "messages", "version": "99.0", "value": {"type": "msgpack", "b64": b64(poison)}}],
            }
        )
    )
    s.close()
    return session_id


def values_of(path: str) -> list[dict]:
    """Every value in a thread's ledger, with what LangGraph's own loader (told the program's
    type) makes of it, as JSON."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from lazarus import UnsafeValueError
    from lazarus._native import NativeAllowlist

    serde = JsonPlusSerializer(allowed_msgpack_modules=[(__name__, "Reading")])
    allow = NativeAllowlist([(__name__, "Reading")])
    out = []
    for line in open(path):
        rec = json.loads(line)
        blobs = []
        d = rec["data"]
        if rec["kind"] == "host_checkpoint":
            blobs = [d["checkpoint"], d["metadata"]] + [c["value"] for c in d.get("channels", [])]
        elif rec["kind"] in ("host_pending_writes", "host_writes"):
            blobs = [w["value"] for w in d["writes"]]
        for b in blobs:
            if b["type"] == "empty":  # the saver's own tag: no value at that version
                continue
            try:  # the value naming os.system is never loaded
                data = allow.checked(b["type"], b["b64"])
            except UnsafeValueError:
                continue
            v = serde.loads_typed((b["type"], data))
            out.append({"seq": rec["seq"], "type": b["type"], "b64": b["b64"], "python": _plain(v)})
    return out


def _plain(v):
    """A loaded value as JSON the way the Rust view shows it (`$type` for constructed ones)."""
    from langchain_core.messages import BaseMessage

    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_plain(x) for x in v]
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, BaseMessage):
        return {"$type": f"{type(v).__module__}.{type(v).__name__}", "content": v.content, "type": v.type}
    if dataclasses.is_dataclass(v):
        return {"$type": f"{type(v).__module__}.{type(v).__name__}", **dataclasses.asdict(v)}
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return {"$type": f"{type(v).__module__}.{type(v).__name__}"}


def agents_chat(d: str) -> str:
    from lazarus.agents import LazarusSession

    async def go():
        s = LazarusSession("chat-paris", directory=d)
        await s.add_items(
            [
                {"role": "user", "content": "What is the weather in Paris?"},
                {"type": "function_call", "call_id": "call_w", "name": "get_weather", "arguments": '{"city":"Paris"}'},
                {"type": "function_call_output", "call_id": "call_w", "output": "sunny, 21 C"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is sunny, 21 C.", "annotations": []}]},
            ]
        )
        await s.add_items([{"role": "user", "content": "Book a table outside <b>tonight</b>."}])
        s._native.call_intent("call_b", "book_table", '{"when":"20:00"}')
        s.close()

    asyncio.run(go())
    return "chat-paris"


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    with tempfile.TemporaryDirectory() as d:
        sid = langgraph_thread(d)
        chat = agents_chat(d)
        for name in (sid, chat):
            for ext in ("jsonl", "title"):
                shutil.copy(os.path.join(d, f"{name}.{ext}"), os.path.join(OUT, f"{name}.{ext}"))
        with open(os.path.join(OUT, "langgraph-values.json"), "w") as f:
            json.dump(values_of(os.path.join(d, f"{sid}.jsonl")), f, indent=1)
            f.write("\n")
    from importlib.metadata import version

    print(
        f"wrote {OUT} (session {sid}) with langgraph {version('langgraph')}, "
        f"langgraph-checkpoint {version('langgraph-checkpoint')}, openai-agents {version('openai-agents')}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
