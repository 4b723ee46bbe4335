"""/bind for a pod kube-scheduler saw before the extender's pod watch did (a real race: two streams).

Measured on a real control plane: kube-scheduler filtered and bound a pod 80 ms after it
was created, before the extender's watch had delivered it, and the refusal cost the pod a
retry 1.5 s later. The bind now reads the pod from the API server before refusing it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from extender.settings import Settings
from extender.webhook.runtime import Runtime, build_runtime
from tests.devicebuilders import create_ready_node

pytestmark = pytest.mark.apiserver


@pytest.fixture
def settings(apiserver: Any) -> Settings:
    return Settings(source="kube", kubeconfig=str(apiserver.kubeconfig))


@pytest.fixture
def runtime(settings: Settings, kube: Any) -> Iterator[Runtime]:
    """Started and synced, then its pod watch stopped (``client``, tests/conftest.py's, uses it)."""
    create_ready_node(kube, "node-1")
    rt = build_runtime(settings)
    rt.start()
    assert rt.source.wait_synced(10)
    assert rt.source.start_pod_watch()  # as the first /bind would
    rt.source.pods.stop()  # from here on the watch delivers nothing: the state lags the API server
    yield rt
    rt.stop()


def _bind(client: FlaskClient, name: str, uid: str, node: str = "node-1") -> str:
    reply = client.post("/bind", json={"PodName": name, "PodNamespace": "default", "PodUID": uid, "Node": node})
    assert reply.status_code == 200, reply.data
    return str(reply.get_json()["Error"])


def test_a_pod_the_watch_has_not_delivered_is_read_and_bound(client: FlaskClient, runtime: Runtime,
                                                             kube: Any) -> None:
    pod = kube.create_pod("early", cpu="100m")
    assert runtime.state.pod("default/early") is None
    assert _bind(client, "early", pod["metadata"]["uid"]) == ""
    assert kube.get_pod("early")["spec"]["nodeName"] == "node-1"


def test_a_pod_that_does_not_exist_is_still_refused(client: FlaskClient) -> None:
    assert "is not known to the extender" in _bind(client, "never-created", "00000000-0000-0000-0000-000000000001")


def test_a_recreated_pod_is_read_again_and_a_stale_uid_refused(client: FlaskClient, runtime: Runtime,
                                                               kube: Any) -> None:
    old = kube.create_pod("again", cpu="100m")
    assert runtime.source.refresh_pod("default", "again")
    kube.delete_pod("again", grace_period_seconds=0)
    new = kube.create_pod("again", cpu="100m")
    assert "UID mismatch" in _bind(client, "again", old["metadata"]["uid"])  # kube-scheduler's copy is stale
    assert _bind(client, "again", new["metadata"]["uid"]) == ""  # ours was: read again, bound
