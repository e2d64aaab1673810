#!/usr/bin/env bash
# The Python package's tests: installs the pinned frameworks (python/tests/requirements.txt)
# into a cached virtualenv, builds and installs the package as a user would
# (`pip install ./python`), then runs pytest against local files and PostgreSQL.
#
#   scripts/python-tests.sh [PYTEST ARGS]
#
# Needs: the workspace's debug binaries (`cargo build`: lazarus, scripted-model-server), and
# LAZARUS_TEST_PG for the PostgreSQL half (scripts/test.sh starts one; under CI or
# LAZARUS_REQUIRE_PG a missing server fails the run). Cache: $LAZARUS_PY_CACHE, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-python. Only PyPI is contacted.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${LAZARUS_PY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-python}
venv="$cache/venv"
log() { echo "python-tests.sh: $*" >&2; }

spec=$(cat "$repo/python/tests/requirements.txt")
if ! { [ -f "$venv/.installed" ] && [ "$(cat "$venv/.installed")" = "$spec" ]; }; then
  log "installing python/tests/requirements.txt into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$repo/python/tests/requirements.txt" >&2
  echo "$spec" > "$venv/.installed"
fi

bin_dir=${LAZARUS_TEST_BIN_DIR:-$repo/target/debug}
for bin in lazarus scripted-model-server; do
  [ -x "$bin_dir/$bin" ] || {
    log "$bin_dir/$bin is missing: run cargo build --workspace first"
    exit 1
  }
done

log "pip install ./python (builds the native part with maturin)"
# the build's own target directory, kept between runs (it is not the workspace's: another lock)
PATH="$venv/bin:$PATH" CARGO_TARGET_DIR="$repo/python/target" "$venv/bin/python" -m pip install --quiet \
  --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps "$repo/python" >&2

# pytest itself, not `python -m pytest`: that would put the working directory first on the
# path, and a checkout's python/lazarus (without its native part) would shadow the installed one
cd "$repo"
LAZARUS_TEST_BIN_DIR="$bin_dir" "$venv/bin/pytest" -q -p no:cacheprovider python/tests "$@"
