"""Mutual TLS as deployed: with ``webhook.tls.enabled`` and ``clientAuth`` the webhook's pods
become Ready (their probe presents the serving certificate), a caller without a client
certificate is turned away, and the chart's second kube-scheduler, which presents the
generated client certificate, still binds pods through the webhook's Service; ``helm test``
passes with the callers' Secret.
"""

from __future__ import annotations

import base64
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import chartnode as chart
from tests.e2e.chartnode import KUBE_SCHEDULER, NAMESPACE, WEBHOOK

pytestmark = [pytest.mark.e2e, pytest.mark.node]


# The chart's values for this module (the chart_release fixture, tests/e2e/conftest.py).
CHART_VALUES = ("--set", "webhook.tls.enabled=true", "--set", "webhook.tls.clientAuth=true", "--set", "standalone.enabled=false",
                "--set", "webhook.replicas=1", "--set", "kubeScheduler.replicas=1")


@pytest.fixture
def cluster(chart_release: Any, node: Any) -> Any:
    return chart_release


def client_files(cluster: Any, directory: Path) -> dict[str, Path]:
    """The callers' Secret (what kube-scheduler mounts), written to files."""
    secret = cluster.client.call("GET", f"/api/v1/namespaces/{NAMESPACE}/secrets/extender-kube-scheduler-client")
    directory.mkdir(parents=True, exist_ok=True)
    files = {}
    for key, value in secret["data"].items():
        files[key] = directory / key
        files[key].write_bytes(base64.b64decode(value))
    return files


def get(url: str, files: dict[str, Path], with_cert: bool) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(files["ca.crt"]))
    context.check_hostname = False  # an address, not the Service's name: the CA is still verified
    if with_cert:
        context.load_cert_chain(str(files["tls.crt"]), str(files["tls.key"]))
    try:
        with urllib.request.urlopen(url, context=context, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except (OSError, ssl.SSLError) as exc:
        return 0, str(exc)


def test_a_caller_needs_the_client_certificate(cluster: Any, tmp_path: Path) -> None:
    files = client_files(cluster, tmp_path / "client")
    url = f"https://{chart.service_ip(cluster)}:8888/readyz"
    status, text = get(url, files, with_cert=True)
    assert status == 200, text
    status, text = get(url, files, with_cert=False)
    assert status == 0 and ("certificate" in text.lower() or "handshake" in text.lower() or "reset" in text.lower()), (
        status, text)


def test_second_kube_scheduler_binds_over_mutual_tls(cluster: Any, tmp_path: Path) -> None:
    files = client_files(cluster, tmp_path / "client")
    (webhook_pod,) = chart.component_pods(cluster, WEBHOOK)
    metrics_url = f"https://{webhook_pod['status']['podIP']}:8888/metrics"
    status, before = get(metrics_url, files, with_cert=True)
    assert status == 200
    chart.app_pod(cluster, "via-mtls", KUBE_SCHEDULER)
    assert chart.wait_started(cluster, "via-mtls")["spec"]["nodeName"] == cluster.node.name
    status, after = get(metrics_url, files, with_cert=True)
    assert chart.metric(after, "extender_bind_total", result="bound") == \
        chart.metric(before, "extender_bind_total", result="bound") + 1


def test_helm_test_with_mutual_tls(cluster: Any, tmp_path: Path) -> None:
    files = client_files(cluster, tmp_path / "client")
    (webhook_pod,) = chart.component_pods(cluster, WEBHOOK)
    metrics_url = f"https://{webhook_pod['status']['podIP']}:8888/metrics"
    before = chart.metric(get(metrics_url, files, with_cert=True)[1], "extender_requests_total", verb="filter")
    result = cluster.helm("test", chart.RELEASE, "-n", NAMESPACE, "--timeout", "120s", check=False)
    assert result.returncode == 0, result.stderr + result.stdout[-3000:]
    # The test pod's POST /filter (with the callers' client certificate) reached the webhook.
    after = chart.metric(get(metrics_url, files, with_cert=True)[1], "extender_requests_total", verb="filter")
    assert after >= before + 1
