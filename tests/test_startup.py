"""Start-up mistakes in every mode: one clear line, a non-zero exit, no traceback (extender/startup.py).

Each case runs the real command in a subprocess, as a user would, with no cluster configured
(HOME and KUBECONFIG point at nothing) unless the case gives one. `serve` is the one that
used to fail in every gunicorn worker; a command that wrongly started serving is stopped by
the timeout, and the test fails on it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, free_port

BAD_POLICY = "apiVersion: extender/v1alpha1\nkind: Policy\nfilters:\n  - name: Nope\n"
# A kubeconfig whose server refuses connections (port 1 on loopback: nothing listens there).
UNREACHABLE = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
# Log lines at INFO (text or JSON) are context, not the error.
_INFO = re.compile(r'^\S+ \S+ INFO |^\{"ts": "[^"]+", "level": "info"')


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No cluster: an empty HOME, KUBECONFIG naming no file, no in-cluster variables."""
    home = tmp_path / "home"
    home.mkdir()
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("KUBERNETES_", "EXTENDER_", "PROMETHEUS_MULTIPROC"))}
    environ.update(HOME=str(home), KUBECONFIG=str(tmp_path / "no-such-kubeconfig"), PYTHONUNBUFFERED="1")
    return environ


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {"policy": tmp_path / "bad-policy.yaml", "unreachable": tmp_path / "unreachable.kubeconfig",
             "garbage": tmp_path / "garbage.txt", "cert": tmp_path / "tls.crt"}
    paths["policy"].write_text(BAD_POLICY)
    paths["unreachable"].write_text(UNREACHABLE)
    paths["garbage"].write_text("not a kubeconfig, a snapshot or a certificate\n")
    paths["cert"].write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    return {name: str(path) for name, path in paths.items()}


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "extender", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)


def _problem_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    return [line for line in lines if not _INFO.match(line)]


