"""Server subprocesses for benchmarks: started, awaited through a ready file, stopped by closing stdin.

A benchmark's server runs in its own process so that its CPU and memory do not mix
with the figures of the process under test.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
