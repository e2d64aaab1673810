# Sourced by scripts/python-tests.sh and scripts/bench-python.sh: the cached virtualenvs the
# Python package is tested in, one per requirements file (named by a hash of its content, so
# checkouts that pin different versions do not replace each other's), and the wheel.
# Cache: $LAZARUS_PY_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-python. Only PyPI is
# contacted.

py_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py_cache=${LAZARUS_PY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-python}

# The virtualenv for a requirements file (created and filled once), its path on stdout.
py_venv() {
  local req=$1 spec venv
  spec=$(cat "$req")
  venv="$py_cache/venv-$(basename "$req" .txt)-$(printf '%s' "$spec" | sha256sum | cut -c1-12)"
  if ! [ -f "$venv/.installed" ]; then
    echo "python-env: installing $(basename "$req") into $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >&2
    touch "$venv/.installed"
  fi
  echo "$venv"
}

# The wheel to test: $LAZARUS_WHEEL, else the one scripts/build-wheel.sh builds now.
py_wheel() {
  if [ -n "${LAZARUS_WHEEL:-}" ]; then
    [ -f "$LAZARUS_WHEEL" ] || { echo "python-env: LAZARUS_WHEEL=$LAZARUS_WHEEL is not a file" >&2; return 1; }
    echo "$LAZARUS_WHEEL"
  else
    "$py_repo/scripts/build-wheel.sh" | tail -1
  fi
}

# Installs the wheel (only it: the frameworks are the requirements file's) into a virtualenv.
py_install_wheel() {
  "$1/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$2" >&2
}
