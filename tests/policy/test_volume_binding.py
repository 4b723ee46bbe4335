"""VolumeBinding through the engine: kube-scheduler v1.36's claims, volumes and reasons, per rule."""

from __future__ import annotations

import pytest

from extender.model.pods import PodView
from extender.policy.builtin import VolumeBinding, VolumeBindingScore
from extender.policy.engine import Engine, PluginError, Policy, WeightedScorer
from extender.policy.reservations import Reservation, release_all
from extender.policy.status import Status
from extender.policy.volume_actions import AwaitVolumes, BindVolume, CheckVolumes, SelectNode
from tests.storage_objects import (
    CSI_DRIVER,
    FAST,
    ZONE,
    claim,
    csi_driver,
    local_class,
    persistent_volume,
    storage_capacity,
    storage_class,
    with_volumes,
)

from .builders import pod_dict
from .storage_cluster import cluster, decide, feasible, nodes, refusals

ONLY = Policy(filters=(VolumeBinding(),))
NODES = nodes("node-1", "node-2", "node-3")
NOT_FOUND_NODE = "node(s) didn't find available persistent volumes to bind"
AFFINITY = "node(s) didn't match PersistentVolume's node affinity"


def pod(*claims: str, name: str = "p", **kwargs):
    return with_volumes(pod_dict(name), claims, **kwargs)


def only(decision, plugin="VolumeBinding"):
    """Every refusal, asserting each is the given plugin's and unresolvable: node -> reasons."""
    found = refusals(decision)
    assert all(p == plugin and unresolvable for p, _, unresolvable in found.values()), found
    return {node: reasons for node, (_, reasons, _) in found.items()}


# ---- PreFilter: the claims themselves --------------------------------------------------------


def test_missing_claim_keeps_the_pod_pending_with_kube_schedulers_reason():
    decision = decide(pod("nope"), cluster(NODES))
    assert feasible(decision) == []
    # VolumeRestrictions runs first in kube-scheduler's order and says it first.
    assert set(refusals(decision).values()) == {
        ("VolumeRestrictions", ('persistentvolumeclaim "nope" not found',), True)}
    assert decision.summary() == '0/3 nodes are available: persistentvolumeclaim "nope" not found.'
    alone = decide(pod("nope"), cluster(NODES), ONLY)
    assert set(only(alone).values()) == {('persistentvolumeclaim "nope" not found',)}


@pytest.mark.parametrize(("obj", "reason"), [
    (claim("data", deleting=True), 'persistentvolumeclaim "data" is being deleted'),
    (claim("data", volume="gone", phase="Lost"),
     'persistentvolumeclaim "data" bound to non-existent persistentvolume "gone"'),
])
def test_claims_that_cannot_be_used(obj, reason):
    decision = decide(pod("data"), cluster(NODES, local_class(), obj))
    assert set(only(decision).values()) == {(reason,)}


@pytest.mark.parametrize("obj", [
    claim("data", cls="quick"),  # class Immediate: the PV controller binds it
    claim("data", cls=None),  # no class: Immediate
    claim("data", cls="missing"),  # unknown class: treated as Immediate, as IsDelayBindingMode does
    claim("data", volume="pv-1"),  # pre-bound by name but not bound yet
], ids=["immediate-class", "no-class", "unknown-class", "pre-bound"])
def test_unbound_immediate_claims(obj):
    state = cluster(NODES, local_class(), storage_class("quick", mode="Immediate"), obj,
                    persistent_volume("pv-1", node="node-1"))
    decision = decide(pod("data"), state)
    assert set(only(decision).values()) == {("pod has unbound immediate PersistentVolumeClaims",)}
    assert "default/data" in next(iter(decision.failed.values())).detail


def test_ephemeral_volume_claims():
    spec = pod(name="p", ephemeral=["scratch"])
    uid = spec["metadata"]["uid"]
    waiting = decide(spec, cluster(NODES, local_class()))
    assert set(only(waiting).values()) == {
        ('waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"',)}
    foreign = decide(spec, cluster(NODES, local_class(), claim("p-scratch", owner=("q", "uid-q"))))
    assert set(only(foreign).values()) == {
        ("PVC default/p-scratch was not created for pod default/p (pod is not owner)",)}
    mine = cluster(NODES, local_class(), claim("p-scratch", owner=("p", uid)), persistent_volume("pv", node="node-2"))
    assert feasible(decide(spec, mine)) == ["node-2"]


# ---- Filter: bound claims ---------------------------------------------------------------------


def test_bound_claim_pins_the_pod_to_its_volume_node():
    state = cluster(NODES, local_class(), claim("data", volume="pv-1", bound=True),
                    persistent_volume("pv-1", node="node-2", claim=("default", "data"), phase="Bound"))
    decision = decide(pod("data"), state)
    assert feasible(decision) == ["node-2"]
    assert only(decision) == {"node-1": (AFFINITY,), "node-3": (AFFINITY,)}
    assert "PV pv-1" in decision.failed["node-1"].detail
    assert "kubernetes.io/hostname In ['node-2']" in decision.failed["node-1"].detail


def test_bound_claim_without_volume_node_affinity_fits_everywhere():
    state = cluster(NODES, claim("data", volume="pv-1", bound=True, cls=FAST),
                    persistent_volume("pv-1", cls=FAST, csi=(CSI_DRIVER, "h1"), claim=("default", "data")))
    assert feasible(decide(pod("data"), state)) == ["node-1", "node-2", "node-3"]


def test_bound_claim_whose_volume_is_gone():
    state = cluster(NODES, local_class(), claim("data", volume="gone", bound=True))
    alone = decide(pod("data"), state, ONLY)
    assert set(only(alone).values()) == {
        ("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",)}
    # In the full policy VolumeZone's PreFilter reads the volume first, as in kube-scheduler.
    assert set(refusals(decide(pod("data"), state)).values()) == {
        ("VolumeZone", ('persistentvolume "gone" not found',), True)}


# ---- Filter: WaitForFirstConsumer, static volumes -----------------------------------------------


def test_local_volumes_decide_the_node():
    state = cluster(NODES, local_class(), claim("data"),
                    persistent_volume("pv-1", node="node-1"), persistent_volume("pv-3", node="node-3"))
    decision = decide(pod("data"), state)
    assert feasible(decision) == ["node-1", "node-3"]
    assert only(decision) == {"node-2": (NOT_FOUND_NODE,)}
    assert "no available PV of class local-storage fits claim default/data (1Gi, ReadWriteOnce)" in \
        decision.failed["node-2"].detail


@pytest.mark.parametrize(("volume", "fits"), [
    (persistent_volume("pv", node="node-1", size="512Mi"), False),  # too small
    (persistent_volume("pv", node="node-1", modes=["ReadOnlyMany"]), False),  # access mode
    (persistent_volume("pv", node="node-1", volume_mode="Block"), False),  # volume mode
    (persistent_volume("pv", node="node-1", cls="other"), False),  # class
    (persistent_volume("pv", node="node-1", phase="Pending"), False),  # not Available yet
    (persistent_volume("pv", node="node-1", phase="Released"), False),
    (persistent_volume("pv", node="node-1", claim=("default", "other")), False),  # someone else's
    (persistent_volume("pv", node="node-1", claim=("default", "data"), phase="Pending"), True),  # pre-bound
    (persistent_volume("pv", node="node-1", modes=["ReadWriteOnce", "ReadOnlyMany"]), True),
    (persistent_volume("pv", node="node-1", size="1Gi"), True),
], ids=["small", "modes", "block", "class", "pending", "released", "taken", "pre-bound", "more-modes", "exact"])
def test_static_volume_matching(volume, fits):
    state = cluster(NODES, local_class(), claim("data", uid="uid-data"), volume)
    assert feasible(decide(pod("data"), state)) == (["node-1"] if fits else [])


def test_claim_selector_picks_volumes_by_label():
    state = cluster(NODES, local_class(), claim("data", selector={"matchLabels": {"tier": "gold"}}),
                    persistent_volume("plain", node="node-1"),
                    persistent_volume("gold", node="node-2", labels={"tier": "gold"}))
    assert feasible(decide(pod("data"), state)) == ["node-2"]


def test_each_claim_needs_its_own_volume():
    state = cluster(NODES, local_class(), claim("a"), claim("b", size="5Gi"),
                    persistent_volume("pv-1a", node="node-1"),
                    persistent_volume("pv-2a", node="node-2"), persistent_volume("pv-2b", node="node-2"))
    assert feasible(decide(pod("a", "b"), state)) == ["node-2"]


def test_reserve_takes_the_smallest_volume_and_the_next_pod_sees_it_taken():
    state = cluster(NODES, local_class(), claim("a", uid="uid-a"), claim("b", uid="uid-b"),
                    persistent_volume("big", node="node-1", size="50Gi"),
                    persistent_volume("small", node="node-1", size="2Gi"))
    engine = Engine(ONLY)
    first = PodView.from_dict(pod("a", name="first"))
    reserved = engine.reserve(first, state.node_info("node-1"), state)
    assert isinstance(reserved, list) and len(reserved) == 1
    actions = reserved[0].actions
    assert [type(a) for a in actions] == [BindVolume, AwaitVolumes]
    assert actions[0].volume == "small" and actions[0].claim.key == "default/a" and actions[0].claim.uid == "uid-a"
    assert actions[1].bindings == (("small", actions[0].claim),) and actions[1].node == "node-1"
    assert state.volumes.volume("small").claim_ref.name == "a"  # assumed
    assert state.volumes.stored_volume("small").claim_ref is None  # not written
    second = decide(pod("b", name="second"), state, ONLY)
    assert feasible(second) == ["node-1"]  # "big" is left
    release_all(reserved)
    assert state.volumes.volume("small").claim_ref is None


def test_a_volume_assumed_for_one_pod_is_not_offered_to_another():
    state = cluster(NODES, local_class(), claim("a"), claim("b"), persistent_volume("only", node="node-1"))
    engine = Engine(ONLY)
    reserved = engine.reserve(PodView.from_dict(pod("a", name="first")), state.node_info("node-1"), state)
    assert isinstance(reserved, list)
    assert feasible(decide(pod("b", name="second"), state, ONLY)) == []
    release_all(reserved)
    assert feasible(decide(pod("b", name="second"), state, ONLY)) == ["node-1"]


# ---- Filter: WaitForFirstConsumer, dynamic provisioning -----------------------------------------


def zoned_nodes():
    return nodes("a-1", "a-2", "b-1", a_1={ZONE: "a"}, a_2={ZONE: "a"}, b_1={ZONE: "b"})


def test_provisioning_follows_allowed_topologies():
    state = cluster(zoned_nodes(), storage_class(FAST, topologies=[{ZONE: ["a"]}]), claim("data", cls=FAST))
    decision = decide(pod("data"), state)
    assert feasible(decision) == ["a-1", "a-2"]
    assert only(decision) == {"b-1": (NOT_FOUND_NODE,)}
    assert "outside class fast's allowedTopologies" in decision.failed["b-1"].detail


def test_a_class_without_provisioner_cannot_provision():
    state = cluster(NODES, local_class(), claim("data"))
    assert set(only(decide(pod("data"), state)).values()) == {(NOT_FOUND_NODE,)}


def test_static_volumes_are_preferred_and_provisioning_covers_the_rest():
    state = cluster(zoned_nodes(), storage_class(FAST), claim("data", cls=FAST),
                    persistent_volume("pv", cls=FAST, node="b-1"))
    engine = Engine(ONLY)
    view = PodView.from_dict(pod("data"))
    on_b = engine.reserve(view, state.node_info("b-1"), state)
    assert [type(a) for a in on_b[0].actions] == [BindVolume, AwaitVolumes]
    release_all(on_b)
    on_a = engine.reserve(view, state.node_info("a-1"), state)
    assert [type(a) for a in on_a[0].actions] == [SelectNode, AwaitVolumes]
    assert on_a[0].actions[0].node == "a-1"


def test_selected_node_pins_the_claim_and_reserve_sets_it():
    state = cluster(zoned_nodes(), storage_class(FAST), claim("shared", cls=FAST))
    engine = Engine(ONLY)
    reserved = engine.reserve(PodView.from_dict(pod("shared", name="first")), state.node_info("a-2"), state)
    assert state.volumes.claim("default", "shared").selected_node == "a-2"
    decision = decide(pod("shared", name="second"), state, ONLY)
    assert feasible(decision) == ["a-2"]
    assert "being provisioned for node a-2" in decision.failed["a-1"].detail
    release_all(reserved)
    assert state.volumes.claim("default", "shared").selected_node is None
    annotated = cluster(zoned_nodes(), storage_class(FAST), claim("shared", cls=FAST, selected_node="b-1"))
    assert feasible(decide(pod("shared"), annotated)) == ["b-1"]


def test_storage_capacity_of_drivers_that_publish_it():
    objects = [storage_class(FAST), claim("data", cls=FAST, size="5Gi"), csi_driver(CSI_DRIVER),
               storage_capacity("cap-a", FAST, capacity="4Gi", maximum="6Gi", labels={ZONE: "a"}),
               storage_capacity("cap-b", FAST, capacity="4Gi", labels={ZONE: "b"}),
               storage_capacity("nowhere", FAST, capacity="100Gi", labels=None)]
    decision = decide(pod("data"), cluster(zoned_nodes(), *objects))
    assert feasible(decision) == ["a-1", "a-2"]  # maximumVolumeSize 6Gi wins over capacity 4Gi
    assert only(decision) == {"b-1": ("node(s) did not have enough free storage",)}
    unpublished = [*objects[:2], csi_driver(CSI_DRIVER, storage_capacity=False), *objects[3:]]
    assert feasible(decide(pod("data"), cluster(zoned_nodes(), *unpublished))) == ["a-1", "a-2", "b-1"]


def test_several_reasons_on_one_node_are_all_counted():
    state = cluster(NODES, local_class(), claim("bound", volume="pv-2", bound=True), claim("data"),
                    persistent_volume("pv-2", node="node-2", claim=("default", "bound"), phase="Bound"))
    decision = decide(pod("bound", "data"), state, ONLY)
    assert only(decision)["node-1"] == (AFFINITY, NOT_FOUND_NODE)
    assert decision.summary() == ("0/3 nodes are available: 2 node(s) didn't match PersistentVolume's node "
                                  "affinity, 3 node(s) didn't find available persistent volumes to bind.")


def test_reserve_refuses_a_node_that_no_longer_fits_and_assumes_nothing():
    state = cluster(NODES, local_class(), claim("data"), persistent_volume("pv", node="node-1"))
    result = Engine(ONLY).reserve(PodView.from_dict(pod("data")), state.node_info("node-2"), state)
    assert isinstance(result, Status) and result.reasons == (NOT_FOUND_NODE,)
    assert state.volumes.volume("pv").claim_ref is None


def test_reserve_fails_cleanly_when_a_volume_changed_under_it():
    state = cluster(NODES, local_class(), claim("a"), claim("b"),
                    persistent_volume("pv-a", node="node-1"), persistent_volume("pv-b", node="node-1", size="20Gi"))
    view = PodView.from_dict(pod("a", "b"))
    original = state.volumes.assume_volume
    calls = []

    def flaky(volume):
        calls.append(volume.name)
        if len(calls) == 2:
            raise ValueError("out of sync")
        original(volume)

    state.volumes.assume_volume = flaky  # type: ignore[method-assign]
    with pytest.raises(PluginError, match="out of sync"):
        Engine(ONLY).reserve(view, state.node_info("node-1"), state)
    assert all(state.volumes.volume(n).claim_ref is None for n in ("pv-a", "pv-b"))  # first one undone


def test_bound_claims_are_only_checked_again_at_bind_time():
    state = cluster(NODES, local_class(), claim("data", volume="pv", bound=True, uid="uid-data"),
                    persistent_volume("pv", node="node-1", claim=("default", "data")))
    (reserved,) = Engine(ONLY).reserve(PodView.from_dict(pod("data")), state.node_info("node-1"), state)
    assert reserved.release is None  # nothing assumed
    (check,) = reserved.actions
    assert isinstance(check, CheckVolumes) and check.node == "node-1"
    assert [(name, ref.key, ref.uid) for name, ref in check.bound] == [("pv", "default/data", "uid-data")]


def test_bind_timeout_argument():
    assert VolumeBinding.from_args({"bindTimeoutSeconds": 30}).bind_timeout_seconds == 30
    with pytest.raises(Exception, match="bindTimeoutSeconds"):
        VolumeBinding.from_args({"bindTimeoutSeconds": 0})
    with pytest.raises(Exception, match="unknown argument"):
        VolumeBinding.from_args({"timeout": 1})
    state = cluster(NODES, local_class(), claim("data"), persistent_volume("pv", node="node-1"))
    reserved = Engine(Policy(filters=(VolumeBinding(30),))).reserve(
        PodView.from_dict(pod("data")), state.node_info("node-1"), state)
    assert isinstance(reserved[0], Reservation) and reserved[0].actions[-1].timeout == 30


# ---- the opt-in scorer ----------------------------------------------------------------------


def test_opt_in_scorer_prefers_the_roomier_volume_by_default():
    state = cluster(NODES, local_class(), claim("data", size="5Gi"),
                    persistent_volume("tight", node="node-1", size="5Gi"),
                    persistent_volume("roomy", node="node-2", size="50Gi"))
    policy = Policy(filters=(VolumeBinding(),), scorers=(WeightedScorer(VolumeBindingScore(), 1),))
    decision = decide(pod("data"), state, policy)
    scores = dict(zip([i.name for i in decision.scored], decision.raw_scores["VolumeBinding"], strict=True))
    assert scores == {"node-1": 0, "node-2": 90}  # 100% and 10% used; shape (0,10) -> (100,0)
    packing = VolumeBindingScore.from_args({"shape": [{"utilization": 0, "score": 0},
                                                      {"utilization": 100, "score": 10}]})
    decision = decide(pod("data"), state, Policy(filters=(VolumeBinding(),),
                                                 scorers=(WeightedScorer(packing, 1),)))
    scores = dict(zip([i.name for i in decision.scored], decision.raw_scores["VolumeBinding"], strict=True))
    assert scores == {"node-1": 100, "node-2": 10}


def test_scorer_arguments_are_checked():
    for bad, match in ([{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}], "greater"), \
            ([{"utilization": 0, "score": 11}], "score"), ("x", "shape"):
        with pytest.raises(Exception, match=match):
            VolumeBindingScore.from_args({"shape": bad})
