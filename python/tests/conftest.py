"""What the package's tests share: where sessions go (a directory, or a fresh schema of the
PostgreSQL test server), and the `lazarus` binaries they check the sessions with."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest


def _truthy(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0", "false")


def pg_base() -> str | None:
    """The PostgreSQL test server (`LAZARUS_TEST_PG`), as the Rust tests take it. Under CI (or
    `LAZARUS_REQUIRE_PG`) a missing server fails the run instead of skipping it."""
    base = os.environ.get("LAZARUS_TEST_PG")
    if base:
        return base
    if _truthy("CI") or _truthy("LAZARUS_REQUIRE_PG"):
        pytest.fail("LAZARUS_TEST_PG is not set, but CI / LAZARUS_REQUIRE_PG say PostgreSQL must be tested here")
    return None


def fresh_pg_url() -> str:
    base = pg_base()
    if base is None:
        pytest.skip("*** SKIPPED: LAZARUS_TEST_PG is not set (scripts/pg-test-server.sh start) ***")
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}schema=t_{uuid.uuid4().hex[:16]}"


@pytest.fixture(params=["files", "postgres"])
def where(request, tmp_path):
    """Keyword arguments naming a store of their own: `directory=` or `store=`."""
    if request.param == "files":
        return {"directory": str(tmp_path / "sessions")}
    return {"store": fresh_pg_url()}


def bin_path(name: str) -> str:
    bin_dir = os.environ.get("LAZARUS_TEST_BIN_DIR")
    if not bin_dir:
        pytest.fail(f"LAZARUS_TEST_BIN_DIR must name the directory of {name} (cargo build's target/debug)")
    path = os.path.join(bin_dir, name)
    if not os.path.exists(path):
        pytest.fail(f"{path} does not exist: build it first (cargo build)")
    return path


def store_args(where: dict) -> list[str]:
    """The `lazarus` flags naming the same store."""
    if "store" in where:
        return ["--store", where["store"]]
    return ["--session-dir", where["directory"]]


def lazarus(where: dict, *args: str) -> subprocess.CompletedProcess:
    """Runs `lazarus sessions ARGS` against the store of `where`."""
    return subprocess.run(
        [bin_path("lazarus"), "sessions", *args, *store_args(where)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_verified(where: dict, session_id: str) -> None:
    out = lazarus(where, "verify", session_id)
    assert out.returncode == 0, f"lazarus sessions verify {session_id}: {out.stdout}{out.stderr}"


def listed(where: dict) -> dict[str, dict]:
    out = lazarus(where, "list", "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return {r["id"]: r for r in rows}


def kinds(where: dict, session_id: str) -> list[str]:
    """The kinds of a session's records, as `lazarus sessions export` writes them."""
    out = lazarus(where, "export", session_id)
    assert out.returncode == 0, out.stderr
    return [json.loads(line)["kind"] for line in out.stdout.splitlines() if line.strip()]
