#!/usr/bin/env bash
# Runs a Python script with the package installed from its wheel and the newest frameworks
# (python/tests/requirements.txt), in the cached virtualenv scripts/python-tests.sh uses.
#
#   scripts/python-run.sh scripts/bench_python.py --quick
#   scripts/python-run.sh scripts/python-fixtures.py
#
# The wheel: $LAZARUS_WHEEL, else built by scripts/build-wheel.sh (see scripts/python-env.sh).
set -euo pipefail
source "$(dirname "$0")/python-env.sh"
[ $# -ge 1 ] || { echo "usage: scripts/python-run.sh SCRIPT.py [ARGS]" >&2; exit 2; }
venv=$(py_venv "$py_repo/python/tests/requirements.txt")
py_install_wheel "$venv" "$(py_wheel)"
exec "$venv/bin/python" "$@"
