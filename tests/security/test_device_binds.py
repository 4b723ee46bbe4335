"""/bind for GPU pods: the guard leaves the shared-device resources to DeviceFit, which it runs.

Over the example cluster config/snapshot-devices.yaml (in memory): its nodes publish GPU
inventories but do not advertise the GPU resources as allocatable, exactly as with
kube-scheduler's managedResources and ignoredByScheduler: true.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from extender.model.devices import ASSIGNMENT_ANNOTATION
from tests.helpers import ROOT
from tests.security.conftest import Webhook

SNAPSHOT = ROOT / "config" / "snapshot-devices.yaml"
POLICY = ROOT / "config" / "policy-webhook-devices.yaml"
INFER_1 = "00000000-0000-4000-9000-000000000006"
TOO_BIG = "00000000-0000-4000-9000-000000000012"


def _bind(hook: Webhook, name: str, uid: str, node: str = "gpu-a100") -> str:
    reply = hook.client.post("/bind", json={"PodName": name, "PodNamespace": "ml", "PodUID": uid, "Node": node})
    assert reply.status_code == 200, reply.data
    return str(reply.get_json()["Error"])


def _hook(factory: Callable[..., Webhook], **overrides: Any) -> Webhook:
    return factory(snapshot=str(SNAPSHOT), scheduler_names=("extender-scheduler",), **overrides)


def test_a_gpu_pod_binds_with_its_assignment(webhook_factory: Callable[..., Webhook]) -> None:
    hook = _hook(webhook_factory, policy=str(POLICY))
    assert _bind(hook, "infer-1", INFER_1) == ""
    record = hook.runtime.state.pod("ml/infer-1")
    assert record is not None and record.node_name == "gpu-a100"
    assert record.devices == (("GPU-a100-0", 6144, 25),)  # binpack: next to ml/notebook


def test_an_impossible_gpu_pod_is_refused_by_the_policy(webhook_factory: Callable[..., Webhook]) -> None:
    hook = _hook(webhook_factory, policy=str(POLICY))
    error = _bind(hook, "too-big", TOO_BIG)
    assert "does not pass the policy" in error and "too few GPUs large enough" in error
    assert hook.binder.calls == []


def test_without_device_fit_the_guard_counts_gpu_resources_as_kube_scheduler_would(
        webhook_factory: Callable[..., Webhook]) -> None:
    hook = _hook(webhook_factory)  # the default webhook policy: no DeviceFit
    error = _bind(hook, "infer-1", INFER_1)
    assert "does not pass kube-scheduler's filters" in error
    assert "Insufficient extender.example/gpu-memory" in error
    assert ASSIGNMENT_ANNOTATION not in str(hook.binder.calls)
