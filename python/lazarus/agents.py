"""A crash-safe ``Session`` for the OpenAI Agents SDK.

``LazarusSession`` implements the SDK's ``Session`` protocol on a Lazarus ledger:
``add_items`` returns only once every item is durable; ``pop_item`` and ``clear_session``
append records that say so (nothing is deleted); one process holds the session while it is
open (a second gets ``LockedError`` naming the holder).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from lazarus import report_open, store_for

HOST = "openai-agents"


class LazarusSession:
    """``SQLiteSession``'s place: ``LazarusSession(session_id, directory=..., store=...)``.

    ``directory``: where the ledger goes; ``store``: a ``postgres://`` URL instead. Neither:
    where ``lazarus`` looks (``$LAZARUS_STORE``, ``$LAZARUS_SESSION_DIR``, else
    ``$XDG_STATE_HOME/lazarus/sessions``), so ``lazarus sessions list`` shows the session.
    """

    session_settings = None

    def __init__(
        self,
        session_id: str,
        *,
        directory: str | None = None,
        store: str | None = None,
    ) -> None:
        self.session_id = session_id
        self._native = report_open(store_for(directory, store).open(session_id, HOST))

    async def get_items(self, limit: int | None = None, wrapper: Any = None) -> list[Any]:
        texts = await asyncio.to_thread(self._native.items, limit)
        return [json.loads(t) for t in texts]

    async def add_items(self, items: list[Any], wrapper: Any = None) -> None:
        texts = [json.dumps(item) for item in items]
        await asyncio.to_thread(self._native.add_items, texts)
        if not self._native.titled:
            first = next((t for t in map(_user_text, items) if t), None)
            if first is not None:
                # what `lazarus sessions list` shows, as for its own sessions: the first input
                await asyncio.to_thread(self._native.title_if_untitled, first)

    async def pop_item(self, wrapper: Any = None) -> Any | None:
        text = await asyncio.to_thread(self._native.pop_item)
        return None if text is None else json.loads(text)

    async def clear_session(self, wrapper: Any = None) -> None:
        await asyncio.to_thread(self._native.clear)

    def in_doubt(self) -> list[tuple[str, str, str | None]]:
        """Tool calls announced by ``LazarusRunHooks`` with no outcome recorded: after a
        crash they may have run. ``(call_id, tool, arguments)``."""
        return self._native.in_doubt()

    async def settle_in_doubt(self) -> list[tuple[str, str, str | None]]:
        """Closes the calls in doubt (their outcome: the in-doubt notice) and adds one item
        telling the model about them, as ``lazarus run`` does. Returns the calls."""
        calls = self.in_doubt()
        if calls:
            for call_id, _tool, _arguments in calls:
                await asyncio.to_thread(self._native.call_outcome, call_id, IN_DOUBT_NOTICE)
            await self.add_items([in_doubt_note(calls)])
        return calls

    def close(self) -> None:
        self._native.close()

    async def __aenter__(self) -> LazarusSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


# The text a call closed "in doubt" gives the model: the words `lazarus run` uses.
IN_DOUBT_NOTICE = (
    "This tool call was interrupted before its result was recorded (the process was stopped "
    "or the machine went down). Its effect is unknown: it may have run completely, partly, or "
    "not at all. Check the current state before retrying it."
)

def _run_hooks_class() -> type:
    """``LazarusRunHooks``, built on first use: importing the SDK takes a second or two, and
    the session does not need it."""
    from agents import RunHooks

    class LazarusRunHooks(RunHooks):  # type: ignore[misc,valid-type]
        """``RunHooks`` that record a tool call's intent in the session's ledger *before* the
        tool runs and its outcome after, keyed by the SDK's tool call id. After a crash,
        ``session.in_doubt()`` lists the calls that may have run without a recorded result."""

        def __init__(self, session: LazarusSession) -> None:
            super().__init__()
            self.session = session

        async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
            call_id = getattr(context, "tool_call_id", None)
            if call_id is None:
                return
            arguments = getattr(context, "tool_arguments", None)
            name = getattr(tool, "name", str(tool))
            await asyncio.to_thread(self.session._native.call_intent, call_id, name, arguments)

        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: object) -> None:
            call_id = getattr(context, "tool_call_id", None)
            if call_id is None:
                return
            await asyncio.to_thread(self.session._native.call_outcome, call_id, str(result))

    LazarusRunHooks.__module__ = __name__
    LazarusRunHooks.__qualname__ = "LazarusRunHooks"
    return LazarusRunHooks


def __getattr__(name: str) -> Any:
    if name == "LazarusRunHooks":
        cls = _run_hooks_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _user_text(item: Any) -> str | None:
    """The text of a user message item, if `item` is one."""
    if not isinstance(item, dict) or item.get("role") != "user":
        return None
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return " ".join(p for p in parts if p) or None
    return None


def in_doubt_note(calls: list[tuple[str, str, str | None]]) -> dict[str, Any]:
    """A user item telling the model which calls may have run (add it before running on)."""
    lines = [
        f"- {tool}({arguments or ''}) [call {call_id}]: {IN_DOUBT_NOTICE}"
        for call_id, tool, arguments in calls
    ]
    return {
        "role": "user",
        "content": "[Lazarus] The previous run was cut off while these tool calls ran:\n"
        + "\n".join(lines),
    }
