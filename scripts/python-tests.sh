#!/usr/bin/env bash
# The Python package's tests, from the wheel a user installs:
#  1. the wheel: $LAZARUS_WHEEL, else built now by scripts/build-wheel.sh (manylinux_2_28, abi3);
#  2. it installs into a fresh virtualenv whose PATH has no cargo and no rustc, each extra
#     installs the framework it names, and docs/python.md's LangGraph example runs there;
#  3. python/tests against the newest frameworks (python/tests/requirements.txt) and the
#     oldest the extras' lower bounds allow (requirements-oldest.txt), on local files and on
#     PostgreSQL, each session checked with `lazarus sessions verify`.
#
#   scripts/python-tests.sh [PYTEST ARGS]
#   LAZARUS_PY_MATRIX="newest" scripts/python-tests.sh     # one set of frameworks only
#
# Needs: the workspace's debug binaries (`cargo build`: lazarus, scripted-model-server), and
# LAZARUS_TEST_PG for the PostgreSQL half (scripts/test.sh starts one; under CI or
# LAZARUS_REQUIRE_PG a missing server fails the run). Caches: see scripts/python-env.sh.
set -euo pipefail
source "$(dirname "$0")/python-env.sh"
repo=$py_repo
log() { echo "python-tests.sh: $*" >&2; }

bin_dir=${LAZARUS_TEST_BIN_DIR:-$repo/target/debug}
for bin in lazarus scripted-model-server; do
  [ -x "$bin_dir/$bin" ] || {
    log "$bin_dir/$bin is missing: run cargo build --workspace first"
    exit 1
  }
done

wheel=$(py_wheel)
log "testing $wheel"

# 2. A fresh virtualenv, as a user without Rust has one: nothing on PATH but the system's and
# the venv's, no cargo, no rustc. The wheel and its extras from PyPI; then the example.
python=$(python3 -c 'import sys; print(sys.executable)')
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
(
  export PATH="$fresh/venv/bin:/usr/local/bin:/usr/bin:/bin"
  unset CARGO_HOME RUSTUP_HOME
  for tool in cargo rustc; do
    if command -v "$tool" >/dev/null; then
      log "the fresh environment has $tool on its PATH ($(command -v "$tool")): it would prove nothing"
      exit 1
    fi
  done
  "$python" -m venv "$fresh/venv"
  log "pip install '$(basename "$wheel")[langgraph,agents]' into a fresh virtualenv without cargo or rustc"
  pip install --quiet --disable-pip-version-check "lazarus[langgraph,agents] @ file://$wheel" >&2
  python - <<'PY'
from importlib.metadata import version
import agents, langgraph.graph, lazarus._native  # the extras installed what they name
print(f"python-tests.sh: fresh venv: lazarus {version('lazarus')}, langgraph {version('langgraph')}, "
      f"openai-agents {version('openai-agents')}")
PY
  cd "$fresh" && LAZARUS_SESSION_DIR="$fresh/sessions" python "$repo/python/examples/langgraph_quickstart.py" >&2
  "$bin_dir/lazarus" sessions verify --all --session-dir "$fresh/sessions" >&2
) >&2

# 3. The tests, against each set of frameworks.
matrix=${LAZARUS_PY_MATRIX:-newest oldest}
for m in $matrix; do
  case $m in
    newest) req="$repo/python/tests/requirements.txt" ;;
    oldest) req="$repo/python/tests/requirements-oldest.txt" ;;
    *) log "LAZARUS_PY_MATRIX: unknown set $m (newest, oldest)"; exit 2 ;;
  esac
  venv=$(py_venv "$req")
  py_install_wheel "$venv" "$wheel"
  log "python/tests with the $m frameworks ($(basename "$req"))"
  # pytest itself, not `python -m pytest`: that would put the working directory first on the
  # path, and a checkout's python/lazarus (without its native part) would shadow the wheel's
  # the kill -9 loop of add_items tests the ledger, not the framework: fewer rounds on the
  # oldest set unless told
  kills=${LAZARUS_PY_KILLS:-$([ "$m" = oldest ] && echo 40 || echo 200)}
  (cd "$repo" && LAZARUS_PY_REQUIREMENTS="$req" LAZARUS_TEST_BIN_DIR="$bin_dir" LAZARUS_PY_KILLS="$kills" \
    "$venv/bin/pytest" -q -p no:cacheprovider python/tests "$@")
done
