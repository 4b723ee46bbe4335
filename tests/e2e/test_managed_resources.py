"""`managedResources` with `ignorable: true` (config/kube-scheduler-managed-resources.yaml)
while the webhook is down: kube-scheduler tries it for the pods that request a managed
resource, logs the failure, and places them anyway; its own resource check still holds."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e import configs
from tests.helpers import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

GPU = "example.com/gpu-share"  # the example's first managed resource
SCHEDULER = "e2e-managed"


def node_of(kube: Any, name: str) -> str:
    return ((kube.get_pod(name) or {}).get("spec") or {}).get("nodeName") or ""


def test_ignorable_extender_down_does_not_stop_kube_scheduler(cluster: Any, kube_scheduler: Any) -> None:
    kube = cluster.client
    down = free_port()  # nothing listens there: every call is refused
    config = configs.kube_scheduler_config(
        configs.MANAGED_RESOURCES_EXAMPLE, port=down, scheduler_name=SCHEDULER,
        kubeconfig=cluster.plane.user_kubeconfig("system:kube-scheduler"),
    )
    (extender,) = config["extenders"]
    assert extender["ignorable"] is True and GPU in {r["name"] for r in extender["managedResources"]}
    kube.create_node("gpu-1", extra_resources={GPU: "4"})
    kube.create_node("plain-1")
    scheduler = kube_scheduler(config, name="kube-scheduler-managed")

    kube.create_pod("shares", scheduler_name=SCHEDULER,
                    containers=[{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {GPU: "2"}, "limits": {GPU: "2"}}}])
    kube.create_pod("cpu-only", scheduler_name=SCHEDULER, cpu="100m")
    kube.create_pod("too-many", scheduler_name=SCHEDULER,
                    containers=[{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}}}])

    assert kube.wait_for(lambda: node_of(kube, "shares"), timeout=20, message="shares bound") == "gpu-1"
    kube.wait_for(lambda: node_of(kube, "cpu-only"), timeout=20, message="cpu-only bound")
    # The extender was in the path of the managed pod only, and failed: kube-scheduler's log
    # is the one place that says so ("Skipping extender as it returned error and has
    # ignorable flag set" pod="default/shares" ... connection refused).
    skipped = kube.wait_for(
        lambda: [line for line in scheduler.log().splitlines() if "Skipping extender" in line],
        timeout=10, message="kube-scheduler logging the unreachable extender")
    assert all(f"127.0.0.1:{down}/filter" in line and "connection refused" in line for line in skipped)
    assert {line.split('pod="', 1)[1].split('"', 1)[0] for line in skipped} == {"default/shares"}
    # ignoredByScheduler: false, so kube-scheduler still counts the shares itself.
    event = kube.wait_for(lambda: kube.list_events("default", reason="FailedScheduling", involved_name="too-many"),
                          timeout=20, message="FailedScheduling of too-many")[0]
    assert f"Insufficient {GPU}" in event["message"], event["message"]
    assert node_of(kube, "too-many") == ""
