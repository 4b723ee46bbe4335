"""`extender schedule`: the start-up permission check, option parsing, the health server."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from extender.checks.permissions import can_i_command, required_permissions
from extender.cli.schedule import _preflight, _shares_devices, default_lease_namespace, schedule
from extender.kube.client import build_api_client
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from extender.policy.loading import load_policy_file
from extender.scheduler.health import HealthServer, parse_bind
from extender.scheduler.profiles import Profile
from tests.helpers import ROOT

pytestmark = pytest.mark.apiserver

DENIED = [
    ("create", "pods", "binding", ""),
    ("patch", "pods", "status", ""),
    ("update", "leases", "", "coordination.k8s.io"),
    ("create", "events", "", "events.k8s.io"),
]


@pytest.fixture
def denied(refused: Any) -> Callable[[list[tuple[str, str, str, str]]], str]:
    """Deny permissions to the code under test; returns the kubeconfig it must use (on a
    real server, a user holding every other permission of the standalone scheduler)."""
    from tests.fakeapi.rbac import rules_for

    def deny(permissions: list[tuple[str, str, str, str]]) -> str:
        refuse = set(permissions)
        granted = [p for p in required_permissions("standalone", leader_elect=True)
                   if (p.verb, p.resource, p.subresource, p.group) not in refuse]
        return refused(permissions, rules_for(granted))

    return deny


def test_missing_permissions_stop_the_start_with_every_kubectl_line(apiserver: Any, kube: Any,
                                                                     denied: Any) -> None:
    kubeconfig = denied(DENIED)
    kube.ensure_namespace("sched")
    result = CliRunner().invoke(schedule, [
        "--kubeconfig", kubeconfig, "--lease-namespace", "sched",
        "--service-account", "sched:runner", "--metrics-bind", "",
    ])
    assert result.exit_code == 1, result.output
    output = result.output
    assert f"missing {len(DENIED)} permissions" in output
    wanted = {(v, r, s, g) for v, r, s, g in DENIED}
    for permission in required_permissions("standalone", leader_elect=True):
        line = can_i_command(permission, "runner", "sched", target_namespace="sched")
        key = (permission.verb, permission.resource, permission.subresource, permission.group)
        if key in wanted:
            assert permission.describe() in output
            assert line in output
        else:
            assert line not in output
    assert "kubectl auth can-i create pods --subresource=binding --all-namespaces " \
           "--as=system:serviceaccount:sched:runner" in output
    assert "kubectl auth can-i update leases.coordination.k8s.io -n sched " \
           "--as=system:serviceaccount:sched:runner" in output
    # Nothing was started: no watch, no lease.
    if apiserver.fake is not None:
        assert apiserver.fake.requests_matching("GET", r"/leases/") == []
        assert not any(r.query.get("watch") for r in apiserver.fake.requests)
    assert kube.get_lease("extender-scheduler", "sched") is None


def test_no_leader_election_needs_no_lease_permissions(apiserver: Any, denied: Any) -> None:
    kubeconfig = denied([("get", "leases", "", "coordination.k8s.io")])
    client = build_api_client(kubeconfig=kubeconfig)
    try:
        _preflight(client, False, "default", ("ns", "sa"))  # does not exit
        with pytest.raises(SystemExit) as exited:
            _preflight(client, True, "default", ("ns", "sa"))
        assert exited.value.code == 1
    finally:
        client.close()


def test_bad_profile_option_is_a_usage_error() -> None:
    result = CliRunner().invoke(schedule, ["--profile", "no-equals-sign", "--skip-preflight"])
    assert result.exit_code == 2
    assert "NAME=POLICYFILE" in result.output


def test_lease_namespace_defaults(tmp_path: Any) -> None:
    assert default_lease_namespace(str(tmp_path / "missing")) == "kube-system"
    (tmp_path / "namespace").write_text("scheduler-extender\n")
    assert default_lease_namespace(str(tmp_path / "namespace")) == "scheduler-extender"


def test_parse_bind() -> None:
    assert parse_bind("0.0.0.0:10251") == ("0.0.0.0", 10251)
    assert parse_bind(":9000") == ("0.0.0.0", 9000)
    assert parse_bind("[::1]:9000") == ("::1", 9000)
    with pytest.raises(ValueError):
        parse_bind("10251")


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_health_server_serves_probes_and_metrics() -> None:
    ready = {"value": False}
    server = HealthServer("127.0.0.1:0", healthz=lambda: (True, ""),
                          readyz=lambda: (ready["value"], "follower" if ready["value"] else "cluster state not synced"))
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        assert _get(f"{base}/healthz") == (200, "ok\n")
        assert _get(f"{base}/readyz") == (503, "not ok: cluster state not synced\n")
        ready["value"] = True
        assert _get(f"{base}/readyz") == (200, "ok: follower\n")
        status, text = _get(f"{base}/metrics")
        assert status == 200 and "extender_queue_depth" in text
        assert _get(f"{base}/nope")[0] == 404
    finally:
        server.stop()


def test_schedule_command_runs_and_stops_gracefully_on_sigterm(apiserver: Any, kube: Any) -> None:
    """The real command in a subprocess: preflight, readiness, a bind, SIGTERM, lease released."""
    import signal
    import subprocess
    import sys

    from tests.helpers import ROOT, free_port, wait_http

    kube.create_node("n1")
    port = free_port()
    command = [
        sys.executable, "-m", "extender", "schedule",
        "--kubeconfig", str(apiserver.kubeconfig), "--lease-namespace", "default",
        "--metrics-bind", f"127.0.0.1:{port}", "--log-format", "json",
        "--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.3",
    ]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/readyz", timeout=20)
        kube.create_pod("via-cli", scheduler_name="extender-scheduler")
        kube.wait_for(lambda: ((kube.get_pod("via-cli") or {}).get("spec") or {}).get("nodeName"),
                      timeout=10, message="pod bound by the command")
        status, text = _get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and "extender_leader 1.0" in text
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=20)[0].decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, output
    assert '"msg": "pod scheduled"' in output and '"pod": "default/via-cli"' in output
    assert "released lease default/extender-scheduler" in output
    assert kube.get_lease("extender-scheduler", "default")["spec"]["holderIdentity"] == ""


def test_a_policy_sharing_gpus_needs_the_device_ledger_leases(denied: Any) -> None:
    client = build_api_client(kubeconfig=denied([("update", "leases", "", "coordination.k8s.io")]))
    try:
        _preflight(client, False, "default", ("ns", "sa"), devices=False)  # does not exit
        with pytest.raises(SystemExit) as exited:
            _preflight(client, False, "default", ("ns", "sa"), devices=True)
        assert exited.value.code == 1
    finally:
        client.close()


def test_the_preflight_asks_for_ledger_leases_only_when_a_policy_shares_gpus() -> None:
    plain = Profile.from_engine("a", Engine(default_policy("standalone")))
    gpus = Profile.from_engine("b", Engine(load_policy_file(ROOT / "config" / "policy-devices.yaml")))
    assert not _shares_devices([plain])
    assert _shares_devices([plain, gpus])


def test_a_stop_signal_during_start_up_is_not_lost() -> None:
    """In a pod `extender schedule` is PID 1, which a signal without a handler does not kill:
    a SIGTERM before the scheduler started was dropped, and a pod deleted while starting ran
    on (took the lease, bound pods) until the kubelet's SIGKILL, seen on a real node
    (tests/e2e/test_chart_failures_on_node.py). The handlers are installed first thing."""
    import os
    import signal

    from extender.cli import schedule as schedule_cli

    stop, previous = schedule_cli._catch_stop_signals()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(2), "SIGTERM sets the stop event instead of being lost"
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    source = Path(schedule_cli.__file__).read_text()
    body = source[source.index("def schedule("):]
    assert body.index("_catch_stop_signals()") < body.index("build_api_client(")
    assert "if stop.is_set():" in body[: body.index("scheduler.start()")]
