"""Dynamic Resource Allocation through kube-scheduler with our webhook registered.

kube-scheduler v1.36.3 allocates ResourceClaims itself (DRA is GA and on by default): its
DynamicResources plugin filters nodes by the devices their ResourceSlices publish, and its
PreBind writes the claim's allocation and reservation before the binding, which here is
the extender's (``bindVerb``; pkg/scheduler/schedule_one.go runs PreBind, then the extender
that binds). The webhook (config/policy-webhook.yaml, node-cache mode, filter, prioritize
and bind, as the other webhook tests register it) knows nothing of claims and must pass
such pods through untouched: it answers filter and prioritize with the nodes
kube-scheduler's own filters left, and binds.

The cluster: 3 nodes; a ResourceSlice with 2 GPUs on dra-2 and one with a NIC (another
driver) on each of dra-1 and dra-3; 3 pods each with a claim from one ResourceClaimTemplate
(the resourceclaim-controller of kube-controller-manager creates those claims) and a pod
naming a ResourceClaim for a NIC.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import configs, dra, processes
from tests.e2e.scenarios import container

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

SCHEDULER = "e2e-dra-webhook"
NIC_DRIVER = "nic.example.com"
TEMPLATE_PODS = ("gpu-0", "gpu-1", "gpu-2")
# One access-log line per verb call (extender/webhook/verb_routes.py, --access-log).
ACCESS = re.compile(r"extender\.access: (?P<verb>\w+) (?P<result>\w+) .*\bpod=(?P<pod>\S+)")


@pytest.fixture
def dra_objects(cluster: Any) -> Any:
    """Removes the DRA objects before and after the test (the wipe between tests does not)."""
    dra.purge(cluster.client, ["default"])
    yield
    dra.purge(cluster.client, ["default"])


def start_webhook_and_kube_scheduler(cluster: Any, extender: Any, kube_scheduler: Any, tmp_path: Path,
                                     name: str) -> Any:
    """The webhook (config/policy-webhook.yaml, access log on), and kube-scheduler calling it for
    filter, prioritize and bind; returns the webhook process."""
    webhook = extender(processes.serve(
        cluster.kubeconfig, tmp_path, policy=configs.CONFIG / "policy-webhook.yaml", scheduler_names=[SCHEDULER],
        extra=["--access-log"],
    ))  # fmt: skip
    config = configs.kube_scheduler_config(
        configs.HTTP_EXAMPLE, kubeconfig=cluster.plane.user_kubeconfig("system:kube-scheduler"),
        scheduler_name=SCHEDULER, port=webhook.port, node_cache=True, bind=True,
    )  # fmt: skip
    (registered,) = config["extenders"]
    assert {registered.get(v) for v in ("filterVerb", "prioritizeVerb", "bindVerb")} == {"filter", "prioritize", "bind"}
    kube_scheduler(config, name=name)
    return webhook


def answered(log: str) -> dict[str, set[tuple[str, str]]]:
    """pod -> the (verb, result) pairs the webhook's access log shows for it."""
    calls: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for match in ACCESS.finditer(log):
        calls[match["pod"]].add((match["verb"], match["result"]))
    return calls


