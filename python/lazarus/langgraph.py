"""A crash-safe checkpointer for LangGraph.

``LazarusSaver`` keeps each thread in a Lazarus session of its own (the session id is the
thread id, or one mapped from it when it is not a valid session id): a checkpoint, and each
task's writes, is a record of the ledger, durable before the call returns; ``delete_thread``
appends a record that says so (nothing is deleted). The saver holds a thread's writer from
its first write until ``close()``: a second program writing the same thread gets
``LockedError`` naming the holder, never a forked history. Reading a thread another program
holds is allowed (it reads what is durable).

Nothing runs on load: every stored value passes an allowlist (LangGraph's safe types, and the
ones a program names with ``allowed_types``) before LangGraph's loader sees its bytes; a value
outside it raises ``UnsafeValueError`` naming the thread and checkpoint.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.memory import InMemorySaver

try:
    from langgraph.checkpoint.base import writes_sort_key
except ImportError:  # langgraph-checkpoint before 3: the same order, LangGraph's own

    def writes_sort_key(task_path: str, task_id: str = "", idx: int = 0) -> tuple[str, str, int]:
        return (task_path, task_id, idx)

from lazarus import report_open, store_for
from lazarus._native import NativeAllowlist, NativeSession, UnsafeValueError

HOST = "langgraph"

# A channel with no value at a version (LangGraph's in-memory saver says "empty" too).
_EMPTY = {"type": "empty", "b64": ""}


def _type_key(t: Any) -> tuple[str, str]:
    if isinstance(t, type):
        return (t.__module__, t.__name__)
    module, name = t
    return (str(module), str(name))


def _serializer(allowed: list[tuple[str, str]]) -> Any:
    """LangGraph's serializer, told the same allowlist (so it neither warns about nor
    degrades what the saver let through). Older releases take no list: the saver's own check
    is the rule either way."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    try:
        return JsonPlusSerializer(
            allowed_msgpack_modules=[*NativeAllowlist.safe_types(), *allowed]
        )
    except TypeError:
        return JsonPlusSerializer()


