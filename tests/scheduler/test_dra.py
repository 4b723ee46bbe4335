"""The standalone scheduler with dynamic resource claims, end to end on the API server (fake, or real under envtest).

What kube-scheduler v1.36.3 does (pkg/scheduler/framework/plugins/dynamicresources): a pod
whose claim is missing waits with its reason and is bound once the claim appears; a claim
is allocated to devices of the node the pod is bound to, with kube-scheduler's finalizer,
`status.allocation` and the pod in `status.reservedFor`, all before the Binding; a device
is never given twice; a shared claim takes its next pods to the same node.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from extender.cluster.state import ClusterState
from extender.scheduler.queueing import SchedulingQueue
from tests.fakeapi.fixtures import fake_only
from tests.scheduler.conftest import SCHEDULER_NAME, RecordingBinder

pytestmark = pytest.mark.apiserver

API = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"
FINALIZER = "resource.kubernetes.io/delete-protection"


def create(kube: Any, path: str, obj: dict[str, Any]) -> dict[str, Any]:
    return kube.call("POST", f"{API}/{path}", obj)


def create_class(kube: Any, name: str = "gpu") -> None:
    create(kube, "deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                   "metadata": {"name": name},
                                   "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})


def create_slice(kube: Any, node: str, *devices: str) -> None:
    create(kube, "resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": d} for d in devices]}})


def create_claim(kube: Any, name: str, count: int = 1, device_class: str = "gpu") -> dict[str, Any]:
    return create(kube, "namespaces/default/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class,
                                                                      "count": count}}]}}})


def get_claim(kube: Any, name: str) -> dict[str, Any]:
    return kube.call("GET", f"{API}/namespaces/default/resourceclaims/{name}")


def create_pod(kube: Any, name: str, *claims: str) -> dict[str, Any]:
    refs = [{"name": f"c{i}", "resourceClaimName": claim} for i, claim in enumerate(claims)]
    return kube.create_pod(name, scheduler_name=SCHEDULER_NAME, spec={"resourceClaims": refs})


def node_of(kube: Any, name: str) -> str:
    return ((kube.get_pod(name) or {}).get("spec") or {}).get("nodeName") or ""


def wait_bound(kube: Any, name: str, timeout: float = 10.0) -> str:
    return kube.wait_for(lambda: node_of(kube, name), timeout=timeout, message=f"pod {name} bound")


def wait_failure(kube: Any, name: str, text: str, timeout: float = 10.0) -> str:
    def found() -> str | None:
        events = kube.list_events("default", reason="FailedScheduling", involved_name=name)
        return next((e["message"] for e in events if text in e["message"]), None)

    return kube.wait_for(found, timeout=timeout, message=f"FailedScheduling for {name} with {text!r}")


def gpu_cluster(kube: Any) -> None:
    for name in ("node-1", "node-2", "node-3"):
        kube.create_node(name)
    create_class(kube)
    create_slice(kube, "node-2", "gpu-0", "gpu-1")


def devices_of(claim: dict[str, Any]) -> list[str]:
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return [f"{r['pool']}/{r['device']}" for r in results]


def test_claims_are_allocated_on_the_node_with_the_devices_and_never_twice(kube, make_scheduler):
    gpu_cluster(kube)
    for name in ("a", "b", "c"):
        create_claim(kube, f"gpu-{name}")
    make_scheduler()
    for name in ("a", "b", "c"):
        create_pod(kube, f"job-{name}", f"gpu-{name}")
    bound = {name: wait_bound(kube, f"job-{name}") for name in ("a", "b")}
    assert set(bound.values()) == {"node-2"}
    message = wait_failure(kube, "job-c", "cannot allocate all claims")
    assert message.startswith("0/3 nodes are available: 3 cannot allocate all claims.")
    claims = {name: get_claim(kube, f"gpu-{name}") for name in ("a", "b")}
    assert sorted(d for claim in claims.values() for d in devices_of(claim)) == ["node-2/gpu-0", "node-2/gpu-1"]
    for name, claim in claims.items():
        assert FINALIZER in claim["metadata"]["finalizers"]
        pod = kube.get_pod(f"job-{name}")
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": f"job-{name}",
                                                  "uid": pod["metadata"]["uid"]}]
        assert claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"] == [
            {"key": "metadata.name", "operator": "In", "values": ["node-2"]}]
    assert devices_of(get_claim(kube, "gpu-c")) == []
    assert node_of(kube, "job-c") == ""


def test_a_shared_claim_takes_every_pod_to_its_devices(kube, make_scheduler):
    gpu_cluster(kube)
    create_claim(kube, "shared")
    make_scheduler()
    for name in ("x", "y", "z"):
        create_pod(kube, name, "shared")
    assert {wait_bound(kube, name) for name in ("x", "y", "z")} == {"node-2"}
    claim = get_claim(kube, "shared")
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["x", "y", "z"]
    assert len(devices_of(claim)) == 1


def wait_gated(scheduler: Any, name: str) -> None:
    """Held before the queue (PreEnqueue): never tried, so no event and no backoff."""
    deadline = time.monotonic() + 10
    while scheduler.queue.where(f"default/{name}") != "gated":
        assert time.monotonic() < deadline, f"pod {name} was not held before the queue"
        time.sleep(0.02)


def failures(kube: Any, name: str) -> list[str]:
    return [e["message"] for e in kube.list_events("default", reason="FailedScheduling", involved_name=name)]


def test_a_missing_claim_holds_the_pod_untried_and_a_missing_class_keeps_it_pending(kube, make_scheduler):
    gpu_cluster(kube)
    scheduler = make_scheduler()
    create_pod(kube, "early", "later")
    wait_gated(scheduler, "early")
    create_claim(kube, "odd", device_class="tpu")
    create_pod(kube, "odd", "odd")
    wait_failure(kube, "odd", "request gpu: device class tpu does not exist")
    assert failures(kube, "early") == []  # kube-scheduler's PreEnqueue records nothing on the pod
    create_claim(kube, "later")  # the claim event lets the pod in, with no backoff to wait out
    assert wait_bound(kube, "early", timeout=3) == "node-2"
    time.sleep(0.3)
    assert node_of(kube, "odd") == ""


def test_a_template_claim_is_found_through_the_pod_status(kube, make_scheduler):
    """kube-controller-manager's resourceclaim controller makes the claim and writes its name
    into the pod's status; here the test plays the controller."""
    gpu_cluster(kube)
    pod = kube.create_pod("tpl", scheduler_name=SCHEDULER_NAME,
                          spec={"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]})
    scheduler = make_scheduler()
    wait_gated(scheduler, "tpl")
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "tpl-gpu-x1", "ownerReferences": [
                 {"apiVersion": "v1", "kind": "Pod", "name": "tpl", "uid": pod["metadata"]["uid"],
                  "controller": True, "blockOwnerDeletion": True}]},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}
    create(kube, "namespaces/default/resourceclaims", claim)
    kube.patch_pod("tpl", {"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "tpl-gpu-x1"}]}},
                   status_subresource=True)
    assert wait_bound(kube, "tpl") == "node-2"
    assert devices_of(get_claim(kube, "tpl-gpu-x1")) in (["node-2/gpu-0"], ["node-2/gpu-1"])


@fake_only("a real kube-apiserver v1.36 always serves resource.k8s.io/v1; the fake can withhold it")
def test_without_the_dra_api_claim_pods_wait_and_the_others_are_scheduled(apiserver, kube, make_scheduler):
    apiserver.fake.configure(dra_api=False)
    for name in ("node-1", "node-2"):
        kube.create_node(name)
    make_scheduler()
    create_pod(kube, "wants-gpu", "gpu")
    kube.create_pod("plain", scheduler_name=SCHEDULER_NAME)
    assert wait_bound(kube, "plain")
    assert "the API server does not serve resource.k8s.io/v1" in wait_failure(kube, "wants-gpu", "dynamic resource")


def test_a_failed_bind_takes_the_pod_out_of_the_claims_reservation(api_client, kube, make_scheduler):
    """Unreserve: the claim was written at PreBind, the Binding then failed (the pod was deleted
    meanwhile): the pod leaves reservedFor; the allocation stays, as kube-scheduler leaves it."""
    gpu_cluster(kube)
    create_claim(kube, "gpu")
    state = ClusterState()
    binder = RecordingBinder(api_client, state, hold=["doomed"])
    make_scheduler(state=state, binder=binder)
    create_pod(kube, "doomed", "gpu")
    assert binder.waiting["doomed"].wait(10), "the scheduler never tried to bind"
    assert [r["name"] for r in get_claim(kube, "gpu")["status"]["reservedFor"]] == ["doomed"]
    kube.delete_pod("doomed", grace_period_seconds=0)
    binder.release("doomed")
    def unreserved() -> dict[str, Any] | None:
        claim = get_claim(kube, "gpu")
        return None if claim["status"].get("reservedFor") else claim

    claim = kube.wait_for(unreserved, message="the pod out of reservedFor")
    assert devices_of(claim) in (["node-2/gpu-0"], ["node-2/gpu-1"])


def test_an_idle_claim_allocated_where_the_pod_cannot_go_is_deallocated(kube, make_scheduler):
    """PostFilter: the claim's devices are on a node the pod cannot use (tainted), nobody holds
    it: kube-scheduler deallocates it, and the next attempt allocates it elsewhere."""
    gpu_cluster(kube)
    create_slice(kube, "node-3", "gpu-9")
    claim = create_claim(kube, "gpu")
    claim["status"] = {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "node-2", "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}]}}}
    kube.call("PUT", f"{API}/namespaces/default/resourceclaims/gpu/status", claim)
    kube.patch_node("node-2", {"spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}})
    make_scheduler()
    create_pod(kube, "mover", "gpu")
    assert wait_bound(kube, "mover") == "node-3"
    assert devices_of(get_claim(kube, "gpu")) == ["node-3/gpu-9"]


@fake_only("injects a 500 on the claim's status write, which a real kube-apiserver does not give on demand")
def test_a_refused_status_write_frees_the_devices_and_the_pod_is_retried(apiserver, kube, make_scheduler):
    gpu_cluster(kube)
    create_claim(kube, "gpu")
    apiserver.fake.fail_next(1, 500, path_regex=r"/resourceclaims/gpu/status$", method="PUT")
    scheduler = make_scheduler(queue=SchedulingQueue(initial_backoff=0.1, max_backoff=0.5))
    create_pod(kube, "retried", "gpu")
    wait_failure(kube, "retried", "add allocation and reservation to claim default/gpu")
    assert wait_bound(kube, "retried") == "node-2"
    assert len(devices_of(get_claim(kube, "gpu"))) == 1
    # one allocation held, the refused attempt's one given back
    assert len(list(scheduler.state.dra_store.in_use())) == 1


class HeldPrebind(RecordingBinder):
    """The production binder, whose bind-time actions wait until the test lets them go."""

    def __init__(self, api_client: Any, state: ClusterState) -> None:
        super().__init__(api_client, state)
        self.reached, self.go = threading.Event(), threading.Event()

    def prebind(self, actions: Any) -> None:
        self.reached.set()
        self.go.wait(10)
        super().prebind(actions)


def test_a_claim_deleted_while_its_pod_is_bound_fails_the_bind_and_frees_the_devices(api_client, kube,
                                                                                     make_scheduler):
    gpu_cluster(kube)
    create_claim(kube, "gpu")
    state = ClusterState()
    binder = HeldPrebind(api_client, state)
    scheduler = make_scheduler(state=state, binder=binder)
    create_pod(kube, "orphan", "gpu")
    assert binder.reached.wait(10), "the scheduler never reached PreBind"
    assert len(list(state.dra_store.in_use())) == 1  # held in flight
    kube.call("DELETE", f"{API}/namespaces/default/resourceclaims/gpu")
    kube.wait_for(lambda: state.dra_store.claim("default", "gpu") is None, message="the watch saw the deletion")
    binder.go.set()
    wait_failure(kube, "orphan", "claim default/gpu got deleted in the meantime")
    assert binder.attempts_for("orphan") == 0  # no Binding was sent
    assert node_of(kube, "orphan") == ""
    kube.wait_for(lambda: not list(scheduler.state.dra_store.in_use()), message="the devices freed")


def test_a_restart_after_prebind_binds_the_pod_where_its_claim_is(kube, make_scheduler):
    """A previous instance wrote the claim (allocation and reservation) and died before the
    Binding: the new one finds the claim reserved for the pod, writes nothing, and binds it there."""
    gpu_cluster(kube)
    create_slice(kube, "node-3", "gpu-9")
    claim = create_claim(kube, "gpu")
    pod = create_pod(kube, "survivor", "gpu")
    claim["metadata"]["finalizers"] = [FINALIZER]
    claim = kube.call("PUT", f"{API}/namespaces/default/resourceclaims/gpu", claim)
    claim["status"] = {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "node-3",
                                                "device": "gpu-9"}]},
                       "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                           {"key": "metadata.name", "operator": "In", "values": ["node-3"]}]}]}},
        "reservedFor": [{"resource": "pods", "name": "survivor", "uid": pod["metadata"]["uid"]}]}
    written = kube.call("PUT", f"{API}/namespaces/default/resourceclaims/gpu/status", claim)
    make_scheduler()
    assert wait_bound(kube, "survivor") == "node-3"
    after = get_claim(kube, "gpu")
    assert after["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
    assert devices_of(after) == ["node-3/gpu-9"]


def test_an_extended_resource_backed_by_a_class_gets_a_claim_of_its_own(kube, make_scheduler):
    """DRAExtendedResource: `example.com/gpu: 1` on a node that does not advertise it is served by
    the class that names it; the scheduler creates the claim, allocates it, and names it in the
    pod's status before the Binding."""
    gpu_cluster(kube)
    kube.call("PATCH", f"{API}/deviceclasses/gpu", {"spec": {"extendedResourceName": "example.com/gpu"}},
              content_type="application/merge-patch+json")
    make_scheduler()
    pod = kube.create_pod("ext", scheduler_name=SCHEDULER_NAME, requests={"example.com/gpu": "1"},
                          limits={"example.com/gpu": "1"})
    assert wait_bound(kube, "ext") == "node-2"
    status = kube.wait_for(lambda: (kube.get_pod("ext").get("status") or {}).get("extendedResourceClaimStatus"),
                           message="extendedResourceClaimStatus")
    assert status["requestMappings"] == [{"containerName": kube.get_pod("ext")["spec"]["containers"][0]["name"],
                                          "resourceName": "example.com/gpu", "requestName": "container-0-request-0"}]
    claim = get_claim(kube, status["resourceClaimName"])
    assert claim["metadata"]["name"].startswith("ext-extended-resources-")
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert claim["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    assert len(devices_of(claim)) == 1 and devices_of(claim)[0].startswith("node-2/")
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]


def test_claims_share_a_device_that_allows_multiple_allocations(kube, make_scheduler):
    """Consumable capacity: two claims of 4Gi share the 8Gi device (each result with its shareID and
    consumedCapacity, as the API server takes them); a third stays Pending."""
    for name in ("node-1", "node-2"):
        kube.create_node(name)
    create_class(kube)
    create(kube, "resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-2-shared"},
        "spec": {"driver": DRIVER, "nodeName": "node-2", "pool": {"name": "node-2", "generation": 1,
                                                                  "resourceSliceCount": 1},
                 "devices": [{"name": "big", "allowMultipleAllocations": True,
                              "capacity": {"memory": {"value": "8Gi"}}}]}})
    for name in ("m-0", "m-1", "m-2"):
        create(kube, "namespaces/default/resourceclaims", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu", "capacity": {"requests": {"memory": "4Gi"}}}}]}}})
    make_scheduler()
    for name in ("m-0", "m-1", "m-2"):
        create_pod(kube, f"pod-{name}", name)
    assert {wait_bound(kube, f"pod-{n}") for n in ("m-0", "m-1")} == {"node-2"}
    wait_failure(kube, "pod-m-2", "cannot allocate all claims")
    results = [get_claim(kube, n)["status"]["allocation"]["devices"]["results"][0] for n in ("m-0", "m-1")]
    assert [r["device"] for r in results] == ["big", "big"]
    assert all(r["consumedCapacity"] == {"memory": "4Gi"} for r in results)
    assert results[0]["shareID"] != results[1]["shareID"]
