"""Process faults: a gunicorn worker SIGKILLed under load; SIGTERM on the webhook and on `extender schedule`."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import orjson
import pytest
import requests

from tests.helpers import wire_body
from tests.reliability.figures import FIGURES
from tests.reliability.load import run_load
from tests.reliability.servers import alive, established_connections, launch, wait_until

KILL_LOAD_SECONDS = 8.0
KILL_AFTER = 2.0  # seconds into the load
KILL_CLIENTS = 4


@pytest.mark.slow
def test_worker_sigkill_under_load() -> None:
    server = launch(["--log-level", "WARNING"], workers=2)
    try:
        workers = server.workers()
        assert len(workers) == 2, workers
        marks: dict[str, float] = {}
        victims: list[tuple[int, int]] = []

        def kill_then_watch(stop_at: float) -> None:
            time.sleep(KILL_AFTER)
            # The worker holding the most client connections, so that the kill does hit clients.
            held = sorted(((established_connections(pid, server.port), pid) for pid in workers), reverse=True)
            connections, victim = held[0]
            os.kill(victim, signal.SIGKILL)
            victims.append((victim, connections))
            marks["killed"] = time.monotonic()
            # The master reaps the worker and forks a replacement; the replacement boots the app.
            replaced = wait_until(lambda: len(server.workers()) == 2 and victim not in server.workers(),
                                  timeout=max(1.0, stop_at - time.monotonic()))
            if replaced:
                marks["replaced"] = time.monotonic()

        result = run_load(server.url, clients=KILL_CLIENTS, seconds=KILL_LOAD_SECONDS, retry_once=True,
                          on_tick=lambda stop_at: threading.Thread(
                              target=kill_then_watch, args=(stop_at,), daemon=True).start())
        assert "killed" in marks
        victim, connections = victims[0]
        assert not alive(victim)
        assert "replaced" in marks, f"the master did not replace worker {victim}: {server.workers()}"
        after = [ok for t, ok in result.timeline if t > marks["replaced"] + 1.0]
        restart = marks["replaced"] - marks["killed"]

        # After the restart, every worker answers: fresh connections, all verbs.
        session_failures = 0
        for _ in range(20):
            with requests.Session() as fresh:
                reply = fresh.post(f"{server.url}/filter", data=orjson.dumps(wire_body("filter-request.json")),
                                   headers={"Content-Type": "application/json"}, timeout=10)
                session_failures += reply.status_code != 200
        survived = not result.errors and session_failures == 0
        FIGURES.fault("gunicorn worker SIGKILL under load", 1, survived,
                      f"{result.requests} requests, killed worker held {connections} client connections, "
                      f"{result.retried} requests retried once on a new connection, "
                      f"{len(result.errors)} failed; replacement worker up in {restart:.2f} s")
        print(f"\nkill: {result.requests} requests, {result.retried} retried, {len(result.errors)} errors, "
              f"{len(after)} after the restart, replaced in {restart:.2f} s")
        assert not result.errors, result.errors[:5]
        assert connections >= 1, "the killed worker served no client: the kill tested nothing"
        assert after and all(after)
        assert session_failures == 0
    finally:
        code = server.stop()
    output = server.output()
    assert code == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]


def _http_head(body: bytes, path: str = "/filter") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()


def _read_reply(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


@pytest.mark.slow
def test_webhook_sigterm_is_graceful() -> None:
    """SIGTERM while a request is in flight: the request completes, exit code 0, no traceback."""
    server = launch([], workers=2)
    body = orjson.dumps(wire_body("filter-request-nodecache-false.json"))
    half = len(body) // 2
    try:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=15)
        # Headers and half the body: a worker thread is now inside the request, reading the body.
        sock.sendall(_http_head(body) + body[:half])
        time.sleep(0.5)
        server.process.send_signal(signal.SIGTERM)
        time.sleep(1.0)  # the master has told the workers to stop; ours must still finish its request
        sock.sendall(body[half:])
        reply = _read_reply(sock)
        sock.close()
        assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
        payload = orjson.loads(reply.split(b"\r\n\r\n", 1)[1])
        assert payload["Error"] == "" and [n["metadata"]["name"] for n in payload["Nodes"]["items"]]
        # New connections are refused once the listener is closed; the process exits by itself.
        server.process.wait(30)
    finally:
        code = server.stop()
    output = server.output()
    survived = code == 0 and "Traceback" not in output
    FIGURES.fault("webhook SIGTERM with a request in flight", 1, survived,
                  f"exit code {code}, in-flight request answered 200")
    assert code == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]


@pytest.mark.slow
@pytest.mark.apiserver
def test_scheduler_sigterm_finishes_the_bind_in_flight(fake_apiserver, tmp_path) -> None:
    """`extender schedule` under SIGTERM with a bind in flight: the bind completes once, exit code 0."""
    import subprocess
    import sys

    from tests.helpers import ROOT, free_port, wait_http

    fake, kube = fake_apiserver.fake, fake_apiserver.client
    for name in ("node-a", "node-b"):
        kube.create_node(name, cpu="4")
    port = free_port()
    log_path = tmp_path / "schedule.log"
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "extender", "schedule", "--kubeconfig", str(fake_apiserver.kubeconfig),
             "--no-leader-elect", "--skip-preflight", "--metrics-bind", f"127.0.0.1:{port}"],
            cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT,
        )
    try:
        wait_http(f"http://127.0.0.1:{port}/readyz", timeout=30)
        kube.create_pod("first", cpu="100m", scheduler_name="extender-scheduler")
        kube.wait_for(lambda: (kube.get_pod("first") or {}).get("spec", {}).get("nodeName"), timeout=15,
                      message="first pod bound")
        fake.delay(3.0, path_regex=r"/pods/slow/binding$", method="POST", count=1)
        kube.create_pod("slow", cpu="100m", scheduler_name="extender-scheduler")
        kube.wait_for(lambda: fake.requests_matching("POST", r"/pods/slow/binding$"), timeout=15,
                      message="the slow bind reached the server")
        process.send_signal(signal.SIGTERM)  # while the server sits on the bind for 3 s
        code = process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    output = log_path.read_text(errors="replace")
    bound = (kube.get_pod("slow") or {}).get("spec", {}).get("nodeName")
    survived = code == 0 and "Traceback" not in output and bool(bound) and fake.binding_count("default", "slow") == 1
    FIGURES.fault("scheduler SIGTERM with a bind in flight", 1, survived,
                  f"exit code {code}, in-flight bind {'completed' if bound else 'lost'}")
    assert code == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert bound, "the bind in flight was abandoned"
    assert fake.binding_count("default", "slow") == 1