def test_kube_scheduler_allocates_claims_and_the_webhook_binds(
    cluster: Any, dra_objects: Any, kube_controller_manager: Any, kube_scheduler: Any, extender: Any,
    tmp_path: Path,
) -> None:
    kube = cluster.client
    for name in ("dra-1", "dra-2", "dra-3"):
        kube.create_node(name)
    dra.create(kube, dra.device_class("gpu"))
    dra.create(kube, dra.device_class("nic", dra.driver_is(NIC_DRIVER)))
    dra.create(kube, dra.resource_slice("dra-2", [dra.device("gpu-a"), dra.device("gpu-b")]))
    for name in ("dra-1", "dra-3"):
        dra.create(kube, dra.resource_slice(name, [dra.device("eth-0")], driver=NIC_DRIVER))

    webhook = start_webhook_and_kube_scheduler(cluster, extender, kube_scheduler, tmp_path, "kube-scheduler-dra")

    dra.create(kube, dra.claim_template("one-gpu", dra.claim_spec(dra.exactly("gpu", "gpu"))))
    dra.create(kube, dra.resource_claim("the-nic", dra.claim_spec(dra.exactly("nic", "nic"))))
    for name in TEMPLATE_PODS:
        kube.create_pod(name, scheduler_name=SCHEDULER, **dra.uses_claims(templates={"gpu": "one-gpu"}))
    kube.create_pod("nic-user", scheduler_name=SCHEDULER, **dra.uses_claims(claims={"nic": "the-nic"}))

    def placed() -> dict[str, str] | None:
        pods = {p["metadata"]["name"]: p for p in kube.list_pods("default")}
        bound = {n: p["spec"]["nodeName"] for n, p in pods.items() if p["spec"].get("nodeName")}
        return bound if len(bound) == 3 else None

    bound = kube.wait_for(placed, timeout=60, interval=0.2, message="two GPU pods and the NIC pod bound")
    (waiting,) = set(TEMPLATE_PODS) - set(bound)
    assert [bound[p] for p in sorted(bound) if p != "nic-user"] == ["dra-2", "dra-2"], bound
    assert bound["nic-user"] in ("dra-1", "dra-3"), bound

    # The third GPU pod: kube-scheduler's own verdict (no node has a free GPU), once its claim exists.
    def refused() -> str:
        pod = kube.get_pod(waiting) or {}
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition["type"] == "PodScheduled" and "cannot allocate all claims" in condition.get("message", ""):
                return str(condition["message"])
        return ""

    message = kube.wait_for(refused, timeout=30, interval=0.2, message=f"{waiting} refused for want of devices")
    assert message.startswith("0/3 nodes are available: "), message
    assert not kube.get_pod(waiting)["spec"].get("nodeName")

    settled = dra.Settled.read(kube, "default")
    assert settled.problems(bound, [waiting]) == []
    gpus = sorted(device for pod in bound if pod != "nic-user" for _, device in settled.devices_of(pod))
    assert gpus == ["gpu-a", "gpu-b"]
    assert settled.devices_of("nic-user") == [("nic", "eth-0")]
    for pod in bound:
        for claim in settled.claims_of(pod).values():
            assert claim is not None and dra.reserved_for(claim) == {pod}, claim
    (unallocated,) = settled.claims_of(waiting).values()
    assert unallocated is not None and not dra.results(unallocated) and not dra.reserved_for(unallocated)
    # Each generated claim is the pod's own: owned by it, made from the template.
    for pod in TEMPLATE_PODS:
        (claim,) = settled.claims_of(pod).values()
        assert claim is not None
        owners = [(o["kind"], o["name"]) for o in claim["metadata"].get("ownerReferences") or []]
        assert owners == [("Pod", pod)], owners

    # The webhook filtered and bound every bound pod. kube-scheduler asks for scores only when
    # more than one node is left (pkg/scheduler/schedule_one.go, schedulePod: "only one node
    # after predicate, just use it"): for the NIC pod (two NIC nodes), not for the GPU pods.
    # It never called the webhook for the pod its DynamicResources filter left no node for.
    calls = answered(webhook.log())
    for pod in bound:
        assert {("filter", "ok"), ("bind", "ok")} <= calls[f"default/{pod}"], calls.get(f"default/{pod}")
    assert ("prioritize", "ok") in calls["default/nic-user"], calls["default/nic-user"]
    assert calls.get(f"default/{waiting}", set()) == set(), calls[f"default/{waiting}"]
    assert webhook.metric("extender_bind_total", result="bound") == 3


def test_extended_resources_backed_by_a_class_are_bound_by_the_webhook(
    cluster: Any, dra_objects: Any, kube_scheduler: Any, extender: Any, tmp_path: Path,
) -> None:
    """DRAExtendedResource through the webhook: kube-scheduler serves `example.com/gpu` from the
    class that names it (the node does not advertise it) and creates the pod's claim at PreBind;
    the webhook's /bind, whose resource check would count the GPUs against the node's allocatable,
    leaves them to DRA because it reads the DeviceClasses. Two GPUs, three pods: two bound."""
    kube = cluster.client
    for name in ("er-1", "er-2"):
        kube.create_node(name)
    gpu = dra.device_class("gpu")
    gpu["spec"]["extendedResourceName"] = "example.com/gpu"
    dra.create(kube, gpu)
    dra.create(kube, dra.resource_slice("er-2", [dra.device("gpu-a"), dra.device("gpu-b")]))
    webhook = start_webhook_and_kube_scheduler(cluster, extender, kube_scheduler, tmp_path,
                                               "kube-scheduler-dra-extended")
    for i in range(3):
        kube.create_pod(f"er-{i}", scheduler_name=SCHEDULER, containers=[container(
            "main", cpu="10m", extended={"example.com/gpu": "1"})])

    def placed() -> dict[str, str] | None:
        bound = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in kube.list_pods("default")
                 if p["spec"].get("nodeName")}
        return bound if len(bound) == 2 else None

    bound = kube.wait_for(placed, timeout=60, interval=0.2, message="two GPU pods bound through the webhook")
    assert set(bound.values()) == {"er-2"}, bound
    claims = dra.list_claims(kube, "default")
    for pod in bound:
        status = (kube.get_pod(pod) or {}).get("status") or {}
        name = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        assert name in claims, (pod, status)
        assert dra.reserved_for(claims[name]) == {pod}
    devices = sorted(r["device"] for c in claims.values() for r in dra.results(c))
    assert devices == ["gpu-a", "gpu-b"]
    calls = answered(webhook.log())
    for pod in bound:
        assert ("bind", "ok") in calls[f"default/{pod}"], calls.get(f"default/{pod}")
