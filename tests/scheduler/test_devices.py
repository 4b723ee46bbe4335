"""Shared GPUs in standalone mode, end to end against the API server (fake, or real under envtest).

The scheduler places GPU pods with config/policy-devices.yaml, picks their devices at
Reserve, records them in the device ledger and binds with the assignment on the Binding.
Whatever happens (16 bind threads, two schedulers at once, failed binds, restarts), the
assignments on the bound pods never add up to more than a device has.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from extender.kube import deviceledger
from extender.kube.client import build_api_client
from extender.kube.deviceledger import Ledger
from extender.model.devices import ASSIGNMENT_ANNOTATION, INVENTORY_ANNOTATION, Use
from extender.policy.engine import Engine
from extender.policy.loading import load_policy_file
from extender.scheduler.profiles import Profile
from tests.devicebuilders import (
    assigned,
    assignment_text,
    create_ready_node,
    device_totals,
    gpu,
    gpu_limits,
    inventory,
)
from tests.helpers import ROOT
from tests.scheduler.conftest import SCHEDULER_NAME
from tests.scheduler.test_scheduling import events_for, node_of, wait_bound

pytestmark = pytest.mark.apiserver

LEDGER_NAMESPACE = "gpu-ledgers"
POLICY = ROOT / "config" / "policy-devices.yaml"
T4 = 16000


OTHER_SCHEDULER = "extender-scheduler-b"


def profile(name: str = SCHEDULER_NAME) -> Profile:
    return Profile.from_engine(name, Engine(load_policy_file(POLICY)))


@pytest.fixture(autouse=True)
def ledger_namespace(kube: Any, api_client: Any) -> Iterator[str]:
    kube.ensure_namespace(LEDGER_NAMESPACE)
    deviceledger.configure(api_client, namespace=LEDGER_NAMESPACE)
    yield LEDGER_NAMESPACE


def gpu_node(kube: Any, name: str, *devices: dict[str, Any]) -> None:
    create_ready_node(kube, name, devices or (gpu("GPU-0", T4), gpu("GPU-1", T4)))


def gpu_pod(kube: Any, name: str, **request: int | None) -> dict[str, Any]:
    return kube.create_pod(name, limits=gpu_limits(**request), scheduler_name=SCHEDULER_NAME)


def pods(kube: Any, prefix: str) -> list[dict[str, Any]]:
    return [p for p in kube.list_pods("default") if p["metadata"]["name"].startswith(prefix)]


def within_capacity(kube: Any, capacity: int = T4) -> dict[str, tuple[int, int, int]]:
    totals = device_totals(kube.list_pods("default"))
    assert all(memory <= capacity and cores <= 100 for memory, cores, _ in totals.values()), totals
    return totals


def test_gpu_pods_get_devices_and_shares_are_never_over_allocated(kube: Any, make_scheduler: Any) -> None:
    gpu_node(kube, "gpu-1")
    create_ready_node(kube, "cpu-1")
    for i in range(10):
        gpu_pod(kube, f"infer-{i}", memory=6000, cores=20)
    scheduler = make_scheduler([profile()])
    kube.wait_for(lambda: sum(1 for p in pods(kube, "infer-") if p["spec"].get("nodeName")) == 4,
                  timeout=15, message="4 GPU pods bound")
    kube.wait_for(lambda: sum(1 for i in range(10) if events_for(kube, f"infer-{i}", "FailedScheduling")) == 6,
                  timeout=15, message="6 pods reported unschedulable")
    bound = [p for p in pods(kube, "infer-") if p["spec"].get("nodeName")]
    assert {p["spec"]["nodeName"] for p in bound} == {"gpu-1"}
    assert within_capacity(kube) == {"gpu-1/GPU-0": (12000, 40, 2), "gpu-1/GPU-1": (12000, 40, 2)}
    for pod in bound:
        annotation = pod["metadata"]["annotations"][ASSIGNMENT_ANNOTATION]
        assert '"node":"gpu-1"' in annotation and '"main":' in annotation
    waiting = next(p for p in pods(kube, "infer-") if not p["spec"].get("nodeName"))
    message = events_for(kube, waiting["metadata"]["name"], "FailedScheduling")[0]["message"]
    assert message.startswith("0/2 nodes are available: 1 Insufficient GPU memory, 1 node(s) had no shared GPUs. ")
    # Preemption was tried on the GPU node (same priority: no victims), not on the CPU-only one.
    assert message.endswith("preemption: 0/2 nodes are available: 1 No preemption victims found for incoming "
                            "pod, 1 Preemption is not helpful for scheduling.")
    # The state counts exactly what the annotations say (claims all turned into bound pods).
    kube.wait_for(lambda: scheduler.state.device_use("gpu-1").used("GPU-0") == Use(12000, 40, 2),
                  message="the watch to bring every assignment")
    assert not scheduler.state.devices._claims


def test_plain_pods_still_go_anywhere(kube: Any, make_scheduler: Any) -> None:
    create_ready_node(kube, "gpu-broken", annotations={INVENTORY_ANNOTATION: "not json"})
    make_scheduler([profile()])
    kube.create_pod("web", cpu="100m", scheduler_name=SCHEDULER_NAME)
    assert wait_bound(kube, "web") == "gpu-broken"
    assert ASSIGNMENT_ANNOTATION not in (kube.get_pod("web")["metadata"].get("annotations") or {})


def test_a_restart_rebuilds_use_from_the_bound_pods_annotations(kube: Any, make_scheduler: Any) -> None:
    gpu_node(kube, "gpu-1")
    for name, device in (("old-a", "GPU-0"), ("old-b", "GPU-1")):
        kube.create_pod(name, node_name="gpu-1", limits=gpu_limits(memory=10000),
                        annotations={ASSIGNMENT_ANNOTATION: assignment_text("gpu-1", {"main": [(device, 10000, 0)]})})
    make_scheduler([profile()])
    gpu_pod(kube, "fits", memory=6000)
    gpu_pod(kube, "too-much", memory=7000)
    assert wait_bound(kube, "fits") == "gpu-1"
    kube.wait_for(lambda: events_for(kube, "too-much", "FailedScheduling"), message="too-much refused")
    assert node_of(kube, "too-much") == ""
    within_capacity(kube)


def test_two_schedulers_at_once_never_share_a_device(apiserver: Any, kube: Any, make_scheduler: Any) -> None:
    """Two processes (separate states, clients and ledgers), each with its own pods, binding at the
    same time onto the same devices: each learns of the other's binds only through its watch,
    too late; the device ledger is what keeps them from handing out the same share."""
    gpu_node(kube, "gpu-1", gpu("GPU-0", T4))
    gpu_node(kube, "gpu-2", gpu("GPU-0", T4))
    second_client = build_api_client(kubeconfig=str(apiserver.kubeconfig))
    deviceledger.configure(second_client, namespace=LEDGER_NAMESPACE)
    try:
        for i in range(8):
            gpu_pod(kube, f"job-a{i}", memory=5000, cores=10)
            kube.create_pod(f"job-b{i}", limits=gpu_limits(memory=5000, cores=10), scheduler_name=OTHER_SCHEDULER)
        schedulers = [make_scheduler([profile()], start=False),
                      make_scheduler([profile(OTHER_SCHEDULER)], client=second_client, start=False)]
        for scheduler in schedulers:  # both at once: each lists every device as free
            scheduler.start()
        kube.wait_for(lambda: sum(1 for p in pods(kube, "job-") if p["spec"].get("nodeName")) == 6,
                      timeout=20, message="6 pods bound (3 per device)")
        kube.wait_for(lambda: sum(1 for p in pods(kube, "job-") if events_for(kube, p["metadata"]["name"],
                                                                              "FailedScheduling")) >= 10,
                      timeout=20, message="the 10 others refused")
        totals = within_capacity(kube)
        assert {key: count for key, (_, _, count) in totals.items()} == {"gpu-1/GPU-0": 3, "gpu-2/GPU-0": 3}
        assert all(assigned(p) for p in pods(kube, "job-") if p["spec"].get("nodeName"))
    finally:
        second_client.close()


@pytest.mark.requires_fake("fails the bind with 500 on demand (the fake's fail_next)")
def test_a_failed_bind_releases_the_claim_and_the_pod_is_retried(apiserver: Any, kube: Any,
                                                                make_scheduler: Any) -> None:
    gpu_node(kube, "gpu-1", gpu("GPU-0", T4))
    apiserver.fake.fail_next(1, 500, path_regex=r"/pods/first/binding$", method="POST")
    scheduler = make_scheduler([profile()])
    gpu_pod(kube, "first", memory=T4)
    assert wait_bound(kube, "first", timeout=15) == "gpu-1"
    assert assigned(kube.get_pod("first")) == {"GPU-0": (T4, 0)}
    failed = events_for(kube, "first", "FailedScheduling")
    assert failed and "500" in failed[0]["message"]
    kube.wait_for(lambda: scheduler.state.device_use("gpu-1").used("GPU-0") == Use(T4, 0, 1),
                  message="the share counted once, from the bound pod")


def test_shares_taken_by_another_process_requeue_the_pod_until_they_are_free(
        apiserver: Any, kube: Any, make_scheduler: Any) -> None:
    """Another process handed GPU-0 out a moment ago (its pod not visible yet): the bind is
    refused before anything is written to the pod, and retried once the entry expires."""
    gpu_node(kube, "gpu-1", gpu("GPU-0", T4))
    other_client = build_api_client(kubeconfig=str(apiserver.kubeconfig))
    try:
        from extender.model.devices import LedgerClaim, NodeDeviceUse

        other = Ledger(other_client, namespace=LEDGER_NAMESPACE, ttl=2.0)
        other.record(LedgerClaim("gpu-1", "default/elsewhere", "uid-elsewhere", (("GPU-0", T4, 0),),
                                 {"GPU-0": (T4, 100)}, NodeDeviceUse()))
        make_scheduler([profile()])
        gpu_pod(kube, "late", memory=4000)
        failed = kube.wait_for(lambda: events_for(kube, "late", "FailedScheduling"), timeout=10,
                               message="the ledger refusal reported")
        assert "handed out by another scheduler process" in failed[0]["message"]
        assert wait_bound(kube, "late", timeout=20) == "gpu-1"
        assert assigned(kube.get_pod("late")) == {"GPU-0": (4000, 0)}
    finally:
        other_client.close()


def test_an_impossible_request_waits_for_a_cluster_change_not_a_loop(kube: Any, make_scheduler: Any) -> None:
    gpu_node(kube, "gpu-1")
    scheduler = make_scheduler([profile()])
    gpu_pod(kube, "huge", memory=40000)
    failed = kube.wait_for(lambda: events_for(kube, "huge", "FailedScheduling"), message="FailedScheduling")
    assert failed[0]["message"] == ("0/1 nodes are available: 1 node(s) had too few GPUs large enough "
                                    "for the request. preemption: 0/1 nodes are available: 1 Preemption is "
                                    "not helpful for scheduling.")
    kube.wait_for(lambda: scheduler.queue.where("default/huge") == "unschedulable", message="parked")
    assert scheduler.queue.get("default/huge").attempts == 1  # type: ignore[union-attr]
    # A bigger GPU in the inventory is a cluster change worth a retry.
    kube.patch_node("gpu-1", {"metadata": {"annotations": {INVENTORY_ANNOTATION: inventory(gpu("GPU-0", 81920))}}})
    assert wait_bound(kube, "huge", timeout=10) == "gpu-1"


def test_a_high_priority_gpu_pod_preempts_the_one_holding_its_device(kube: Any, make_scheduler: Any) -> None:
    """Preemption sees device shares: removing the victim frees its assignment's share."""
    kube.ensure_priority_class("extender-test-low", 100)
    kube.ensure_priority_class("extender-test-high", 100000)
    gpu_node(kube, "gpu-1", gpu("GPU-0", T4))
    kube.create_pod("low", node_name="gpu-1", limits=gpu_limits(memory=12000), priority_class_name="extender-test-low",
                    annotations={ASSIGNMENT_ANNOTATION: assignment_text("gpu-1", {"main": [("GPU-0", 12000, 0)]})},
                    spec={"terminationGracePeriodSeconds": 0})
    kube.create_pod("bystander", node_name="gpu-1", cpu="100m", priority_class_name="extender-test-low",
                    spec={"terminationGracePeriodSeconds": 0})
    make_scheduler([profile()])
    kube.create_pod("high", limits=gpu_limits(memory=8000), scheduler_name=SCHEDULER_NAME,
                    priority_class_name="extender-test-high")
    assert wait_bound(kube, "high", timeout=20) == "gpu-1"
    assert kube.get_pod("low") is None
    assert kube.get_pod("bystander") is not None  # it held no share: not a victim
    assert assigned(kube.get_pod("high")) == {"GPU-0": (8000, 0)}