CASES = {
    # mode, arguments (with {file} placeholders), what the one line must say
    "serve, kube source, no kubeconfig": (["serve", "--source", "kube"], ["no kubeconfig found", "--kubeconfig"]),
    "serve, bad policy": (["serve", "--policy", "{policy}"], ["{policy}", "filters[0].name", "unknown filter"]),
    "serve, unreachable API server": (["serve", "--source", "kube", "--kubeconfig", "{unreachable}"],
                                      ["cannot reach the API server https://127.0.0.1:1", "kubectl get --raw"]),
    "serve, kubeconfig not a kubeconfig": (["serve", "--source", "kube", "--kubeconfig", "{garbage}"],
                                           ["cannot read the kubeconfig {garbage}", "kubectl --kubeconfig"]),
    "serve, bad snapshot": (["serve", "--snapshot", "{garbage}"], ["{garbage}", "expected a Kubernetes object"]),
    "serve, unreadable TLS files": (["serve", "--tls-cert", "{cert}", "--tls-key", "{cert}"],
                                    ["cannot load TLS files", "{cert}", "PEM"]),
    "schedule, no kubeconfig": (["schedule"], ["no kubeconfig found"]),
    "schedule, bad policy": (["schedule", "--policy", "{policy}"], ["{policy}", "unknown filter"]),
    "schedule, unreachable API server": (["schedule", "--kubeconfig", "{unreachable}"],
                                         ["cannot reach the API server https://127.0.0.1:1"]),
    "schedule, kubeconfig not a kubeconfig": (["schedule", "--kubeconfig", "{garbage}"],
                                              ["cannot read the kubeconfig {garbage}"]),
    "simulate, bad policy": (["simulate", "config/snapshot.yaml", "--policy", "{policy}"], ["unknown filter"]),
    "simulate, bad snapshot": (["simulate", "{garbage}"], ["{garbage}", "expected a Kubernetes object"]),
    "explain, bad policy": (["explain", "default/huge", "--policy", "{policy}"], ["unknown filter"]),
    "explain, unreachable API server": (["explain", "default/huge", "--kubeconfig", "{unreachable}"],
                                        ["cannot reach the API server https://127.0.0.1:1"]),
    "explain, kubeconfig not a kubeconfig": (["explain", "default/huge", "--kubeconfig", "{garbage}"],
                                             ["cannot read the kubeconfig {garbage}"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_startup_mistake_is_one_line_and_a_failed_exit(case: str, env: dict[str, str],
                                                         files: dict[str, str]) -> None:
    args, expected = CASES[case]
    args = [a.format(**files) for a in args]
    if args[0] == "serve":
        args += ["--bind", f"127.0.0.1:{free_port()}"]
    result = _run(args, env)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output and "Worker failed to boot" not in output, output
    problems = _problem_lines(result)
    assert len(problems) == 1, output
    for words in expected:
        assert words.format(**files) in problems[0], problems[0]


@pytest.mark.parametrize("mode", [["serve", "--source", "kube"], ["schedule"]])
def test_the_line_is_json_when_logs_are(mode: list[str], env: dict[str, str]) -> None:
    args = [*mode, "--log-format", "json"]
    if mode[0] == "serve":
        args += ["--bind", f"127.0.0.1:{free_port()}"]
    result = _run(args, env)
    assert result.returncode == 1
    lines = _problem_lines(result)
    assert len(lines) == 1, result.stderr
    entry = json.loads(lines[0])
    assert entry["level"] == "error" and "no kubeconfig found" in entry["msg"]


def test_check_reports_an_unreachable_server_with_what_to_do(env: dict[str, str], files: dict[str, str]) -> None:
    result = _run(["check", "--kubeconfig", files["unreachable"]], env)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "cannot reach the API server https://127.0.0.1:1" in result.stdout
    assert "kubectl get --raw /version" in result.stdout


# ---- serving: the auto fallback, and every line JSON ------------------------------------------


class Served:
    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "extender", "serve", "--bind", f"127.0.0.1:{self.port}", *args],
            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait_ready(self) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.process.stdout.read() if self.process.stdout else ""
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as reply:
                    return dict(json.loads(reply.read()))
            except OSError:
                time.sleep(0.2)
        raise AssertionError("the webhook never answered /readyz")

    def stop(self) -> list[str]:
        self.process.send_signal(signal.SIGTERM)
        output, _ = self.process.communicate(timeout=60)
        return [line for line in output.splitlines() if line.strip()]


@pytest.fixture
def serve(env: dict[str, str]) -> Iterator[Any]:
    started: list[Served] = []

    def start(*args: str) -> Served:
        started.append(Served(list(args), env))
        return started[-1]

    yield start
    for served in started:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait()


def test_auto_source_says_why_it_serves_the_demo_snapshot(serve: Any, env: dict[str, str]) -> None:
    served = serve("--source", "auto")
    assert served.wait_ready()["source"] == "snapshot"
    lines = served.stop()
    warnings = [line for line in lines if " WARNING " in line]
    assert len(warnings) == 1, lines
    assert "--source auto" in warnings[0] and env["KUBECONFIG"] in warnings[0], warnings
    assert "snapshot.yaml" in warnings[0] and "--source kube" in warnings[0]


def test_an_explicit_snapshot_is_no_warning(serve: Any) -> None:
    served = serve("--source", "snapshot")
    served.wait_ready()
    assert not [line for line in served.stop() if "WARNING" in line]


def test_json_logs_include_gunicorns_own_lines(serve: Any) -> None:
    served = serve("--log-format", "json")
    served.wait_ready()
    lines = served.stop()
    entries = [json.loads(line) for line in lines]  # every line, or this fails
    loggers = {entry["logger"] for entry in entries}
    assert "gunicorn.error" in loggers and "extender.webhook.runtime" in loggers, loggers
    messages = " ".join(entry["msg"] for entry in entries)
    assert "Booting worker" in messages and "Shutting down" in messages


PLAIN_GUNICORN_CASES = {
    # EXTENDER_* variables (with {file} placeholders), what the one line must say
    "bad policy": ({"EXTENDER_POLICY": "{policy}", "EXTENDER_SOURCE": "snapshot"}, ["{policy}", "unknown filter"]),
    "bad snapshot": ({"EXTENDER_SNAPSHOT": "{garbage}", "EXTENDER_SOURCE": "snapshot"},
                     ["{garbage}", "expected a Kubernetes object"]),
    "kube source, no kubeconfig": ({"EXTENDER_SOURCE": "kube"}, ["no kubeconfig found"]),
    "bad setting": ({"EXTENDER_ENABLE_BIND": "maybe"}, ["EXTENDER_ENABLE_BIND='maybe'", "true or false"]),
}


@pytest.mark.parametrize("case", list(PLAIN_GUNICORN_CASES))
def test_plain_gunicorn_stops_with_one_line_before_any_worker(case: str, env: dict[str, str],
                                                              files: dict[str, str]) -> None:
    """The documented `gunicorn -c config/gunicorn.conf.py` line, without `extender serve`."""
    variables, expected = PLAIN_GUNICORN_CASES[case]
    env.update({k: v.format(**files) for k, v in variables.items()}, EXTENDER_BIND=f"127.0.0.1:{free_port()}")
    result = subprocess.run([sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.conf.py",
                             "extender.webhook:create_app()"], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=60, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output and "Booting worker" not in output, output
    problems = _problem_lines(result)
    assert len(problems) == 1 and problems[0].startswith("Error: "), output
    for words in expected:
        assert words.format(**files) in problems[0], problems[0]


def test_a_metrics_directory_that_does_not_exist_yet_is_made(serve: Any, env: dict[str, str],
                                                             tmp_path: Path) -> None:
    """The chart and deploy/ set PROMETHEUS_MULTIPROC_DIR=/tmp/metrics on an empty emptyDir at
    /tmp: the directory is not there when the container starts (seen on a real node, where
    every webhook pod crash-looped on FileNotFoundError before this)."""
    directory = tmp_path / "empty-dir" / "metrics"
    env["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    served = serve("--source", "snapshot")
    served.wait_ready()
    with urllib.request.urlopen(f"http://127.0.0.1:{served.port}/metrics", timeout=5) as reply:
        assert b"extender_requests_total" in reply.read() or reply.status == 200
    assert directory.is_dir()
    served.stop()
