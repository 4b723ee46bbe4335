"""Server subprocesses for benchmarks: started, awaited through a ready file, stopped by closing stdin.

A benchmark's server runs in its own process so that its CPU and memory do not mix
with the figures of the process under test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def serving_child(script: str, args: list[str], *, timeout: float) -> Iterator[str]:
    """Run `python script *args READY_FILE`; yield what the child writes there (its URL).

    The child serves until its standard input closes.
    """
    with tempfile.TemporaryDirectory() as tmp:
        ready = Path(tmp) / "ready"
        server = subprocess.Popen([sys.executable, script, *args, str(ready)], stdin=subprocess.PIPE, cwd=ROOT)
        try:
            started = time.monotonic()
            while not ready.exists():
                if server.poll() is not None or time.monotonic() - started > timeout:
                    raise RuntimeError(f"benchmark server {args[:2]} did not start")
                time.sleep(0.1)
            yield ready.read_text().strip()
        finally:
            if server.stdin:
                server.stdin.close()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()


def serve_fake_until_closed(fake: Any, ready_file: str) -> None:
    """The child's side for a started FakeApiServer: write its kubeconfig, announce that path
    in ``ready_file`` (one atomic rename, so the parent never reads half of it), serve until
    the parent closes stdin, then close the server."""
    kubeconfig = fake.write_kubeconfig(Path(ready_file).with_suffix(".kubeconfig"))
    Path(ready_file + ".tmp").write_text(str(kubeconfig))
    os.replace(ready_file + ".tmp", ready_file)
    sys.stdin.read()
    fake.close()
