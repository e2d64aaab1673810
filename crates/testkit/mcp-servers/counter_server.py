"""An MCP server written with the official Python SDK (`mcp` on PyPI), for Lazarus's tests:
tools with annotations whose effects can be counted.

Every effect appends one line to the file named by $COUNTER_FILE: `<tool> <idempotency key>`
(the key the client sent in `_meta`, `lazarus/idempotency-key`; `-` when none). A tool that
sleeps first writes its line *before* sleeping when asked to (`effect_first`), so a test can
kill the client while the server works, after the effect (`sleep_once`: only the first time
a key is seen, so a re-run answers at once). With `stop`, the tool stops
its client (SIGSTOP to its parent process) after the effect and before answering, and writes
`$COUNTER_FILE.stopped`: the answer then sits in the pipe, unread, so a test can kill the
client after the server answered and before the client recorded the answer.

    python counter_server.py stdio
    python counter_server.py http PORT        # Streamable HTTP at http://127.0.0.1:PORT/mcp

With $LINGER_SECS set, the process stays alive that long after it starts even when its
client is gone (a thread that is not a daemon keeps it), as servers that hold background
work do: only something that kills it ends it sooner.
"""

import asyncio
import os
import signal
import sys
import threading
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("lazarus-counter", version="1.2.3")


def key_of(ctx: Context) -> str:
    meta = ctx.request_context.meta
    if meta is None:
        return "-"
    if isinstance(meta, dict):
        return str(meta.get("lazarus/idempotency-key", "-"))
    extra = getattr(meta, "model_extra", None) or {}
    return str(extra.get("lazarus/idempotency-key", "-"))


def effect(tool: str, ctx: Context) -> int:
    path = os.environ["COUNTER_FILE"]
    with open(path, "a") as f:
        f.write(f"{tool} {key_of(ctx)}\n")
        f.flush()
        os.fsync(f.fileno())
    with open(path) as f:
        return sum(1 for _ in f)


def seen_before(tool: str, ctx: Context) -> bool:
    """Whether this tool already ran with this call's idempotency key."""
    try:
        with open(os.environ["COUNTER_FILE"]) as f:
            return f"{tool} {key_of(ctx)}\n" in f.readlines()
    except FileNotFoundError:
        return False


def stop_client():
    os.kill(os.getppid(), signal.SIGSTOP)
    with open(os.environ["COUNTER_FILE"] + ".stopped", "w") as f:
        f.write("stopped\n")


@server.tool(annotations=ToolAnnotations(destructiveHint=True, idempotentHint=False))
async def bump(
    ctx: Context,
    sleep_secs: float = 0.0,
    effect_first: bool = True,
    stop: bool = False,
    sleep_once: bool = False,
) -> str:
    """Appends a line to the counter (not idempotent). Sleeps sleep_secs (after the effect
    when effect_first, else before it)."""
    if sleep_once and seen_before("bump", ctx):
        sleep_secs = 0.0
    if not effect_first:
        await asyncio.sleep(sleep_secs)
    n = effect("bump", ctx)
    if effect_first:
        await asyncio.sleep(sleep_secs)
    if stop:
        stop_client()
    return f"bumped: {n} lines"


@server.tool(annotations=ToolAnnotations(destructiveHint=True, idempotentHint=True))
async def set_flag(
    ctx: Context,
    sleep_secs: float = 0.0,
    effect_first: bool = True,
    stop: bool = False,
    sleep_once: bool = False,
) -> str:
    """Sets the flag (idempotent: setting it twice leaves it set)."""
    if sleep_once and seen_before("set_flag", ctx):
        sleep_secs = 0.0
    if not effect_first:
        await asyncio.sleep(sleep_secs)
    n = effect("set_flag", ctx)
    if effect_first:
        await asyncio.sleep(sleep_secs)
    if stop:
        stop_client()
    return f"flag set ({n} lines)"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def peek(
    ctx: Context,
    sleep_secs: float = 0.0,
    effect_first: bool = True,
    stop: bool = False,
    sleep_once: bool = False,
) -> str:
    """Reads the counter (read-only)."""
    if sleep_once and seen_before("peek", ctx):
        sleep_secs = 0.0
    if not effect_first:
        await asyncio.sleep(sleep_secs)
    effect("peek", ctx)
    if effect_first:
        await asyncio.sleep(sleep_secs)
    if stop:
        stop_client()
    return "peeked"


@server.tool(annotations=ToolAnnotations(destructiveHint=True, idempotentHint=False))
def work(secs: float = 3.0) -> str:
    """Works silently for secs seconds (blocking, no output), then appends `work` to the
    counter: a tool whose effect lands after its client may be gone."""
    time.sleep(secs)
    with open(os.environ["COUNTER_FILE"], "a") as f:
        f.write("work -\n")
        f.flush()
        os.fsync(f.fileno())
    return "worked"


@server.tool()
async def slow(ctx: Context, steps: int = 3) -> str:
    """Reports progress, step by step."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        await asyncio.sleep(0.05)
    return f"done in {steps} steps"


@server.tool()
async def fail(ctx: Context) -> str:
    """Always fails (the result is an error)."""
    raise ValueError("this tool always fails")


@server.tool()
async def big(ctx: Context, kib: int = 2048) -> str:
    """Returns kib KiB of text."""
    return "x" * (kib * 1024)


@server.tool()
async def add_tool(ctx: Context) -> str:
    """Adds a tool named `late` and tells the client its tool list changed."""

    @server.tool()
    async def late(ctx: Context) -> str:
        """A tool that appeared while the client ran."""
        return "late tool ran"

    # 2026-07-28: to the client's `subscriptions/listen` stream; older versions: at once
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "added"


if __name__ == "__main__":
    if os.environ.get("LINGER_SECS"):
        threading.Thread(target=time.sleep, args=(float(os.environ["LINGER_SECS"]),)).start()
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
