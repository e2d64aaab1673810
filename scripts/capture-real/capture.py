#!/usr/bin/env python3
"""Captures what the real agents write when killed at known points, as boot-resume fixtures.

    eval "$(scripts/capture-real/install.sh)"   # pinned programs into the cache
    scripts/capture-real/capture.py PROGRAM [SCENARIO...] [--out DIR]
    PROGRAM: claude, openclaw, codex, pi, gemini-cli, opencode

For every scenario: a fresh sandbox (HOME, work directory), the scripted model server from
crates/testkit playing that scenario's script (for Gemini CLI, gemini_server.py, which speaks
Google's Gemini API), the real program, SIGKILL of its whole process
tree at the scenario's point. The transcripts it left are copied, with the sandbox path
replaced by /home/dev/capture, to DIR/PROGRAM/SCENARIO/, and DIR/PROGRAM/endings.json
records each scenario's true ending and the verdict boot-resume must give.
Default DIR: crates/boot-resume/tests/fixtures/real.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, log, scrub_text  # noqa: E402

PLACEHOLDER = "/home/dev/capture"


# program (fixture directory name) -> (module, the variable naming its binary, version pin key)
PROGRAMS = {
    "claude": ("claude", "CLAUDE_BIN", "CLAUDE_PKG"),
    "openclaw": ("openclaw", "OPENCLAW_BIN", "OPENCLAW_PKG"),
    "codex": ("codex", "CODEX_BIN", "CODEX_PKG"),
    "pi": ("pi", "PI_BIN", "PI_PKG"),
    "gemini-cli": ("gemini", "GEMINI_BIN", "GEMINI_PKG"),
    "opencode": ("opencode", "OPENCODE_BIN", "OPENCODE_PKG"),
}


def bins_from_env(program: str) -> dict:
    """NODE_BIN and the program's own binary (every *_BIN that is set is passed on)."""
    need = ["NODE_BIN", PROGRAMS[program][1]]
    b = {k: v for k, v in os.environ.items() if k.endswith("_BIN") and v}
    missing = [k for k in need if not b.get(k)]
    if missing:
        raise SystemExit(f"set {', '.join(missing)} (eval \"$(scripts/capture-real/install.sh)\")")
    return b


def versions() -> dict:
    out = {}
    for line in (Path(__file__).resolve().parent / "versions.env").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k] = v
    return out


def scrubs(root: Path) -> list[tuple[str, str]]:
    """The sandbox path, plain and in the dashed form Claude Code uses for directory names."""
    r = str(root)
    dashed = re.sub(r"[^A-Za-z0-9]", "-", r)
    return [(r, PLACEHOLDER), (dashed, PLACEHOLDER.replace("/", "-"))]


def zstd(data: bytes) -> bytes:
    """Compressed with the zstd command (-19): raw SQLite pages and WAL frames repeat a lot."""
    if not shutil.which("zstd"):
        raise SystemExit("the zstd command is needed to store compressed captures (apt-get install zstd)")
    return subprocess.run(["zstd", "-19", "-q", "-c"], input=data, capture_output=True,
                          check=True).stdout


def store(program: str, name: str, res: dict, out: Path, compress: tuple = ()) -> dict:
    """`compress`: file names stored as NAME.zst (the raw bytes' SHA-256 goes to endings)."""
    root: Path = res["root"]
    dest = out / program / name
    if dest.exists():
        shutil.rmtree(dest)
    rel_files = []
    raw = {}
    for f in res["files"]:
        rel = f.relative_to(root)
        # Claude Code names project directories after the cwd: drop that level's sandbox part.
        parts = [p.replace(re.sub(r"[^A-Za-z0-9]", "-", str(root)), PLACEHOLDER.replace("/", "-"))
                 for p in rel.parts]
        target = dest.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = f.read_bytes()
        # SQLite databases and their WAL cannot be scrubbed byte-wise (checksummed pages)
        sqlite = (".sqlite" in f.name or f.name.endswith((".db", ".db-wal", ".db-shm"))
                  or data[:16] == b"SQLite format 3\x00")
        if not sqlite:
            for old, new in scrubs(root):
                data = data.replace(old.encode(), new.encode())
        if f.name in compress:
            raw[str(target.relative_to(dest))] = {"bytes": len(data),
                                                   "sha256": hashlib.sha256(data).hexdigest()}
            data = zstd(data)
            target = target.with_name(target.name + ".zst")
        target.write_bytes(data)
        rel_files.append(str(target.relative_to(dest)))
    entry = {k: v for k, v in res.items() if k not in ("files", "root")}
    entry["files"] = sorted(rel_files)
    if raw:
        entry["uncompressed"] = raw
    return entry


def write_endings(path: Path, endings: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(sorted(endings.items())), indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("program", choices=list(PROGRAMS))
    ap.add_argument("scenarios", nargs="*")
    ap.add_argument("--out", default=str(REPO / "crates/boot-resume/tests/fixtures/real"))
    ap.add_argument("--keep", action="store_true", help="keep the sandboxes")
    a = ap.parse_args()
    bins = bins_from_env(a.program)
    module, _, pin = PROGRAMS[a.program]
    mod = __import__(module)
    specs = mod.scenarios(None)
    names = a.scenarios or list(specs)
    out = Path(a.out)
    endings_path = out / a.program / "endings.json"
    endings = json.loads(endings_path.read_text()) if endings_path.exists() else {}
    endings["_versions"] = {k: v for k, v in versions().items()
                            if k in ("NODE_PKG", pin)}
    failed = []
    for name in names:
        if name not in specs:
            raise SystemExit(f"unknown scenario {name}; known: {', '.join(specs)}")
        # A fixed sandbox path: SQLite files (and their WAL, whose frames are checksummed)
        # cannot be scrubbed byte-wise, so their paths are left as this neutral one.
        box = Path(tempfile.gettempdir()) / "lzcap" / f"{a.program}-{name}"
        shutil.rmtree(box, ignore_errors=True)
        box.mkdir(parents=True)
        log(f"{a.program}/{name}: sandbox {box}")
        try:
            res = mod.run(name, specs[name], box, bins)
            endings[name] = store(a.program, name, res, out, getattr(mod, "COMPRESS", ()))
            log(f"{a.program}/{name}: stored {endings[name]['files']}")
            write_endings(endings_path, endings)
        except Exception as e:  # noqa: BLE001 - report and go on with the next scenario
            log(f"{a.program}/{name}: FAILED: {e}")
            failed.append(name)
        finally:
            if not a.keep:
                shutil.rmtree(box, ignore_errors=True)
    write_endings(endings_path, endings)
    if failed:
        raise SystemExit(f"failed scenarios: {', '.join(failed)}")


if __name__ == "__main__":
    main()
