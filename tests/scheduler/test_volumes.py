"""The standalone scheduler with volumes, end to end on the API server (fake, or real under envtest).

Every rule of the issue: a missing claim keeps the pod Pending with kube-scheduler's reason
and nothing is bound; a bound claim's volume pins the pod to its node; unbound
WaitForFirstConsumer claims get a volume (static: the PV's claimRef; dynamic: the claim's
selected-node) and the pod is bound only once the claims are bound, by the test-side
controllers of tests/storage_controllers.py; faults at bind time undo the reservation, say
why in a FailedScheduling event and retry.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from extender import metrics
from extender.policy.builtin import VolumeBinding
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from extender.scheduler.profiles import Profile
from tests.fakeapi.fixtures import fake_only
from tests.fakeapi.patches import MERGE_PATCH
from tests.scheduler.conftest import SCHEDULER_NAME
from tests.storage_controllers import (
    StorageControllers,
    bind,
    create_storage,
    get_claim,
    get_volume,
)
from tests.storage_objects import (
    FAST,
    HOSTNAME,
    SELECTED_NODE,
    ZONE,
    claim,
    claim_volumes,
    csi_node,
    local_class,
    persistent_volume,
    storage_class,
)

pytestmark = pytest.mark.apiserver



def profile(bind_timeout: int = 600) -> Profile:
    policy = default_policy("standalone")
    filters = tuple(VolumeBinding(bind_timeout) if f.name == "VolumeBinding" else f for f in policy.filters)
    return Profile.from_engine(SCHEDULER_NAME, Engine(replace(policy, filters=filters)))


def create_pod(kube: Any, name: str, *claims: str, **kwargs: Any) -> dict[str, Any]:
    return kube.create_pod(name, scheduler_name=SCHEDULER_NAME, spec={"volumes": claim_volumes(claims)}, **kwargs)


def node_of(kube: Any, name: str) -> str:
    return ((kube.get_pod(name) or {}).get("spec") or {}).get("nodeName") or ""


def wait_bound(kube: Any, name: str, timeout: float = 10.0) -> str:
    return kube.wait_for(lambda: node_of(kube, name), timeout=timeout, message=f"pod {name} bound")


def failures(kube: Any, name: str) -> list[str]:
    return [e["message"] for e in kube.list_events("default", reason="FailedScheduling", involved_name=name)]


def wait_failure(kube: Any, name: str, text: str, timeout: float = 10.0) -> str:
    return kube.wait_for(lambda: next((m for m in failures(kube, name) if text in m), None),
                         timeout=timeout, message=f"FailedScheduling for {name} with {text!r}")


def three_nodes(kube: Any, **labels: dict[str, str]) -> None:
    for name in ("node-1", "node-2", "node-3"):
        kube.create_node(name, labels=labels.get(name.replace("-", "_")))


def binding_posts(apiserver: Any, name: str) -> int:
    if apiserver.fake is None:
        return 0
    return len(apiserver.fake.requests_matching("POST", rf"/pods/{name}/binding$"))


def test_missing_claim_keeps_the_pod_pending_until_the_claim_exists(apiserver, kube, make_scheduler):
    three_nodes(kube)
    make_scheduler([profile()])
    create_pod(kube, "web", "nope")
    message = wait_failure(kube, "web", "nope")
    assert message == ('0/3 nodes are available: persistentvolumeclaim "nope" not found. '
                       "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    time.sleep(0.3)
    assert node_of(kube, "web") == "" and binding_posts(apiserver, "web") == 0
    # The claim appears, bound to a volume on node-2: the storage event brings the pod back.
    create_storage(kube, local_class(), persistent_volume("pv", node="node-2"), claim("nope"))
    bind(kube, "nope", "pv")
    assert wait_bound(kube, "web") == "node-2"


def test_claims_bound_to_local_volumes_pin_their_pods(kube, make_scheduler):
    three_nodes(kube)
    create_storage(kube, local_class())
    placement = {"a": "node-3", "b": "node-1", "c": "node-2", "d": "node-3"}
    for name, node in placement.items():
        create_storage(kube, persistent_volume(f"pv-{name}", node=node), claim(f"data-{name}"))
        bind(kube, f"data-{name}", f"pv-{name}")
    make_scheduler([profile()])
    for name in placement:
        create_pod(kube, f"db-{name}", f"data-{name}")
    assert {name: wait_bound(kube, f"db-{name}") for name in placement} == placement


def test_unbound_immediate_claim_waits_for_the_pv_controller(kube, make_scheduler):
    three_nodes(kube)
    create_storage(kube, storage_class("now", mode="Immediate"), claim("data", cls="now"))
    make_scheduler([profile()])
    create_pod(kube, "web", "data")
    assert wait_failure(kube, "web", "immediate") == (
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")


def test_static_provisioning_reserves_the_volume_and_binds_after_the_pv_controller(kube, make_scheduler):
    three_nodes(kube)
    create_storage(kube, local_class(), persistent_volume("big", node="node-3", size="100Gi"),
                   persistent_volume("small", node="node-3"), persistent_volume("tiny", node="node-3", size="1Gi"),
                   claim("data", size="5Gi"))
    make_scheduler([profile()])
    with StorageControllers(kube):
        create_pod(kube, "db", "data")
        assert wait_bound(kube, "db") == "node-3"
    volume = get_volume(kube, "small")  # the smallest that fits
    assert volume["spec"]["claimRef"]["name"] == "data"
    assert volume["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert get_claim(kube, "data")["spec"]["volumeName"] == "small"
    assert get_volume(kube, "big")["spec"].get("claimRef") is None


def test_dynamic_provisioning_selects_a_node_in_the_allowed_topology(kube, make_scheduler):
    three_nodes(kube, node_1={ZONE: "a"}, node_2={ZONE: "b"}, node_3={ZONE: "b"})
    create_storage(kube, storage_class(FAST, topologies=[{ZONE: ["a"]}]), claim("data", cls=FAST))
    make_scheduler([profile()])
    with StorageControllers(kube) as controllers:
        create_pod(kube, "db", "data")
        assert wait_bound(kube, "db") == "node-1"
    annotations = get_claim(kube, "data")["metadata"]["annotations"]
    assert annotations[SELECTED_NODE] == "node-1" and controllers.provisioned


def test_pods_sharing_a_claim_being_provisioned_follow_its_selected_node(kube, make_scheduler):
    three_nodes(kube)
    create_storage(kube, storage_class(FAST), claim("shared", cls=FAST, modes=["ReadWriteMany"]))
    make_scheduler([profile()])
    with StorageControllers(kube):
        for i in range(3):
            create_pod(kube, f"w{i}", "shared")
        nodes = {wait_bound(kube, f"w{i}") for i in range(3)}
    assert nodes == {get_claim(kube, "shared")["metadata"]["annotations"][SELECTED_NODE]}


def test_the_pod_is_not_bound_until_its_claims_are_and_the_wait_is_bounded(apiserver, kube, make_scheduler):
    three_nodes(kube)
    create_storage(kube, local_class(), persistent_volume("pv", node="node-2"), claim("data"))
    make_scheduler([profile(bind_timeout=1)])
    errors = metrics.BIND_ERRORS.labels(reason="volume-binding")._value.get()
    timeouts = metrics.VOLUME_WAITS.labels(outcome="timeout")._value.get()
    create_pod(kube, "db", "data")
    message = wait_failure(kube, "db", "timed out")
    assert metrics.BIND_ERRORS.labels(reason="volume-binding")._value.get() > errors
    assert metrics.VOLUME_WAITS.labels(outcome="timeout")._value.get() > timeouts
    assert message == ("Binding rejected: binding volumes: timed out after 1s waiting for claim(s) "
                       "default/data to be bound")
    assert node_of(kube, "db") == "" and binding_posts(apiserver, "db") == 0
    # As kube-scheduler, the claimRef written stays: the PV controller finishes from there.
    assert get_volume(kube, "pv")["spec"]["claimRef"]["name"] == "data"
    with StorageControllers(kube):
        assert wait_bound(kube, "db", timeout=20) == "node-2"


def test_stopping_ends_a_wait_for_volumes_at_once(kube, make_scheduler):
    three_nodes(kube)
    create_storage(kube, local_class(), persistent_volume("pv", node="node-1"), claim("data"))
    scheduler = make_scheduler([profile()])
    create_pod(kube, "db", "data")
    kube.wait_for(lambda: get_volume(kube, "pv")["spec"].get("claimRef"), message="claimRef written")
    assert scheduler.binds.in_flight == 1  # waiting for the PV controller
    scheduler.stop(timeout=5)
    # Had the wait gone on (600 s), the drain would have timed out with the bind still in flight.
    assert scheduler.binds.in_flight == 0
    assert node_of(kube, "db") == ""


def test_a_read_write_once_pod_claim_is_used_by_one_pod_at_a_time(kube, make_scheduler):
    three_nodes(kube)
    create_storage(kube, local_class(), persistent_volume("pv", node="node-1", modes=["ReadWriteOncePod"]),
                   claim("solo", modes=["ReadWriteOncePod"]))
    bind(kube, "solo", "pv")
    make_scheduler([profile()])
    create_pod(kube, "first", "solo")
    assert wait_bound(kube, "first") == "node-1"
    create_pod(kube, "second", "solo")
    assert wait_failure(kube, "second", "ReadWriteOncePod") == (
        "0/3 nodes are available: 3 node(s) unavailable due to PersistentVolumeClaim with "
        "ReadWriteOncePod access mode already in-use by another pod. "
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")
    kube.delete_pod("first", grace_period_seconds=0)
    assert wait_bound(kube, "second") == "node-1"


def test_csi_attach_limits(kube, make_scheduler):
    three_nodes(kube)
    create_storage(kube, storage_class(FAST, mode="Immediate"),
                   csi_node("node-1", {"csi.example.com": 1}), csi_node("node-2", {"csi.example.com": 0}),
                   csi_node("node-3", {"csi.example.com": 1}))
    for name in ("old", "new"):
        create_storage(kube, persistent_volume(f"pv-{name}", cls=FAST, csi=("csi.example.com", name)),
                       claim(name, cls=FAST))
        bind(kube, name, f"pv-{name}")
    kube.create_pod("holder", node_name="node-3", spec={"volumes": claim_volumes(["old"])})
    make_scheduler([profile()])
    create_pod(kube, "web", "new")
    assert wait_bound(kube, "web") == "node-1"


@fake_only("fails the PersistentVolume write with 500 on demand (the fake's fail_next)")
def test_a_failed_volume_write_undoes_the_reservation_reports_and_retries(apiserver, kube, make_scheduler):
    three_nodes(kube)
    create_storage(kube, local_class(), persistent_volume("pv", node="node-3"), claim("data"))
    apiserver.fake.fail_next(1, status=500, path_regex=r"^/api/v1/persistentvolumes/pv$", method="PUT")
    make_scheduler([profile()])
    with StorageControllers(kube):
        create_pod(kube, "db", "data")
        message = wait_failure(kube, "db", "persistentvolume pv")
        assert message.startswith("Binding rejected: updating persistentvolume pv failed: ")
        assert wait_bound(kube, "db", timeout=15) == "node-3"  # the next attempt after the backoff


@fake_only("holds the PersistentVolume watch back and cuts the streams (the fake's delay, drop_watches)")
def test_a_volume_taken_between_filter_and_bind_is_noticed(apiserver, kube, make_scheduler):
    """Another binder takes the PV while the scheduler's cache is stale: the bind step reads
    the PV, sees it changed and schedules the pod again instead of overwriting the claimRef."""
    fake = apiserver.fake
    three_nodes(kube)
    create_storage(kube, local_class(), persistent_volume("pv-a", node="node-1"),
                   persistent_volume("pv-b", node="node-2"), claim("data"), claim("rival"))
    make_scheduler([profile()])
    # Blind the scheduler to PV changes for a while: cut the watches, hold the PV reconnection.
    fake.delay(5.0, path_regex=r"^/api/v1/persistentvolumes\?.*watch=", count=1)
    assert fake.drop_watches() > 0
    bind(kube, "rival", "pv-a")
    prefer_node_1 = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100,
                     "preference": {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["node-1"]}]}}]}}
    with StorageControllers(kube):
        create_pod(kube, "db", "data", affinity=prefer_node_1)
        message = wait_failure(kube, "db", "pv-a")
        assert message.startswith("Binding rejected: persistentvolume pv-a changed since it was chosen for claim "
                                  "default/data")
        assert wait_bound(kube, "db", timeout=20) == "node-2"
    assert get_volume(kube, "pv-a")["spec"]["claimRef"]["name"] == "rival"


def test_node_affinity_of_a_zonal_volume(kube, make_scheduler):
    three_nodes(kube, node_1={ZONE: "a"}, node_2={ZONE: "b"}, node_3={ZONE: "a"})
    zonal = persistent_volume("disk", cls=FAST, csi=("csi.example.com", "d1"), labels={ZONE: "b"},
                              affinity={"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                  {"key": ZONE, "operator": "In", "values": ["b"]}]}]}})
    create_storage(kube, storage_class(FAST), zonal, claim("data", cls=FAST))
    bind(kube, "data", "disk")
    make_scheduler([profile()])
    create_pod(kube, "db", "data")
    assert wait_bound(kube, "db") == "node-2"


@fake_only("holds the bind step's node read back 3 s (the fake's delay) and reads its request log")
def test_a_bound_claim_deleted_between_filter_and_bind_stops_the_bind(apiserver, kube, make_scheduler):
    fake = apiserver.fake
    three_nodes(kube)
    create_storage(kube, local_class(), persistent_volume("pv", node="node-2"), claim("data"))
    bind(kube, "data", "pv")
    make_scheduler([profile()])
    # Hold the bind step's first read (the node) while the claim goes away.
    node_read = r"^/api/v1/nodes/node-2$"
    fake.delay(3.0, path_regex=node_read, method="GET", count=1)
    create_pod(kube, "db", "data")
    kube.wait_for(lambda: fake.requests_matching("GET", node_read), message="the bind step started")
    claim_path = "/api/v1/namespaces/default/persistentvolumeclaims/data"
    kube.call("PATCH", claim_path, {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
    kube.call("DELETE", claim_path)
    assert wait_failure(kube, "db", "no longer exists") == \
        "Binding rejected: persistentvolumeclaim default/data no longer exists"
    assert binding_posts(apiserver, "db") == 0
    wait_failure(kube, "db", 'persistentvolumeclaim "data" not found')  # the next attempt
    assert node_of(kube, "db") == ""


def test_a_pod_waiting_for_its_volumes_does_not_hold_up_other_binds(kube, make_scheduler):
    three_nodes(kube)
    create_storage(kube, local_class(), persistent_volume("pv", node="node-1"), claim("data"))
    scheduler = make_scheduler([profile()], parallel_binds=1)
    create_pod(kube, "db", "data")
    kube.wait_for(lambda: get_volume(kube, "pv")["spec"].get("claimRef"), message="db waiting for its volume")
    kube.create_pod("web", scheduler_name=SCHEDULER_NAME)
    assert wait_bound(kube, "web")  # the only bind worker is free: the wait runs elsewhere
    # web's worker may still be finishing its bookkeeping when the API shows the bind.
    kube.wait_for(lambda: scheduler.binds.in_flight == 1, message="only db's bind in flight")
    assert node_of(kube, "db") == ""
