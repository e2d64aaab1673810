"""Lazarus from Python: crash-safe sessions on the Lazarus ledger.

Every session written here is a normal Lazarus session: ``lazarus sessions show``, ``verify``,
``fork``, the web view and boot-resume work on it.

- ``lazarus.agents.LazarusSession``: the OpenAI Agents SDK's ``Session``.
- ``lazarus.langgraph.LazarusSaver``: LangGraph's checkpointer.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings

from lazarus._native import (
    CorruptionError,
    LazarusError,
    LockedError,
    NativeSession,
    NativeStore,
    NotFoundError,
    UnsafeValueError,
)

__all__ = [
    "CorruptionError",
    "CrashDebrisWarning",
    "LazarusError",
    "LockedError",
    "NativeSession",
    "NativeStore",
    "NotFoundError",
    "UnsafeValueError",
]

log = logging.getLogger("lazarus")


_stores: dict[tuple[str | None, str | None], NativeStore] = {}
_stores_lock = threading.Lock()


def store_for(directory: str | None = None, store: str | None = None) -> NativeStore:
    """The program's one `NativeStore` for a place (a directory, a PostgreSQL URL, or the
    defaults): sessions opened there share it (and a PostgreSQL store's connection pool)."""
    key = (None if directory is None else os.path.abspath(directory), store)
    with _stores_lock:
        found = _stores.get(key)
        if found is None:
            found = _stores[key] = NativeStore(directory, store)
        return found


class CrashDebrisWarning(UserWarning):
    """Opening a session cut an unfinished last write (crash debris: it was never
    acknowledged, so nothing durable is lost). The bytes are saved beside the ledger."""


def report_open(session: NativeSession) -> NativeSession:
    """Says what opening `session` for writing found: crash debris cut from its end (a
    warning, naming where the bytes were saved), a writer that died holding it (logged)."""
    report = session.open_report()
    if report is None:
        return session
    cut, saved_to, previous = report
    if cut:
        text = (
            f"session {session.session_id}: cut {cut} bytes of an unfinished last write "
            f"(never acknowledged; saved to {saved_to or 'nowhere: nothing to save'})"
        )
        log.warning("%s", text)
        warnings.warn(text, CrashDebrisWarning, stacklevel=3)
    if previous:
        log.info("session %s: taken over from %s, which died holding it", session.session_id, previous)
    return session
