"""What the package says about itself holds: each extra's lower bound is what the oldest run
pins, this run has the frameworks its requirements file pins, and the example docs/python.md
shows is the one scripts/python-tests.sh runs in a fresh virtualenv."""

from __future__ import annotations

import os
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s#]+)", line.strip())
        if m:
            found[m.group(1).lower()] = m.group(2)
    return found


def test_each_extra_installs_its_framework_from_the_oldest_release_tested():
    project = tomllib.loads((REPO / "python/pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any(d.startswith("langgraph>=") for d in extras["langgraph"]), extras
    assert any(d.startswith("openai-agents>=") for d in extras["agents"]), extras
    oldest = pins(REPO / "python/tests/requirements-oldest.txt")
    for deps in extras.values():
        for dep in deps:
            name, bound = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([^,;\s]+)", dep).groups()
            assert oldest.get(name.lower()) == bound, f"{dep}: requirements-oldest.txt pins {oldest.get(name.lower())}"


def test_this_run_has_the_frameworks_its_requirements_pin():
    req = os.environ.get("LAZARUS_PY_REQUIREMENTS")
    if not req:
        if os.environ.get("CI"):
            pytest.fail("LAZARUS_PY_REQUIREMENTS is not set: run through scripts/python-tests.sh")
        pytest.skip("run outside scripts/python-tests.sh: which frameworks were meant is unknown")
    for name, want in pins(Path(req)).items():
        assert version(name) == want, f"{name}: {version(name)} installed, {want} pinned in {req}"


def test_the_documented_example_is_the_one_that_runs():
    example = (REPO / "python/examples/langgraph_quickstart.py").read_text()
    body = example.split('"""', 2)[2].strip()
    doc = (REPO / "docs/python.md").read_text()
    assert body in doc, "docs/python.md does not show python/examples/langgraph_quickstart.py as it is"
