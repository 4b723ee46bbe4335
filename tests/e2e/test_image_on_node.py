"""The product image's process as the container runtime starts and stops it, on the node's
containerd without kubelet in between, so that the test times the signal itself.

A pod deleted while its container starts gets SIGTERM at once (kubelet's StopContainer is
containerd's SIGTERM to the container's PID 1), while Python is still importing extender
(about a second, more on a busy node). The container must stop then: not run on to the
SIGKILL that ends its grace period (30 s in the chart), meanwhile free to take the Lease and
bind (a standalone replica) or to join the Service (a webhook replica). The kernel drops a
signal sent to a PID 1 that has no handler for it, so the image runs tini as PID 1
(Dockerfile, ENTRYPOINT), which forwards it to extender.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.images import PRODUCT_IMAGE

pytestmark = [pytest.mark.e2e, pytest.mark.node]


def argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def catches(pid: int, signum: int) -> bool:
    """The process has a handler for ``signum`` (its SigCgt mask in /proc)."""
    status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return bool(int(status["SigCgt"], 16) & (1 << (signum - 1)))


def test_a_sigterm_while_the_image_starts_stops_it_at_once(node: Any, product_image: Any) -> None:
    name = "sigterm-at-start"
    # The image's entry point running the webhook on its embedded snapshot: it runs until told to stop.
    entrypoint = product_image.config()["Entrypoint"]
    log = node.node.run_image(PRODUCT_IMAGE, name, [*entrypoint, "serve", "--bind", "0.0.0.0:8888", "--source", "snapshot"])
    try:
        def python_started() -> int | None:
            return next((pid for pid in node.node.task_pids(name) if Path(argv(pid)[0]).name.startswith("python")),
                        None)  # fmt: skip

        pid = node.wait_for(python_started, timeout=30, interval=0.01, message="extender's Python process")
        assert not catches(pid, signal.SIGTERM), f"{argv(pid)} handles SIGTERM already: too late to test its start"
        node.node.signal_task(name, "SIGTERM")
        sent = time.monotonic()
        try:
            node.wait_for(lambda: node.node.task_status(name) == "STOPPED", timeout=10, interval=0.1,
                          message="the container to stop after SIGTERM")  # fmt: skip
        except AssertionError as exc:
            processes = {p: argv(p) for p in node.node.task_pids(name)}
            raise AssertionError(f"{exc}; still running: {processes}\n{log.read_text(errors='replace')}") from None
        print(f"\nstopped {time.monotonic() - sent:.2f}s after SIGTERM")
        # Stopped by the signal (tini passes on 128 + SIGTERM), not ended by an error of its own.
        assert node.node.delete_task(name) == 128 + signal.SIGTERM, log.read_text(errors="replace")
    finally:
        node.node.remove_task(name)
