"""Lazarus from Python: crash-safe sessions on the Lazarus ledger.

Every session written here is a normal Lazarus session: ``lazarus sessions show``, ``verify``,
``fork``, the web view and boot-resume work on it.

- ``lazarus.agents.LazarusSession``: the OpenAI Agents SDK's ``Session``.
- ``lazarus.langgraph.LazarusSaver``: LangGraph's checkpointer.
"""

from __future__ import annotations

import logging
import warnings

from lazarus._native import (
    CorruptionError,
    LazarusError,
    LockedError,
    NativeSession,
    NativeStore,
    NotFoundError,
)

__all__ = [
    "CorruptionError",
    "CrashDebrisWarning",
    "LazarusError",
    "LockedError",
    "NativeSession",
    "NativeStore",
    "NotFoundError",
]

log = logging.getLogger("lazarus")


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
