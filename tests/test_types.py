"""The strict type check of the whole package, as `make lint` runs it: CI runs only pytest.

mypy checks the packages `[tool.mypy]` in pyproject.toml names (`extender`, all of it, strict),
from the repository root so that it reads that configuration and keeps its cache in .mypy_cache
(a warm run takes a second or two, a cold one about fifteen). gunicorn ships no annotations:
stubs/gunicorn describes what the webhook uses, and stubtest holds those stubs to the installed
gunicorn, so a new gunicorn that renames or reshapes one of them fails here, not in production.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                                reason="mypy is not installed (pip install -e '.[test]')")


def _config() -> dict[str, object]:
    config: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    return config


def test_the_configuration_checks_the_whole_package_strictly() -> None:
    """A package dropped from the list, or strict turned off, must not make the check pass on less."""
    config = _config()
    assert config["strict"] is True
    assert config["packages"] == ["extender"]
    assert config["mypy_path"] == "stubs" and (ROOT / "stubs" / "gunicorn" / "__init__.pyi").is_file()


def test_mypy_finds_no_error_in_the_package() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
                            cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"mypy found errors:\n{result.stdout}{result.stderr}"
    assert "Success: no issues found" in result.stdout, result.stdout


def test_the_gunicorn_stubs_match_the_installed_gunicorn() -> None:
    """Every name, signature and attribute type in stubs/gunicorn as the installed gunicorn has it
    (what the stubs leave out is not reported: they describe only what extender/ uses)."""
    result = subprocess.run([sys.executable, "-m", "mypy.stubtest", "--ignore-missing-stub",
                             "--mypy-config-file", str(ROOT / "pyproject.toml"), "gunicorn"],
                            cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"stubtest:\n{result.stdout}{result.stderr}"
    assert re.search(r"Success: no issues found in \d+ modules", result.stdout), result.stdout


def test_each_type_ignore_names_its_code_and_says_why() -> None:
    """`# type: ignore` is rare and explained: an error code, then a comment saying why."""
    bare = []
    for path in sorted((ROOT / "extender").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "type: ignore" in line and not re.search(r"#\s*type:\s*ignore\[[a-z-]+(, [a-z-]+)*\]\s+#\s*\S", line):
                bare.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not bare, "a type: ignore without a code or a reason:\n" + "\n".join(bare)
