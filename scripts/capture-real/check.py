#!/usr/bin/env python3
"""Checks captures against their true endings with the real `lazarus boot-resume` binary:
for every PROGRAM/SCENARIO in DIR (as capture.py writes them), a dry-run JSON scan of the
scenario must give each session the verdict endings.json records (sub-agent transcripts:
skipped/subagent), and a session that would be resumed the permission mode it ran in and the
interrupted calls endings.json names. Prints one line per session and exits 1 on any
mismatch."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FORMAT = {"claude": "claude-code", "openclaw": "openclaw", "codex": "codex", "pi": "pi",
          "gemini-cli": "gemini-cli", "opencode": "opencode"}


def unpack_databases(src: Path):
    """OpenCode's database and WAL are stored zstd-compressed: restore them in the copy."""
    for z in list(src.rglob("*.db.zst")) + list(src.rglob("*.db-wal.zst")):
        raw = subprocess.run(["zstd", "-d", "-q", "-c", str(z)], capture_output=True, check=True)
        z.with_name(z.name[: -len(".zst")]).write_bytes(raw.stdout)
        z.unlink()


RESUMABLE = {"pending_input", "interrupted_tool_call", "interrupted_after_tool_result",
             "interrupted_stream"}


def outcome(r: dict) -> str:
    if r["verdict"] == "skipped":
        return f"skipped/{r.get('why')}"
    if r["verdict"] == "failed":
        return "failed/" + ("transient" if r.get("transient") else "permanent")
    return r["verdict"]


def expected(e: dict) -> str:
    if "expect" in e:  # the files cannot tell the true ending (see expect_why)
        return e["expect"]
    v = e["verdict"]
    if v == "skipped":
        return f"skipped/{e.get('why')}"
    if v == "failed":
        return "failed/" + ("transient" if e.get("transient") else "permanent")
    return v


def main():
    root = Path(sys.argv[1])
    lazarus = os.environ["LAZARUS"]
    bad = total = 0
    for prog in sorted(p for p in root.iterdir() if p.is_dir()):
        if prog.name not in FORMAT:
            raise SystemExit(f"{prog}: no format known for captures of {prog.name!r}")
        endings = json.loads((prog / "endings.json").read_text())
        for name, e in sorted(endings.items()):
            if name.startswith("_"):
                continue
            with tempfile.TemporaryDirectory() as tmp:
                # A copy: opening a WAL-mode SQLite store creates files beside it.
                src = Path(tmp) / name
                if (prog / name).exists():
                    shutil.copytree(prog / name, src)
                    unpack_databases(src)
                else:
                    src.mkdir()
                p = subprocess.run(
                    [lazarus, "boot-resume", "--source", f"{FORMAT[prog.name]}:{src}",
                     "--window", "0", "--skip-pattern", "", "--dry-run", "--json"],
                    capture_output=True, text=True, env={**os.environ, "XDG_STATE_HOME": tmp})
            reports = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
            if e["verdict"] == "absent":
                ok = not reports
                bad += not ok
                total += 1
                print(f"{'ok  ' if ok else 'FAIL'} {prog.name}/{name}: no session left "
                      f"({len(reports)} found)")
                continue
            if not reports:
                print(f"FAIL {prog.name}/{name}: nothing found ({p.stderr.strip()[-300:]})")
                bad += 1
            for r in reports:
                total += 1
                want = "skipped/subagent" if "/subagents/" in r["path"] else expected(e)
                sessions = e.get("sessions") or {}
                key = r.get("session_key") or r["id"]
                if key in sessions:
                    want = expected(sessions[key])
                got = outcome(r)
                ok = got == want
                detail = "" if ok else f" (want {want}: {r.get('reason')})"
                # what a resume carries: the mode the session ran in, the calls cut off
                resumable = r["verdict"] in RESUMABLE and "/subagents/" not in r["path"]
                if resumable and e.get("permission_mode") \
                        and r.get("permission_mode") != e["permission_mode"]:
                    ok = False
                    detail += f" (permission mode {r.get('permission_mode')}, ran in {e['permission_mode']})"
                calls = [c["tool"] for c in r.get("interrupted_calls", [])]
                if resumable and "interrupted_calls" in e and calls != e["interrupted_calls"]:
                    ok = False
                    detail += f" (calls {calls}, want {e['interrupted_calls']})"
                bad += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {prog.name}/{name}: {got}{detail}")
    print(f"check: {total - bad} passed, {bad} failed")
    sys.exit(1 if bad or not total else 0)


if __name__ == "__main__":
    main()
