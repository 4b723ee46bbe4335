"""VolumeCandidates (per pod, then per node through an index) against FindMatchingVolume as written upstream."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.model.volumes import Claim, Volume
from extender.policy.builtin.volume_matching import VolumeCandidates
from tests.storage_objects import claim as claim_dict
from tests.storage_objects import persistent_volume


def find_matching_volume(claim: Claim, volumes: Sequence[Volume], labels: Mapping[str, str],
                         excluded: set[str]) -> Volume | None:
    """component-helpers' FindMatchingVolume on the scheduler's path, one volume at a time, in order."""
    smallest = None
    for volume in volumes:
        if volume.name in excluded:
            continue
        if volume.claim_ref is not None and not volume.bound_to(claim):
            continue
        if volume.capacity < claim.size or volume.volume_mode != claim.volume_mode:
            continue
        if volume.attributes_class != claim.attributes_class or volume.deleting:
            continue
        affinity_ok = volume.affinity_matches(labels)
        if volume.bound_to(claim):
            return volume if affinity_ok else None
        if volume.phase != "Available":
            continue
        if claim.selector is not None and not claim.selector.matches(volume.labels):
            continue
        if volume.class_name != claim.class_name or not affinity_ok:
            continue
        if not claim.access_modes <= volume.access_modes:
            continue
        if smallest is None or smallest.capacity > volume.capacity:
            smallest = volume
    return smallest


def term(*expressions):
    return {"matchExpressions": [{"key": k, "operator": op, "values": list(v)} for k, op, v in expressions]}


AFFINITIES = [
    None,
    {"required": {"nodeSelectorTerms": [term(("host", "In", ["n1"]))]}},
    {"required": {"nodeSelectorTerms": [term(("host", "In", ["n1", "n2"]))]}},
    {"required": {"nodeSelectorTerms": [term(("zone", "In", ["a"]), ("host", "NotIn", ["n2"]))]}},
    {"required": {"nodeSelectorTerms": [term(("host", "In", ["n2"])), term(("zone", "In", ["b"]))]}},
    {"required": {"nodeSelectorTerms": [term(("host", "NotIn", ["n1"]))]}},
    {"required": {"nodeSelectorTerms": [term(("size", "Gt", ["x"]))]}},  # unreadable: matches nothing
]

volumes = st.builds(
    lambda i, size, cls, modes, phase, ref, affinity, label, block, deleting: _volume(
        i, size, cls, modes, phase, ref, affinity, label, block, deleting),
    # Mostly volumes that could serve the claim, so that several compete (ties on size included).
    st.integers(0, 10**6), st.sampled_from(["2Gi", "10Gi", "10Gi", "50Gi", "1Gi"]),
    st.sampled_from(["local"] * 5 + ["other"]),
    st.sampled_from([["ReadWriteOnce", "ReadWriteMany"]] * 4 + [["ReadWriteOnce"], ["ReadOnlyMany"]]),
    st.sampled_from(["Available"] * 6 + ["Pending", "Released"]),
    st.sampled_from([None] * 8 + [("default", "data"), ("default", "data", "uid-data"), ("default", "data", "old"),
                                  ("default", "other")]),
    st.sampled_from(list(range(len(AFFINITIES))) + [0, 1, 2] * 2), st.sampled_from([None, "gold", "gold"]),
    st.sampled_from([False] * 6 + [True]), st.sampled_from([False] * 6 + [True]),
)


def _volume(i, size, cls, modes, phase, ref, affinity, label, block, deleting) -> Volume:
    raw = persistent_volume(f"pv-{i}", size=size, cls=cls, modes=modes, phase=phase, claim=ref,
                            csi=("csi.example.com", f"h{i}"), labels={"tier": label} if label else None,
                            volume_mode="Block" if block else None)
    if AFFINITIES[affinity] is not None:
        raw["spec"]["nodeAffinity"] = AFFINITIES[affinity]
    if deleting:
        raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return Volume.from_dict(raw)


claims = st.builds(
    lambda size, modes, selector: Claim.from_dict(claim_dict(
        "data", uid="uid-data", size=size, cls="local", modes=modes,
        selector={"matchLabels": {"tier": "gold"}} if selector else None)),
    st.sampled_from(["1Gi", "3Gi", "10Gi"]), st.sampled_from([["ReadWriteOnce"], ["ReadWriteMany"]]),
    st.sampled_from([False, False, True]))
nodes = st.fixed_dictionaries({"host": st.sampled_from(["n1", "n2", "n3"]), "zone": st.sampled_from(["a", "b"])})


@settings(max_examples=400, deadline=None)
@given(claims, st.lists(volumes, max_size=16, unique_by=lambda v: v.name), nodes, st.data())
def test_same_answer_as_find_matching_volume(claim: Claim, pool: list[Volume], labels, data) -> None:
    excluded = set(data.draw(st.lists(st.sampled_from([v.name for v in pool] or ["none"]), max_size=3)))
    expected = find_matching_volume(claim, pool, labels, excluded)
    got = VolumeCandidates.of(claim, pool).match(labels, excluded)
    assert (got.name if got else None) == (expected.name if expected else None)


def test_local_volumes_are_found_through_the_index() -> None:
    claim = Claim.from_dict(claim_dict("data", cls="local-storage"))
    pool = [Volume.from_dict(persistent_volume(f"pv-{n}", node=f"node-{n}")) for n in range(1000)]
    candidates = VolumeCandidates.of(claim, pool)
    assert not candidates.anywhere and len(candidates.pinned["kubernetes.io/hostname"]) == 1000
    assert candidates.match({"kubernetes.io/hostname": "node-7"}, set()).name == "pv-7"
    assert candidates.match({"kubernetes.io/hostname": "node-7"}, {"pv-7"}) is None
