"""The webhook watches pods only while its policy reads them, or from its first /bind on (extender/kube/source.py).

kube-scheduler sends each call its pod; with a node-only policy and no bind verb, every
bind on kube-scheduler's path would otherwise be a watch event to apply for nothing. A
webhook that may bind but is registered without bindVerb never gets a /bind: it must not
pay for the pod watch either.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from extender.settings import Settings
from extender.webhook import create_app
from extender.webhook.runtime import Runtime, build_runtime
from tests.devicebuilders import create_ready_node

pytestmark = pytest.mark.apiserver

HEADER = "apiVersion: extender/v1alpha1\nkind: Policy\n"
NODE_ONLY = HEADER + "filters: [{name: NodeReady}, {name: NodeLabels}]\n"
WITH_FIT = HEADER + "filters: [{name: NodeReady}, {name: ResourceFit}]\n"


@pytest.fixture
def started(apiserver: Any, kube: Any) -> Iterator[Any]:
    runtimes: list[Runtime] = []

    def start(**settings: Any) -> Runtime:
        runtime = build_runtime(Settings(source="kube", kubeconfig=str(apiserver.kubeconfig), **settings))
        runtimes.append(runtime)
        runtime.start()
        assert runtime.source.wait_synced(10)
        return runtime

    create_ready_node(kube, "node-1")
    kube.create_pod("placed", cpu="100m", node_name="node-1")
    yield start
    for runtime in runtimes:
        runtime.stop()


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    stamp = time.time_ns() + 1_000_000_000  # a new stat signature even on coarse clocks
    os.utime(path, ns=(stamp, stamp))


def test_a_webhook_that_does_not_bind_with_the_default_policy_holds_no_pods(started: Any) -> None:
    runtime = started(enable_bind=False)
    assert not runtime.source.pods_watched
    assert runtime.state.ready and runtime.state.pod_count() == 0
    ready = create_app(Settings(enable_bind=False), runtime=runtime, start=False).test_client().get("/readyz")
    assert ready.status_code == 200
    assert ready.get_json()["podsWatched"] is False and ready.get_json()["pods"] == 0


def _bind(runtime: Runtime, pod: dict[str, Any], node: str = "node-1") -> dict[str, Any]:
    body = {"PodName": pod["metadata"]["name"], "PodNamespace": "default", "PodUID": pod["metadata"]["uid"],
            "Node": node}
    reply = create_app(Settings(), runtime=runtime, start=False).test_client().post("/bind", json=body)
    assert reply.status_code == 200
    return reply.get_json()


def test_a_webhook_that_may_bind_watches_no_pods_until_the_first_bind(started: Any, kube: Any) -> None:
    runtime = started()  # bind is on by default, but kube-scheduler may be registered without bindVerb
    assert not runtime.source.pods_watched and runtime.state.pod_count() == 0
    pending = kube.create_pod("pending", cpu="100m")
    assert _bind(runtime, pending) == {"Error": ""}  # its checks read the node's pods: listed first
    assert runtime.source.pods_watched
    assert runtime.state.pod("default/placed") is not None
    assert kube.wait_for(lambda: (kube.get_pod("pending") or {}).get("spec", {}).get("nodeName"),
                         message="pending bound") == "node-1"


def test_the_first_bind_counts_the_pods_already_on_the_node(started: Any, kube: Any) -> None:
    runtime = started()
    kube.create_pod("big", cpu="31900m", node_name="node-1")  # node-1 has 32 CPUs; "placed" holds 100m
    pending = kube.create_pod("pending", cpu="500m")
    reply = _bind(runtime, pending)
    assert "Insufficient cpu" in reply["Error"], reply
    assert (kube.get_pod("pending") or {}).get("spec", {}).get("nodeName") is None


def test_a_policy_that_reads_pods_has_them(started: Any, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(WITH_FIT)
    runtime = started(enable_bind=False, policy=str(path))
    assert runtime.source.pods_watched and runtime.state.pod_count() == 1


def test_a_reload_to_a_policy_that_reads_pods_lists_them_before_it_serves(started: Any, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(NODE_ONLY)
    runtime = started(enable_bind=False, policy=str(path))
    assert not runtime.source.pods_watched
    runtime.policy.stop_watching()  # this test reloads, not the 2-second poll
    _write(path, WITH_FIT)
    assert runtime.policy.maybe_reload() == "success"
    # The new engine serves only now, and the pods were in the state before it did.
    assert runtime.engine.policy.filter_names == ["NodeReady", "ResourceFit"]
    assert runtime.source.pods_watched and runtime.state.pod_count() == 1
    info = runtime.state.node_info("node-1")
    assert info is not None and info.requested.get("cpu") == 100
