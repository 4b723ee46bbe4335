"""Shared GPUs end to end on a real control plane: with kube-scheduler, and with the standalone scheduler.

kube-scheduler runs config/kube-scheduler-devices.yaml (managedResources with
ignoredByScheduler: true, bindVerb) against `extender serve` with two gunicorn workers and
config/policy-webhook-devices.yaml; the standalone run is `extender schedule` with
config/policy-devices.yaml. Either way the GPU pods are bound with their device assignment,
no device is handed out beyond its capacity, and the pod that does not fit is refused with
the extender's reason.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.model.devices import ASSIGNMENT_ANNOTATION
from tests.devicebuilders import create_ready_node, device_totals, gpu, gpu_limits
from tests.e2e import configs, processes

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

LEDGERS = "gpu-ledgers"
EXAMPLE = "kube-scheduler-devices.yaml"
WEBHOOK_POLICY = configs.CONFIG / "policy-webhook-devices.yaml"
STANDALONE_POLICY = configs.CONFIG / "policy-devices.yaml"


def _cluster(kube: Any, scheduler_name: str) -> None:
    """A GPU node with two 16000 MiB devices, a CPU node; five 7000 MiB GPU pods (two fit per
    device) and a plain pod."""
    kube.ensure_namespace(LEDGERS)
    create_ready_node(kube, "gpu-1", [gpu("GPU-0", 16000), gpu("GPU-1", 16000)])
    create_ready_node(kube, "cpu-1")
    for i in range(5):
        kube.create_pod(f"infer-{i}", cpu="100m", limits=gpu_limits(memory=7000, cores=20),
                        scheduler_name=scheduler_name)
    kube.create_pod("web", cpu="100m", scheduler_name=scheduler_name)


def _check_placements(kube: Any, summary_prefix: str) -> None:
    def bound() -> list[dict[str, Any]]:
        return [p for p in kube.list_pods("default") if p["spec"].get("nodeName")]

    def refused_for_memory() -> list[dict[str, Any]]:
        # The filter's verdict on the fifth pod (not a bind that raced another for the last share).
        waiting = [p["metadata"]["name"] for p in kube.list_pods("default") if not p["spec"].get("nodeName")]
        return [e for name in waiting
                for e in kube.list_events("default", reason="FailedScheduling", involved_name=name)
                if e["message"].startswith(summary_prefix) and "Insufficient GPU memory" in e["message"]]

    kube.wait_for(lambda: len(bound()) == 5, timeout=60, message="four GPU pods and the web pod bound")
    refused = kube.wait_for(refused_for_memory, timeout=60, message="the fifth GPU pod refused for memory")
    pods = {p["metadata"]["name"]: p for p in bound()}
    assert ASSIGNMENT_ANNOTATION not in (pods["web"]["metadata"].get("annotations") or {})
    gpu_pods = [p for name, p in pods.items() if name.startswith("infer-")]
    assert {p["spec"]["nodeName"] for p in gpu_pods} == {"gpu-1"}
    # Two 7000 MiB shares per 16000 MiB device; each assignment came with its Binding.
    assert device_totals(gpu_pods) == {"gpu-1/GPU-0": (14000, 40, 2), "gpu-1/GPU-1": (14000, 40, 2)}
    assert "1 Insufficient GPU memory, 1 node(s) had no shared GPUs" in refused[0]["message"]


def test_kube_scheduler_hands_gpu_pods_to_the_extender(cluster: Any, extender: Any, kube_scheduler: Any,
                                                       tmp_path: Any) -> None:
    kube = cluster.client
    _cluster(kube, "e2e-devices")
    webhook = extender(processes.serve(cluster.kubeconfig, tmp_path, policy=WEBHOOK_POLICY,
                                       scheduler_names=("e2e-devices",),
                                       extra=["--workers", "2", "--lease-namespace", LEDGERS]))
    config = configs.kube_scheduler_config(EXAMPLE, kubeconfig=cluster.plane.user_kubeconfig("system:kube-scheduler"),
                                           scheduler_name="e2e-devices", port=webhook.port)
    (managed,) = [e["managedResources"] for e in config["extenders"]]
    assert all(m["ignoredByScheduler"] for m in managed)
    kube_scheduler(config, name="kube-scheduler-devices")
    _check_placements(kube, "0/2 nodes are available: ")
    # The plain pod never reached the extender (it requests no managed resource): kube-scheduler
    # filtered and bound it alone.
    assert "pod=default/infer-0" in webhook.log() and "pod=default/web" not in webhook.log()
    assert webhook.metric("extender_device_ledger_writes_total", result="written") >= 4


def test_the_standalone_scheduler_shares_gpus(cluster: Any, extender: Any, tmp_path: Any) -> None:
    kube = cluster.client
    _cluster(kube, "extender-scheduler")
    extender(processes.schedule(cluster.kubeconfig, tmp_path, policy=STANDALONE_POLICY,
                                extra=["--lease-namespace", LEDGERS]))
    _check_placements(kube, "0/2 nodes are available: ")
