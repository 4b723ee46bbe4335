"""Binding conditions (DRADeviceBindingConditions), end to end on the API server (fake, or real under envtest).

What kube-scheduler v1.36.3 does: a device with `bindingConditions` is allocated like any
other (its pool last); PreBind writes the claim, posts `BindingConditionsPending`, and binds
the pod only once the driver has set every condition true in the claim's
`status.devices`. A failure condition fails the bind; the next attempt finds the claim
unavailable on every node, PostFilter deallocates it, and it is allocated again. So does the
bindingTimeout, counted from the allocation's timestamp.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from extender.policy.builtin.dynamic_resources import DynamicResources
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine, Policy
from extender.scheduler.profiles import Profile
from extender.scheduler.queueing import SchedulingQueue
from tests.scheduler.conftest import SCHEDULER_NAME
from tests.scheduler.test_dra import (
    API,
    DRIVER,
    create,
    create_claim,
    create_class,
    create_pod,
    get_claim,
    node_of,
    wait_bound,
    wait_failure,
)

pytestmark = pytest.mark.apiserver


def attachable_slice(kube: Any, node: str, *devices: str) -> None:
    create(kube, "resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-fabric"},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": d, "bindsToNode": True, "bindingConditions": ["Attached"],
                              "bindingFailureConditions": ["AttachFailed"]} for d in devices]}})


def profile(binding_timeout: float) -> Profile:
    base = default_policy("standalone")
    filters = tuple(DynamicResources(binding_timeout) if isinstance(p, DynamicResources) else p for p in base.filters)
    return Profile.from_engine(SCHEDULER_NAME, Engine(Policy(filters=filters, scorers=base.scorers)))


def set_condition(kube: Any, claim_name: str, kind: str, reason: str = "Done", message: str = "") -> None:
    """What the driver does: the condition true on the claim's allocated device."""
    claim = get_claim(kube, claim_name)
    result = claim["status"]["allocation"]["devices"]["results"][0]
    claim["status"]["devices"] = [{"driver": result["driver"], "pool": result["pool"], "device": result["device"],
                                   "conditions": [{"type": kind, "status": "True", "reason": reason,
                                                   "message": message, "observedGeneration": 1,
                                                   "lastTransitionTime": datetime.now(UTC).strftime(
                                                       "%Y-%m-%dT%H:%M:%SZ")}]}]
    kube.call("PUT", f"{API}/namespaces/default/resourceclaims/{claim_name}/status", claim)


def allocated(kube: Any, name: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        claim = get_claim(kube, name)
        return claim if (claim.get("status") or {}).get("allocation") else None

    return kube.wait_for(found, message=f"claim {name} allocated")


def pending_event(kube: Any, name: str) -> str:
    def found() -> str | None:
        events = kube.list_events("default", reason="BindingConditionsPending", involved_name=name)
        return events[0]["message"] if events else None

    return kube.wait_for(found, message=f"BindingConditionsPending for {name}")


def schedule(kube: Any, make_scheduler: Any, pod: str, binding_timeout: float, **options: Any) -> None:
    """node-1, and node-2 with the attachable gpu-0; claim gpu; a scheduler whose DynamicResources
    has ``binding_timeout`` (``options`` as make_scheduler's); then ``pod``, using the claim."""
    for name in ("node-1", "node-2"):
        kube.create_node(name)
    create_class(kube)
    attachable_slice(kube, "node-2", "gpu-0")
    create_claim(kube, "gpu")
    make_scheduler([profile(binding_timeout)], **options)
    create_pod(kube, pod, "gpu")


def test_the_pod_is_bound_once_the_driver_sets_the_binding_condition(kube, make_scheduler):
    schedule(kube, make_scheduler, "attach", 60)
    claim = allocated(kube, "gpu")
    result = claim["status"]["allocation"]["devices"]["results"][0]
    assert (result["device"], result["bindingConditions"], result["bindingFailureConditions"]) == (
        "gpu-0", ["Attached"], ["AttachFailed"])
    assert claim["status"]["allocation"]["allocationTimestamp"]
    assert claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [
        "node-2"]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["attach"]
    assert pending_event(kube, "attach") == "waiting for binding conditions for device on node node-2"
    assert node_of(kube, "attach") == ""  # waits: the device is not attached yet
    set_condition(kube, "gpu", "Attached")
    assert wait_bound(kube, "attach", timeout=15) == "node-2"


def test_a_failure_condition_fails_the_bind_and_the_claim_is_allocated_anew(kube, make_scheduler):
    schedule(kube, make_scheduler, "doomed", 60, queue=SchedulingQueue(initial_backoff=0.1, max_backoff=0.5))
    first = allocated(kube, "gpu")
    pending_event(kube, "doomed")
    set_condition(kube, "gpu", "AttachFailed", reason="NoFabricPort", message="port 7 is down")
    message = wait_failure(kube, "doomed", "device binding failed", timeout=15)
    assert 'device binding failed: claim=gpu, reason=NoFabricPort, message="port 7 is down"' in message
    # The next attempt finds the claim unusable everywhere; PostFilter deallocates it, and the
    # attempt after allocates it again, with no device status left over.
    wait_failure(kube, "doomed", "resourceclaim not available on the node", timeout=15)

    def allocated_again() -> dict[str, Any] | None:
        claim = get_claim(kube, "gpu")
        status = claim.get("status") or {}
        fresh = status.get("allocation") and not status.get("devices")
        return claim if fresh and claim["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"] \
            else None

    kube.wait_for(allocated_again, timeout=15, message="the claim allocated again")
    set_condition(kube, "gpu", "Attached")
    assert wait_bound(kube, "doomed", timeout=15) == "node-2"


def test_the_binding_timeout_fails_the_bind(kube, make_scheduler):
    schedule(kube, make_scheduler, "slow", 1, queue=SchedulingQueue(initial_backoff=5, max_backoff=5))
    message = wait_failure(kube, "slow", "device binding timeout", timeout=15)
    assert "device binding timeout" in message
    assert node_of(kube, "slow") == ""
    assert (get_claim(kube, "gpu")["status"].get("reservedFor") or []) == []  # Unreserve took the pod out