class LazarusSaver(BaseCheckpointSaver[str]):
    """``SqliteSaver``'s place: ``LazarusSaver(directory=...)`` or ``LazarusSaver(store=...)``.

    ``directory``: where the ledgers go; ``store``: a ``postgres://`` URL instead. Neither:
    where ``lazarus`` looks (``$LAZARUS_STORE``, ``$LAZARUS_SESSION_DIR``, else
    ``$XDG_STATE_HOME/lazarus/sessions``), so ``lazarus sessions list`` shows the threads.

    ``allowed_types``: types of your own that stored values may construct besides
    LangGraph's safe ones (plain data, LangChain messages and documents, LangGraph's types),
    as classes or ``(module, name)`` pairs. A value naming any other type is refused on
    load (``UnsafeValueError``), never constructed. ``serde``: your own serializer; the
    allowlist still applies to what it is given to load.
    """

    def __init__(
        self,
        directory: str | None = None,
        store: str | None = None,
        *,
        serde: Any = None,
        allowed_types: Iterable[Any] = (),
    ) -> None:
        allowed = [_type_key(t) for t in allowed_types]
        super().__init__(serde=serde if serde is not None else _serializer(allowed))
        self._allow = NativeAllowlist(allowed)
        self._store = store_for(directory, store)
        self._held: dict[str, NativeSession] = {}
        self._lock = threading.Lock()

    # -- the threads' sessions -------------------------------------------------------------

    def _writer(self, thread_id: Any) -> NativeSession:
        """The thread's session, its writer taken (and kept) on first use."""
        thread_id = str(thread_id)
        with self._lock:
            s = self._held.get(thread_id)
            if s is None:
                s = self._held[thread_id] = report_open(self._store.open(thread_id, HOST))
                s.title_if_untitled(f"LangGraph thread {thread_id}")
            return s

    def _reader(self, thread_id: Any) -> NativeSession | None:
        """The thread's session as it is now: the one held here, or read from the store."""
        thread_id = str(thread_id)
        with self._lock:
            s = self._held.get(thread_id)
        return s if s is not None else self._store.load(thread_id)

    def close(self) -> None:
        """Lets go of every thread this saver wrote."""
        with self._lock:
            held, self._held = list(self._held.values()), {}
        for s in held:
            s.close()

    def __enter__(self) -> LazarusSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> LazarusSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    # -- values in and out -----------------------------------------------------------------

    def _dump(self, value: Any) -> dict[str, str]:
        type_tag, data = self.serde.dumps_typed(value)
        return {"type": type_tag, "b64": base64.b64encode(data).decode("ascii")}

    def _load(self, type_tag: str, b64: str, where: _Where, what: str) -> Any:
        """A stored value, once the allowlist let it through (else ``UnsafeValueError``
        naming the thread, the checkpoint and what the value was)."""
        try:
            data = self._allow.checked(type_tag, b64)
        except UnsafeValueError as e:
            raise UnsafeValueError(
                f"thread {where.thread!r}, checkpoint {where.checkpoint!r}"
                f"{f' (namespace {where.ns!r})' if where.ns else ''}: {what} was not loaded: {e}. "
                "Nothing of it ran, and nothing was written. If you trust whoever wrote it, "
                "allow its type: LazarusSaver(allowed_types=[(module, name)]) (docs/python.md)."
            ) from None
        return self.serde.loads_typed((type_tag, data))

    def _blob(self, blob: dict[str, str], where: _Where, what: str) -> Any:
        return self._load(blob["type"], blob["b64"], where, what)

    def _tuple(self, s: NativeSession, thread_id: str, ns: str, rec: dict) -> CheckpointTuple:
        where = _Where(thread_id, ns, rec["checkpoint_id"])
        checkpoint: Checkpoint = self._blob(rec["checkpoint"], where, "the checkpoint")
        metadata = self._blob(rec["metadata"], where, "its metadata")
        versions = checkpoint.get("channel_versions", {})
        values = {
            channel: self._load(type_tag, b64, where, f"the value of channel {channel!r}")
            for channel, type_tag, b64 in s.channel_values(
                ns, [(k, str(v)) for k, v in versions.items()]
            )
            if type_tag != "empty"
        }
        writes = sorted(
            s.writes(ns, rec["checkpoint_id"]),
            key=lambda w: writes_sort_key(w[4], w[0], w[5]),
        )
        pending = [
            (task_id, channel, self._load(type_tag, b64, where, f"a write of task {task_id!r} to {channel!r}"))
            for task_id, channel, type_tag, b64, _path, _idx in writes
        ]
        parent = rec.get("parent_id")
        return CheckpointTuple(
            config=_config(thread_id, ns, rec["checkpoint_id"]),
            checkpoint={**checkpoint, "channel_values": values},
            metadata=metadata,
            parent_config=_config(thread_id, ns, parent) if parent else None,
            pending_writes=pending,
        )

    # -- BaseCheckpointSaver ---------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id = str(config["configurable"]["thread_id"])
        ns = config["configurable"].get("checkpoint_ns", "")
        s = self._reader(thread_id)
        if s is None:
            return None
        text = s.checkpoint(ns, get_checkpoint_id(config))
        return None if text is None else self._tuple(s, thread_id, ns, json.loads(text))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        if config is not None:
            threads = [str(config["configurable"]["thread_id"])]
            want_ns = config["configurable"].get("checkpoint_ns")
            want_id = get_checkpoint_id(config)
        else:
            with self._lock:
                held = list(self._held)
            threads = sorted(set(held) | set(self._store.session_ids(HOST)))
            want_ns, want_id = None, None
        before_id = get_checkpoint_id(before) if before else None
        for thread_id in threads:
            s = self._reader(thread_id)
            if s is None:
                continue
            for text in s.checkpoints(want_ns):
                rec = json.loads(text)
                cid = rec["checkpoint_id"]
                if want_id and cid != want_id:
                    continue
                if before_id and cid >= before_id:
                    continue
                if filter:
                    metadata = self._blob(rec["metadata"], _Where(thread_id, rec["ns"], cid), "its metadata")
                    if not all(metadata.get(k) == v for k, v in filter.items()):
                        continue
                if limit is not None and limit <= 0:
                    return
                if limit is not None:
                    limit -= 1
                yield self._tuple(s, thread_id, rec["ns"], rec)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id = str(config["configurable"]["thread_id"])
        ns = config["configurable"].get("checkpoint_ns", "")
        c = checkpoint.copy()
        values: dict[str, Any] = c.pop("channel_values", {})  # type: ignore[misc]
        rec: dict[str, Any] = {
            "ns": ns,
            "checkpoint_id": checkpoint["id"],
            "checkpoint": self._dump(c),
            "metadata": self._dump(get_checkpoint_metadata(config, metadata)),
            "channels": [
                {
                    "channel": k,
                    "version": str(v),
                    "value": self._dump(values[k]) if k in values else _EMPTY,
                }
                for k, v in new_versions.items()
            ],
        }
        if parent := config["configurable"].get("checkpoint_id"):
            rec["parent_id"] = parent
        self._writer(thread_id).put_checkpoint(json.dumps(rec))
        return _config(thread_id, ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id = str(config["configurable"]["thread_id"])
        rec = {
            "ns": config["configurable"].get("checkpoint_ns", ""),
            "checkpoint_id": config["configurable"]["checkpoint_id"],
            "task_id": task_id,
            "task_path": task_path,
            "writes": [
                {"idx": WRITES_IDX_MAP.get(channel, idx), "channel": channel, "value": self._dump(v)}
                for idx, (channel, v) in enumerate(writes)
            ],
        }
        self._writer(thread_id).put_writes(json.dumps(rec))

    def delete_thread(self, thread_id: str) -> None:
        """Empties the thread: a record says so, the ledger keeps what was there."""
        if self._reader(thread_id) is not None:
            self._writer(thread_id).clear()

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Writes the source thread's checkpoints and writes, as they are now, into the
        target thread (its writer taken, as any write does). A missing source copies nothing."""
        source = self._reader(source_thread_id)
        if source is None or not source.checkpoints(None):
            return
        source.copy_graph_to(self._writer(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: every checkpoint but the newest of each namespace leaves the
        thread, with its writes (one ``host_forget`` record); ``"delete"``: the thread is
        emptied, as ``delete_thread``. The ledger keeps the records: this frees no disk."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: keep_latest or delete")
        for thread_id in thread_ids:
            s = self._reader(thread_id)
            if s is None:
                continue
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            newest: dict[str, str] = {}
            every: list[tuple[str, str]] = []
            for text in s.checkpoints(None):
                rec = json.loads(text)
                every.append((rec["ns"], rec["checkpoint_id"]))
                newest[rec["ns"]] = max(newest.get(rec["ns"], ""), rec["checkpoint_id"])
            old = [k for k in every if newest[k[0]] != k[1]]
            if old:
                self._writer(thread_id).forget(old, f"prune {strategy}")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Every checkpoint whose metadata names one of ``run_ids`` leaves its thread, with
        its writes (a ``host_forget`` record per thread). Every thread is read first (each
        checkpoint's metadata through the allowlist); nothing is written unless all read."""
        wanted = set(run_ids)
        if not wanted:
            return
        found: dict[str, list[tuple[str, str]]] = {}
        with self._lock:
            held = list(self._held)
        for thread_id in sorted(set(held) | set(self._store.session_ids(HOST))):
            s = self._reader(thread_id)
            if s is None:
                continue
            for text in s.checkpoints(None):
                rec = json.loads(text)
                where = _Where(thread_id, rec["ns"], rec["checkpoint_id"])
                metadata = self._blob(rec["metadata"], where, "its metadata")
                if metadata.get("run_id") in wanted:
                    found.setdefault(thread_id, []).append((rec["ns"], rec["checkpoint_id"]))
        for thread_id, checkpoints in found.items():
            self._writer(thread_id).forget(checkpoints, "delete_for_runs")

    # Increasing, with a random part: two branches of a forked thread that reach the same
    # number must not name each other's value. LangGraph's own rule, not a copy of it.
    get_next_version = InMemorySaver.get_next_version

    # -- async: the same calls, off the event loop -----------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for tup in found:
            yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)


class _Where(NamedTuple):
    """Whose a value is, for the error that refuses it."""

    thread: str
    ns: str
    checkpoint: str


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }
