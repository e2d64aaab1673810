#!/usr/bin/env bash
# Builds the `lazarus` Python package as one wheel for every Linux x86-64 with glibc 2.28 or
# newer (manylinux_2_28) and every CPython from 3.10 (abi3): maturin with zig (PyPI's
# `ziglang`) as compiler and linker, so no glibc newer than 2.28 is linked whatever this
# machine has. Checks the result (the tag, and the highest glibc symbol version the native
# part needs) and prints the wheel's path as its last line.
#
#   scripts/build-wheel.sh                 # -> target/wheels/lazarus-…-manylinux_2_28_x86_64.whl
#
# Needs: python3 with venv, cargo (a stable Rust). Cache: $LAZARUS_PY_CACHE, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-python: the build tools' virtualenv and the build's
# target directory (so a second build compiles only what changed). Only PyPI is contacted.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${LAZARUS_PY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lazarus-python}
out=${LAZARUS_WHEEL_DIR:-$repo/target/wheels}
log() { echo "build-wheel.sh: $*" >&2; }
glibc_max=2.28

spec=$(cat "$repo/python/build-requirements.txt")
venv="$cache/build-$(printf '%s' "$spec" | sha256sum | cut -c1-12)"
if ! [ -f "$venv/.installed" ]; then
  log "installing python/build-requirements.txt (maturin, ziglang) into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$repo/python/build-requirements.txt" >&2
  touch "$venv/.installed"
fi

mkdir -p "$out"
rm -f "$out"/lazarus-*.whl
log "building the wheel (release, manylinux_$glibc_max, abi3): a first build compiles ~200 crates (about 4 minutes on 2 cores); cargo shows its progress"
# the build's own target directory, kept in the cache: not the workspace's (another lock, and
# another profile), and still there for the next build
PATH="$venv/bin:$PATH" CARGO_TARGET_DIR=${LAZARUS_WHEEL_TARGET:-$cache/wheel-target} \
  "$venv/bin/maturin" build --release --zig --compatibility "manylinux_${glibc_max/./_}" \
  --manifest-path "$repo/python/Cargo.toml" --out "$out" >&2

shopt -s nullglob
wheels=("$out"/lazarus-*-cp310-abi3-manylinux_"${glibc_max/./_}"_x86_64.whl)
[ ${#wheels[@]} -eq 1 ] || { log "expected one manylinux_${glibc_max/./_} abi3 wheel in $out, found: $(ls "$out")"; exit 1; }
wheel=${wheels[0]}

# what the native part links against, read from the wheel itself: no glibc symbol newer
# than the tag says
check=$(mktemp -d)
trap 'rm -rf "$check"' EXIT
"$venv/bin/python" -m zipfile -e "$wheel" "$check" >/dev/null
so=$(find "$check" -name '_native*.so' | head -1)
[ -n "$so" ] || { log "no native library in $wheel"; exit 1; }
need=$(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
if [ "$(printf '%s\n%s\n' "$need" "$glibc_max" | sort -V | tail -1)" != "$glibc_max" ]; then
  log "$so needs glibc $need, newer than $glibc_max"
  exit 1
fi
log "ok: $(basename "$wheel") ($(du -h "$wheel" | cut -f1)), needs glibc $need at most"
echo "$wheel"
