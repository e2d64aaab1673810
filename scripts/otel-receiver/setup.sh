#!/usr/bin/env bash
# Installs the OTLP receiver the live-telemetry test sends spans to: PyPI
# `opentelemetry-proto` (the official OpenTelemetry protobuf bindings) into the repo's
# virtualenv (<repo>/.venv, shared with scripts/local-model/setup.sh; LAZARUS_VENV overrides).
# No package registry here carries the OpenTelemetry Collector, so receiver.py decodes OTLP
# with these bindings. Idempotent: a second run only checks. Prints the python to run it with.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${LAZARUS_VENV:-$repo/.venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    echo "otel-receiver: creating virtualenv $venv" >&2
    "$python" -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' >/dev/null 2>&1; then
    echo "otel-receiver: installing opentelemetry-proto" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'opentelemetry-proto==1.45.2'
fi
echo "$venv/bin/python"
