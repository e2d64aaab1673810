"""A crash-safe checkpointer for LangGraph.

``LazarusSaver`` keeps each thread in a Lazarus session of its own (the session id is the
thread id): a checkpoint, and each task's writes, is a record of the ledger, durable before
the call returns; ``delete_thread`` appends a record that says so (nothing is deleted). The
saver holds a thread's writer from its first write until ``close()``: a second program
writing the same thread gets ``LockedError`` naming the holder, never a forked history.
Reading a thread another program holds is allowed (it reads what is durable).
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

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
    writes_sort_key,
)
from langgraph.checkpoint.memory import InMemorySaver

from lazarus import report_open, store_for
from lazarus._native import NativeSession

HOST = "langgraph"

# A channel with no value at a version (LangGraph's in-memory saver says "empty" too).
_EMPTY = {"type": "empty", "b64": ""}


class LazarusSaver(BaseCheckpointSaver[str]):
    """``SqliteSaver``'s place: ``LazarusSaver(directory=...)`` or ``LazarusSaver(store=...)``.

    ``directory``: where the ledgers go; ``store``: a ``postgres://`` URL instead. Neither:
    where ``lazarus`` looks (``$LAZARUS_STORE``, ``$LAZARUS_SESSION_DIR``, else
    ``$XDG_STATE_HOME/lazarus/sessions``), so ``lazarus sessions list`` shows the threads.
    """

    def __init__(
        self,
        directory: str | None = None,
        store: str | None = None,
        *,
        serde: Any = None,
    ) -> None:
        super().__init__(serde=serde)
        self._store = store_for(directory, store)
        self._held: dict[str, NativeSession] = {}
        self._lock = threading.Lock()

    # -- the threads' sessions -------------------------------------------------------------

    def _writer(self, thread_id: str) -> NativeSession:
        """The thread's session, its writer taken (and kept) on first use."""
        with self._lock:
            s = self._held.get(thread_id)
            if s is None:
                s = self._held[thread_id] = report_open(self._store.open(str(thread_id), HOST))
                s.title_if_untitled(f"LangGraph thread {thread_id}")
            return s

    def _reader(self, thread_id: str) -> NativeSession | None:
        """The thread's session as it is now: the one held here, or read from the store."""
        with self._lock:
            s = self._held.get(thread_id)
        return s if s is not None else self._store.load(str(thread_id))

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

    def _load(self, type_tag: str, b64: str) -> Any:
        return self.serde.loads_typed((type_tag, base64.b64decode(b64)))

    def _blob(self, blob: dict[str, str]) -> Any:
        return self._load(blob["type"], blob["b64"])

    def _tuple(self, s: NativeSession, thread_id: str, ns: str, rec: dict) -> CheckpointTuple:
        checkpoint: Checkpoint = self._blob(rec["checkpoint"])
        versions = checkpoint.get("channel_versions", {})
        values = {
            channel: self._load(type_tag, b64)
            for channel, type_tag, b64 in s.channel_values(
                ns, [(k, str(v)) for k, v in versions.items()]
            )
            if type_tag != "empty"
        }
        writes = sorted(
            s.writes(ns, rec["checkpoint_id"]),
            key=lambda w: writes_sort_key(w[4], w[0], w[5]),
        )
        parent = rec.get("parent_id")
        return CheckpointTuple(
            config=_config(thread_id, ns, rec["checkpoint_id"]),
            checkpoint={**checkpoint, "channel_values": values},
            metadata=self._blob(rec["metadata"]),
            parent_config=_config(thread_id, ns, parent) if parent else None,
            pending_writes=[
                (task_id, channel, self._load(type_tag, b64))
                for task_id, channel, type_tag, b64, _path, _idx in writes
            ],
        )

    # -- BaseCheckpointSaver ---------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id = config["configurable"]["thread_id"]
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
            threads = [config["configurable"]["thread_id"]]
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
                    metadata = self._blob(rec["metadata"])
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
        thread_id = config["configurable"]["thread_id"]
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
        thread_id = config["configurable"]["thread_id"]
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


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }
