"""The claim gate (DynamicResources' PreEnqueue): pods whose claims are not there wait untried, and the
claim they wait for lets them in."""

from __future__ import annotations

from typing import Any

from extender.cluster import dra_store
from extender.cluster.state import ClusterState
from extender.model.pods import PodView
from extender.scheduler.claim_gate import ClaimGate
from extender.scheduler.queueing import GATED, SchedulingQueue


def pod(name: str, **spec: Any) -> PodView:
    return PodView.from_dict({"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                              "spec": {"containers": [{"name": "c"}], **spec}})


def claim(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}


def setup() -> tuple[ClusterState, ClaimGate, SchedulingQueue]:
    state = ClusterState()
    state.dra_store.replace(dra_store.CLAIMS, [])
    gate = ClaimGate(state.dra_store)
    return state, gate, SchedulingQueue(claims_ready=gate.admits, publish_metrics=False)


def test_a_pod_waits_untried_for_its_claim_and_the_claim_lets_it_in() -> None:
    state, gate, queue = setup()
    queue.add(pod("p", resourceClaims=[{"name": "g", "resourceClaimName": "gpu"}]), "ours")
    queue.add(pod("plain"), "ours")
    assert queue.where("default/p") == GATED and queue.where("default/plain") == "active"
    state.dra_store.upsert(dra_store.CLAIMS, claim("other"))
    assert queue.ungate(gate.waiting_on("default/other")) == 0
    state.dra_store.upsert(dra_store.CLAIMS, claim("gpu"))
    assert queue.ungate(gate.waiting_on("default/gpu")) == 1
    assert queue.where("default/p") == "active"
    assert gate.waiting_on("default/gpu") == []  # nothing left behind


def test_a_template_pod_is_let_in_by_its_own_status_update() -> None:
    state, gate, queue = setup()
    spec = {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "tpl"}]}
    queue.add(pod("t", **spec), "ours")
    assert queue.where("default/t") == GATED
    state.dra_store.upsert(dra_store.CLAIMS, {**claim("t-g-1"), "metadata": {
        "name": "t-g-1", "namespace": "default", "uid": "c1",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "t", "uid": "uid-t", "controller": True}]}})
    updated = PodView.from_dict({"metadata": {"name": "t", "namespace": "default", "uid": "uid-t"},
                                 "spec": {"containers": [{"name": "c"}], **spec},
                                 "status": {"resourceClaimStatuses": [{"name": "g", "resourceClaimName": "t-g-1"}]}})
    queue.add(updated, "ours")
    assert queue.where("default/t") == "active"


def test_a_full_list_of_claims_asks_for_every_pod_held() -> None:
    state, gate, queue = setup()
    for name in ("a", "b"):
        queue.add(pod(name, resourceClaims=[{"name": "g", "resourceClaimName": name}]), "ours")
    state.dra_store.replace(dra_store.CLAIMS, [claim("a"), claim("b")])
    assert queue.ungate(gate.waiting_on("")) == 2
