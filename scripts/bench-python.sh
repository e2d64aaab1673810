#!/usr/bin/env bash
# The Python package against the savers it replaces (scripts/bench_python.py): LazarusSaver vs
# LangGraph's SqliteSaver with durability="sync", LazarusSession.add_items vs the Agents SDK's
# SQLiteSession, in one process; prints RESULT lines with the ratios.
#
#   scripts/bench-python.sh [--quick] [--rounds N]
#
# The sessions and databases go to a temporary directory under $BENCH_DIR (default: target/,
# on the disk the repository is on; a tmpfs would make every sync free).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export BENCH_DIR=${BENCH_DIR:-$repo/target}
mkdir -p "$BENCH_DIR"
exec "$repo/scripts/python-run.sh" "$repo/scripts/bench_python.py" "$@"
