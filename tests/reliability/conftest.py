"""Fixtures for the reliability suite, and the figures it prints at the end of the run.

The in-process webhook (``settings``, ``runtime``, ``app``, ``client``) is tests/conftest.py's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.reliability.figures import FIGURES, FIGURES_ENV, summary_lines
from tests.reliability.servers import LiveServer, launch


@pytest.fixture(scope="session")
def gunicorn_server() -> Iterator[LiveServer]:
    """One `extender serve` with 2 gunicorn workers, shared by the fuzz sample, schemathesis and load."""
    server = launch(["--log-level", "WARNING"], workers=2)
    yield server
    code = server.stop()
    output = server.output()
    assert code == 0, output[-4000:]
    assert "Traceback" not in output, output[-4000:]


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    data = FIGURES.to_dict()
    ran = data["fuzz"]["bodies"] or data["schemathesis"]["cases"] or data["load"]["requests"] or data["faults"]
    if not ran:
        return
    terminalreporter.section("reliability figures")
    for line in summary_lines(data):
        terminalreporter.write_line(line)
    target = os.environ.get(FIGURES_ENV)
    if target:
        FIGURES.write(target)
        terminalreporter.write_line(f"(figures written to {target})")
