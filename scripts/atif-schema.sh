#!/usr/bin/env bash
# Regenerates crates/interchange/tests/atif/atif.schema.json: the JSON Schema of the ATIF
# trajectory models of the Harbor project (harbor on PyPI, Apache-2.0), as pydantic writes it
# (Trajectory.model_json_schema()). Harbor defines ATIF by these models and publishes no
# separate schema file; this is that schema, unchanged.
#   bash scripts/atif-schema.sh [VERSION]     (default: the version the vendored file came from)
set -euo pipefail
version=${1:-0.25.0}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  "harbor==$version" -d "$work"
cd "$work"
python3 -m zipfile -e harbor-"$version"-py3-none-any.whl unpacked
python3 -m pip show pydantic >/dev/null 2>&1 || python3 -m pip install --quiet 'pydantic>=2'
python3 - "$here/crates/interchange/tests/atif" <<'PY'
import json, sys, types
sys.path.insert(0, "unpacked")
# import the trajectory models alone (harbor/__init__ pulls in the whole framework)
for name, path in [("harbor", "unpacked/harbor"), ("harbor.models", "unpacked/harbor/models")]:
    m = types.ModuleType(name); m.__path__ = [path]; sys.modules[name] = m
from harbor.models.trajectories.trajectory import Trajectory
out = sys.argv[1]
with open(out + "/atif.schema.json", "w") as f:
    json.dump(Trajectory.model_json_schema(), f, indent=2)
    f.write("\n")
PY
cp unpacked/harbor-"$version".dist-info/licenses/LICENSE "$here/crates/interchange/tests/atif/LICENSE"
sha256sum harbor-"$version"-py3-none-any.whl
