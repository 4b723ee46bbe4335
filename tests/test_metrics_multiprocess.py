"""Metrics under gunicorn with two workers add up (prometheus_client multiprocess mode), and JSON access logs.

Each worker is its own process with its own counters; /metrics is answered by
whichever worker accepts the scrape. Only the multiprocess collector, reading every
worker's files in PROMETHEUS_MULTIPROC_DIR, makes every scrape report the full count.
The test proves both halves: the per-worker files show that two pids really served
filter requests, and every scrape reports exactly the total.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import ROOT, SNAPSHOT, free_port, settled, stop_server, wait_http, wire_body

BODIES = [json.dumps(wire_body(name)).encode()
          for name in ("filter-request.json", "filter-request-nodecache-false.json")]
FILTER_OK = {"verb": "filter", "result": "ok"}


def _start(args: list[str], port: int, multiproc_dir: Path | None = None) -> subprocess.Popen[bytes]:
    """`extender serve` in a subprocess; unlike helpers.start_server, with a known metrics directory."""
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    if multiproc_dir is not None:
        env["PROMETHEUS_MULTIPROC_DIR"] = str(multiproc_dir)
    process = subprocess.Popen(
        [sys.executable, "-m", "extender", "serve", "--bind", f"127.0.0.1:{port}", "--source", "snapshot",
         "--snapshot", str(SNAPSHOT), *args],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/readyz")
    except TimeoutError:
        output = stop_server(process)
        raise TimeoutError(f"server did not start:\n{output[-4000:]}") from None
    return process


def _filter(base: str, body: bytes) -> int:
    request = urllib.request.Request(f"{base}/filter", data=body, method="POST",
                                     headers={"Content-Type": "application/json", "Connection": "close"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        reply.read()
        return reply.status


def _scrape(base: str) -> float:
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "extender_requests_total" and sample.labels == FILTER_OK:
                return sample.value
    return 0.0


def _per_worker(directory: Path, scratch: Path) -> dict[int, float]:
    """Filter requests counted by each worker, read from that worker's own counter file."""
    counts = {}
    for path in directory.glob("counter_*.db"):
        pid = int(path.stem.split("_")[1])
        single = scratch / str(pid)
        single.mkdir(exist_ok=True)
        shutil.copy(path, single / path.name)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(single))
        value = registry.get_sample_value("extender_requests_total", FILTER_OK)
        if value:
            counts[pid] = value
    return counts


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port = free_port()
    directory = tmp_path / "metrics"
    directory.mkdir()
    process = _start(["--workers", "2", "--threads", "2"], port, directory)
    yield f"http://127.0.0.1:{port}", directory
    output = stop_server(process)
    assert "Traceback" not in output, output


def test_counts_add_up_across_two_workers(two_workers: tuple[str, Path], tmp_path: Path) -> None:
    base, directory = two_workers
    sent = 0
    per_worker: dict[int, float] = {}
    with ThreadPoolExecutor(max_workers=8) as pool:
        # Both workers accept on the same socket; which one takes a connection is the kernel's
        # choice, so send batches until each of the two has served some (nearly always the first).
        for _ in range(25):
            statuses = list(pool.map(lambda i: _filter(base, BODIES[i % 2]), range(40)))
            assert statuses == [200] * 40
            sent += len(statuses)
            per_worker = _per_worker(directory, tmp_path)
            if len(per_worker) == 2:
                break
    assert len(per_worker) == 2, f"one worker served everything: {per_worker}"
    # The counts are written once each reply is out, so the last few may land just after it.
    total = settled(lambda: sum(_per_worker(directory, tmp_path).values()), float(sent))
    assert total == sent
    per_worker = _per_worker(directory, tmp_path)
    assert all(0 < count < sent for count in per_worker.values())
    # Every scrape, whichever worker answers it, reports the total, not that worker's share.
    for _ in range(10):
        assert _scrape(base) == sent


def test_json_access_log_lines(tmp_path: Path) -> None:
    port = free_port()
    process = _start(["--workers", "1", "--log-format", "json", "--access-log"], port, tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        assert _filter(base, BODIES[0]) == 200
        bad = urllib.request.Request(f"{base}/filter", data=b"{", method="POST",
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(bad, timeout=10)
    finally:
        output = stop_server(process)
    entries = []
    for line in output.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("logger") == "extender.access":
            entries.append(entry)
    assert len(entries) == 2, output
    # Each line is written when its reply closes, after the client has it: the second request
    # may be logged first on a busy machine, so the lines are told apart by result, not order.
    ok, bad_entry = sorted(entries, key=lambda entry: entry["result"] != "ok")
    assert (ok["verb"], ok["pod"], ok["result"], ok["nodes"]) == ("filter", "default/pod-cache-true", "ok", 3)
    assert isinstance(ok["duration_ms"], int | float) and ok["duration_ms"] >= 0
    assert ok["level"] == "info" and ok["ts"].endswith("Z")
    assert (bad_entry["verb"], bad_entry["result"], bad_entry["pod"]) == ("filter", "bad-request", "")
    assert "malformed JSON" in bad_entry["note"]


def test_a_forked_child_counts_in_its_own_file(tmp_path: Path) -> None:
    """The remembered pid is refreshed after fork, so a child never writes the parent's file."""
    script = (
        "import os\n"
        "from extender import metrics\n"
        "metrics.REQUESTS.labels(verb='filter', result='ok').inc()\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    metrics.REQUESTS.labels(verb='filter', result='ok').inc(5)\n"
        "    os._exit(0)\n"
        "os.waitpid(child, 0)\n"
        "print(os.getpid(), child)\n"
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    parent, child = map(int, result.stdout.split())
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert _per_worker(tmp_path, scratch) == {parent: 1.0, child: 5.0}
