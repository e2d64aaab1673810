"""An MCP server on FastMCP with the tasks extension (`fastmcp-tasks`, SEP-2663), for
Lazarus's tests: tools that run as tasks, whose effects and requests can be counted.

Speaks MCP 2026-07-28 (and 2025-11-25 to a client that only knows `initialize`). Tasks live in
memory (`memory://`): a restarted server knows none of the old ones.

* `task_bump(tag, secs)`: runs only as a task (mode `required`); works `secs` seconds, then
  appends `task_bump <tag>` to $COUNTER_FILE. Polled every $POLL_MS (default 200) ms.
* `task_set(tag, secs)`: as `task_bump`, annotated `idempotentHint: true` (appends
  `task_set <tag>`).
* `maybe_task(tag)`: may run as a task (mode `optional`): a client that declared the tasks
  extension gets one; appends `maybe_task <tag>` at once.
* `plain_wait(tag, secs)`: an ordinary tool (never a task): waits `secs` seconds, then appends
  `plain_wait <tag>`; a cancelled call appends nothing.

Every JSON-RPC request the server receives over HTTP is appended to $REQUEST_LOG as one JSON
line `{"method": …, "name": …, "taskId": …, "arguments": …, "meta": …}` before it is handled,
so a test counts the `tools/call`s, `tasks/get`s and `tasks/cancel`s it really got, and
sees each request's `_meta`.

    python tasks_server.py http PORT      # Streamable HTTP at http://127.0.0.1:PORT/mcp
    python tasks_server.py stdio
"""

import asyncio
import json
import os
import sys
from datetime import timedelta

from fastmcp import FastMCP
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension

POLL = timedelta(milliseconds=int(os.environ.get("POLL_MS", "200")))

mcp = FastMCP("lazarus-tasks", version="4.1.4-test")
mcp.add_extension(TasksExtension(url="memory://"))


def effect(line: str) -> None:
    with open(os.environ["COUNTER_FILE"], "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@mcp.tool(task=TaskConfig(mode="required", poll_interval=POLL))
async def task_bump(tag: str = "-", secs: float = 1.0) -> str:
    """Works secs seconds as a background task, then appends a line to the counter (not
    idempotent)."""
    await asyncio.sleep(secs)
    effect(f"task_bump {tag}")
    return f"task bumped {tag}"


@mcp.tool(
    task=TaskConfig(mode="required", poll_interval=POLL),
    annotations={"idempotentHint": True, "destructiveHint": False},
)
async def task_set(tag: str = "-", secs: float = 1.0) -> str:
    """Works secs seconds as a background task, then appends a line to the counter; says it
    is idempotent (a trusted server's word would let a plain call run again)."""
    await asyncio.sleep(secs)
    effect(f"task_set {tag}")
    return f"task set {tag}"


@mcp.tool(task=TaskConfig(mode="optional", poll_interval=POLL))
async def maybe_task(tag: str = "-") -> str:
    """Appends a line to the counter; runs as a task when the client asks for tasks."""
    effect(f"maybe_task {tag}")
    return f"maybe {tag}"


@mcp.tool
async def plain_wait(tag: str = "-", secs: float = 30.0) -> str:
    """Waits secs seconds, then appends a line to the counter (an ordinary call)."""
    await asyncio.sleep(secs)
    effect(f"plain_wait {tag}")
    return f"waited {tag}"


class RequestLog:
    """ASGI middleware: logs each JSON-RPC request body before the app sees it."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        log(body)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


def log(body: bytes) -> None:
    path = os.environ.get("REQUEST_LOG")
    if not path:
        return
    try:
        msg = json.loads(body)
    except ValueError:
        return
    for m in msg if isinstance(msg, list) else [msg]:
        if not isinstance(m, dict) or "method" not in m:
            continue
        params = m.get("params") or {}
        entry = {
            "method": m["method"],
            "name": params.get("name"),
            "taskId": params.get("taskId"),
            "arguments": params.get("arguments"),
            "meta": params.get("_meta"),
        }
        with open(path, "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        from starlette.middleware import Middleware

        mcp.run(
            "http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            show_banner=False,
            log_level="warning",
            middleware=[Middleware(RequestLog)],
        )
    else:
        mcp.run("stdio", show_banner=False)
