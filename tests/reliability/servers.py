"""Live processes for the reliability tests: `extender serve` (gunicorn) and helpers to poke at them.

Unlike tests.helpers.start_server, the output goes to a file, not a pipe: a load test
writes more log lines than a pipe buffer holds, and a full pipe would stall the server.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import ROOT, SNAPSHOT, free_port, wait_http


@dataclass
class LiveServer:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    _log_file: object = field(repr=False, default=None)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def workers(self) -> list[int]:
        """The master's child processes: gunicorn's workers."""
        return children(self.process.pid)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait; SIGKILL if it does not exit in time. Returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self._log_file is not None:
            self._log_file.close()  # type: ignore[attr-defined]
            self._log_file = None
        return self.process.returncode


def children(pid: int) -> list[int]:
    """Child pids of `pid`, from /proc (every thread's children list)."""
    found: set[int] = set()
    task_dir = Path(f"/proc/{pid}/task")
    try:
        tasks = list(task_dir.iterdir())
    except FileNotFoundError:
        return []
    for task in tasks:
        try:
            text = (task / "children").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        found.update(int(p) for p in text.split())
    return sorted(found)


def established_connections(pid: int, port: int) -> int:
    """TCP connections to local `port` that process `pid` holds open (ESTABLISHED), from /proc."""
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return 0
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port and inode in inodes:
                count += 1
    return count


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers kill(0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def launch(args: list[str], *, workers: int = 2, ready_path: str = "/readyz", timeout: float = 30.0,
           env: dict[str, str] | None = None, port: int | None = None) -> LiveServer:
    """Start `python -m extender serve` on 127.0.0.1 with the embedded snapshot unless args say otherwise."""
    port = port or free_port()
    log_file = tempfile.NamedTemporaryFile(prefix="extender-reliability-", suffix=".log", delete=False)
    full_env = {**os.environ, **(env or {})}
    full_env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    argv = [sys.executable, "-m", "extender", "serve", "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
            *args]
    if "--source" not in args:
        argv += ["--source", "snapshot", "--snapshot", str(SNAPSHOT)]
    atexit.register(Path(log_file.name).unlink, missing_ok=True)  # kept until the run ends, for reading
    process = subprocess.Popen(argv, env=full_env, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT)
    server = LiveServer(process, port, Path(log_file.name), log_file)
    try:
        wait_http(f"{server.url}{ready_path}", timeout=timeout)
        # One worker answering is not all of them: wait until every worker has been forked.
        if not wait_until(lambda: len(server.workers()) >= workers, timeout):
            raise TimeoutError(f"only {len(server.workers())} of {workers} workers started")
    except TimeoutError:
        server.stop(5)
        raise TimeoutError(f"server did not start; output:\n{server.output()[-4000:]}") from None
    return server


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
