"""The strict type check of the pure packages, as `make lint` runs it: CI runs only pytest.

mypy checks the packages `[tool.mypy]` in pyproject.toml names (the pure ones: model, dra, policy,
gangs and cycle, and the adapters cluster, kube, usage, explain, simulation, checks and scheduler;
strict, with what they import), from the repository root so that it reads that configuration and
keeps its cache in .mypy_cache (a warm run takes under a second, a cold one a few).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STRICT_PACKAGES = ["extender.model", "extender.dra", "extender.policy", "extender.gangs", "extender.cycle",
                   "extender.cluster", "extender.kube", "extender.usage", "extender.explain", "extender.simulation",
                   "extender.checks", "extender.scheduler"]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                                reason="mypy is not installed (pip install -e '.[test]')")


def test_the_configuration_checks_the_pure_packages_strictly() -> None:
    """A package dropped from the list, or strict turned off, must not make the check pass on less."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    assert set(STRICT_PACKAGES) <= set(config["packages"])


def test_mypy_finds_no_error_in_the_strict_packages() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
                            cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"mypy found errors:\n{result.stdout}{result.stderr}"
    assert "Success: no issues found" in result.stdout, result.stdout
