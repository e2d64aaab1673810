"""What LazarusSaver reads never runs (a poisoned checkpoint from someone else raises an error
naming the thread and checkpoint, and nothing is written), and any thread id works."""

from __future__ import annotations

import base64
import dataclasses
import json
import operator
from typing import Annotated, TypedDict

import ormsgpack
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

from conftest import assert_verified, kinds, lazarus, listed
from lazarus import NativeStore, UnsafeValueError
from lazarus._native import session_id_for
from lazarus.langgraph import LazarusSaver

EXT_CONSTRUCTOR_SINGLE_ARG = 0  # LangGraph's: (module, name, arg) -> module.name(arg)
EXT_CONSTRUCTOR_KW_ARGS = 2


def _poison(marker: str) -> bytes:
    """A value LangGraph's msgpack loader turns into `os.system("touch MARKER")`."""
    call = ormsgpack.packb(("os", "system", f"touch {marker}"))
    return ormsgpack.packb({"log": ["x"], "note": ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, call)})


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _write_thread(where: dict, thread: str, value: bytes, *, as_metadata: bool = False) -> str:
    """Someone else's program writes a thread holding `value` (as the channel `log`'s value,
    or as the checkpoint's metadata), through the package's plain record API."""
    saver = LazarusSaver(**where)
    cp = empty_checkpoint()
    cp["channel_versions"] = {"log": saver.get_next_version(None, None)}
    c = {k: v for k, v in cp.items() if k != "channel_values"}
    plain_meta = ormsgpack.packb({"source": "input", "step": -1})
    rec = {
        "ns": "",
        "checkpoint_id": cp["id"],
        "checkpoint": {"type": "msgpack", "b64": _b64(saver.serde.dumps_typed(c)[1])},
        "metadata": {"type": "msgpack", "b64": _b64(value if as_metadata else plain_meta)},
        "channels": [
            {
                "channel": "log",
                "version": str(cp["channel_versions"]["log"]),
                "value": {"type": "msgpack", "b64": _b64(ormsgpack.packb(["x"]) if as_metadata else value)},
            }
        ],
    }
    s = NativeStore(**where).open(thread, "langgraph")
    s.put_checkpoint(json.dumps(rec))
    s.close()
    return cp["id"]


class Log(TypedDict):
    log: Annotated[list, operator.add]


def _graph(saver: LazarusSaver):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_edge(START, "a")
    g.add_edge("a", END)
    return g.compile(checkpointer=saver)


def test_the_os_system_blob_really_runs_under_langgraphs_default_loader(tmp_path):
    """The control: the blob the next test refuses is a real attack on the loader LangGraph
    gives a saver by default (and LazarusSaver used before), so its refusal means something."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    marker = tmp_path / "ran"
    JsonPlusSerializer().loads_typed(("msgpack", _poison(str(marker))))
    assert marker.exists(), "the control did not run: the refusal below would prove nothing"


def test_a_poisoned_checkpoint_raises_naming_thread_and_checkpoint_and_never_runs(tmp_path, where):
    marker = tmp_path / "ran"
    cid = _write_thread(where, "poisoned", _poison(str(marker)))
    meta_cid = _write_thread(where, "poisoned-meta", _poison(str(marker)), as_metadata=True)
    config = {"configurable": {"thread_id": "poisoned"}}
    before = lazarus(where, "export", "poisoned").stdout
    with LazarusSaver(**where) as saver:
        with pytest.raises(UnsafeValueError) as e:
            saver.get_tuple(config)
        text = str(e.value)
        assert "'poisoned'" in text and cid in text and "os.system" in text, text
        assert "channel 'log'" in text and "allowed_types" in text, text
        # through a graph: the invoke stops before anything of it runs or is written
        app = _graph(saver)
        with pytest.raises(UnsafeValueError):
            app.invoke({"log": []}, config)
        # a listing of every thread reads every checkpoint: the same error, naming it
        with pytest.raises(UnsafeValueError) as e:
            list(saver.list(None))
        assert cid in str(e.value) or meta_cid in str(e.value), str(e.value)
        # metadata is a value too (list's filter reads it)
        with pytest.raises(UnsafeValueError) as e:
            list(saver.list({"configurable": {"thread_id": "poisoned-meta"}}, filter={"step": -1}))
        assert meta_cid in str(e.value) and "metadata" in str(e.value), str(e.value)
    assert not marker.exists(), "os.system ran"
    assert lazarus(where, "export", "poisoned").stdout == before, "something was written"
    assert kinds(where, "poisoned") == ["header", "host_checkpoint"]


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_a_program_widens_the_allowlist_for_its_own_types(tmp_path):
    where = {"directory": str(tmp_path / "s")}
    point = ormsgpack.packb(
        ormsgpack.Ext(EXT_CONSTRUCTOR_KW_ARGS, ormsgpack.packb((__name__, "Point", {"x": 1, "y": 2})))
    )
    _write_thread(where, "points", point)
    config = {"configurable": {"thread_id": "points"}}
    with LazarusSaver(**where) as saver:
        with pytest.raises(UnsafeValueError, match=f"{__name__}.Point"):
            saver.get_tuple(config)
    for allowed in ([Point], [(__name__, "Point")]):
        with LazarusSaver(**where, allowed_types=allowed) as saver:
            assert saver.get_tuple(config).checkpoint["channel_values"]["log"] == Point(1, 2)
    # and what LangGraph itself writes of the safe types loads as it was
    from langchain_core.messages import AIMessage, HumanMessage

    with LazarusSaver(**where) as saver:
        app = StateGraph(Log)
        app.add_node("a", lambda s: {"log": [AIMessage(content="hi"), {"when": __import__("datetime").date(2026, 1, 2)}]})
        app.add_edge(START, "a")
        app = app.compile(checkpointer=saver)
        out = app.invoke({"log": [HumanMessage(content="hello")]}, {"configurable": {"thread_id": "m"}})
        again = saver.get_tuple({"configurable": {"thread_id": "m"}}).checkpoint["channel_values"]["log"]
        assert again == out["log"] and isinstance(again[1], AIMessage)


@pytest.mark.parametrize("thread_id", ["user:42/chat", "h.looks-mapped", " spaces and ünïcode ☃ ", 42])
def test_any_thread_id_is_kept_and_given_back(where, thread_id):
    with LazarusSaver(**where) as saver:
        app = _graph(saver)
        config = {"configurable": {"thread_id": thread_id}}
        app.invoke({"log": []}, config)
        app.invoke({"log": []}, config)
        assert app.get_state(config).values["log"] == ["a", "a"]
        found = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
        assert found == {str(thread_id)}, found
    session_id, mapped = session_id_for(str(thread_id))
    assert mapped == (thread_id != 42), session_id
    row = listed(where)[session_id]
    # the ledger keeps the name itself when the id is not it
    assert row["meta"].get("host_id") == (str(thread_id) if mapped else None), row
    assert_verified(where, session_id)
    # read back by another saver, from the ledger alone
    with LazarusSaver(**where) as other:
        assert [t.config["configurable"]["thread_id"] for t in other.list(None)][0] == str(thread_id)
        assert other.get_tuple({"configurable": {"thread_id": thread_id}}) is not None
