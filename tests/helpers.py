"""Small helpers shared by the test packages (not fixtures: plain functions)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from extender.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
WIRE = FIXTURES / "wire"
SNAPSHOT = ROOT / "config" / "snapshot.yaml"
T = TypeVar("T")

#: Reflector settings that keep tests fast: reconnect backoff 50 ms doubling to 0.5 s.
FAST_WATCH = {"initial_backoff": 0.05, "max_backoff": 0.5, "min_healthy_stream": 0.2}


def present(**fields: Any) -> dict[str, Any]:
    """The fields that are set (truthy), for the optional parts of an object: an API object
    leaves out what is empty, as the server's own JSON does."""
    return {key: value for key, value in fields.items() if value}


def snapshot_settings(**overrides: Any) -> Settings:
    """Settings of a webhook over a snapshot: the shipped one (config/snapshot.yaml) unless
    ``overrides`` name another."""
    return Settings(**{"source": "snapshot", "snapshot": str(SNAPSHOT), **overrides})


class Clock:
    """Seconds that only move when a test moves ``now``; pass it where code takes ``clock=``."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def wire_body(name: str) -> dict[str, Any]:
    """A request body captured from kube-scheduler v1.36 (a copy of shared/wire)."""
    return json.loads((WIRE / name).read_text())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, timeout: float = 20.0, expect: int = 200, context: Any = None) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                if resp.status == expect:
                    return
        except Exception as exc:  # not up yet
            last = exc
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer {expect} within {timeout}s: {last}")


def wait_for(predicate: Callable[[], T], timeout: float = 5.0, message: str = "condition",
             interval: float = 0.02) -> T:
    """The first truthy value of `predicate()`; AssertionError naming `message` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {message}")
        time.sleep(interval)


def settled(read: Callable[[], T], expected: T, timeout: float = 5.0) -> T:
    """`read()` once it returns `expected`, or its last value after `timeout`.

    The webhook records a verb request's metrics from the reply's close(), after the reply
    is on the wire, so a client that has its answer may scrape a moment before the count
    moves. Tests assert on the returned value: a count that never arrives still fails.
    """
    deadline = time.monotonic() + timeout
    value = read()
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.02)
        value = read()
    return value


def start_server(args: list[str], port: int, env: dict[str, str] | None = None,
                 ready_path: str = "/readyz", scheme: str = "http", context: Any = None,
                 timeout: float = 20.0) -> subprocess.Popen[bytes]:
    """Start `extender serve` (or another subcommand) in a subprocess and wait until it is ready."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "extender", *args], env=full_env, cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        wait_http(f"{scheme}://127.0.0.1:{port}{ready_path}", timeout=timeout, context=context)
    except TimeoutError:
        process.kill()
        output = process.communicate(timeout=10)[0].decode(errors="replace")
        raise TimeoutError(f"server did not start; output:\n{output[-4000:]}") from None
    return process


def stop_server(process: subprocess.Popen[bytes], timeout: float = 20.0) -> str:
    process.terminate()
    try:
        output = process.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        process.kill()
        output = process.communicate()[0]
    return output.decode(errors="replace")
