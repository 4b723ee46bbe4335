"""Pod groups of both APIs parsed into one notion; membership; the two status builders."""

from __future__ import annotations

from typing import Any

import pytest

from extender.errors import InvalidObject
from extender.model import podgroups as pg


def v1alpha2(name: str = "pg1", *, policy: Any = None, topology: Any = None, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": policy if policy is not None else {"gang": {"minCount": 3}}}
    if topology is not None:
        spec["schedulingConstraints"] = {"topology": topology}
    return {"apiVersion": pg.API_V1ALPHA2, "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": "u-1", "generation": 2, **meta},
            "spec": spec}


def cosched(name: str = "pg1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": pg.API_COSCHEDULING, "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": "u-2"}, "spec": spec}


def test_v1alpha2_gang() -> None:
    group = pg.parse_pod_group(v1alpha2(topology=[{"key": "topology.kubernetes.io/zone"}]))
    assert group == pg.PodGroup(pg.GroupKey(pg.API_V1ALPHA2, "ns", "pg1"), "u-1", 2, pg.GANG, 3,
                                pg.V1ALPHA2_TIMEOUT_SECONDS, {}, ("topology.kubernetes.io/zone",))
    assert group.is_gang and str(group.key) == "ns/pg1"


def test_v1alpha2_basic_has_a_quorum_of_one() -> None:
    group = pg.parse_pod_group(v1alpha2(policy={"basic": {}}))
    assert (group.policy, group.min_count, group.is_gang) == (pg.BASIC, 1, False)


def test_list_items_without_api_version_need_the_api_named() -> None:
    raw = v1alpha2()
    del raw["apiVersion"]
    with pytest.raises(InvalidObject, match="apiVersion"):
        pg.parse_pod_group(raw)
    assert pg.parse_pod_group(raw, pg.API_V1ALPHA2).min_count == 3


@pytest.mark.parametrize(("policy", "message"), [
    ({}, "exactly one of basic or gang"),
    ({"basic": {}, "gang": {"minCount": 2}}, "exactly one of basic or gang"),
    ({"gang": {}}, r"gang.minCount: expected an integer"),
    ({"gang": {"minCount": 0}}, r"minCount: must be at least 1, got 0"),
    ({"gang": {"minCount": "3"}}, "expected an integer"),
    ({"gang": {"minCount": True}}, "expected an integer"),
    ({"gang": {"minCount": 2**31}}, "int32"),
    ({"gang": []}, r"spec.schedulingPolicy.gang: expected an object"),
    ("gang", r"spec.schedulingPolicy: expected an object"),
])
def test_v1alpha2_bad_policies_name_the_field(policy: Any, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        pg.parse_pod_group(v1alpha2(policy=policy))


def test_v1alpha2_missing_policy_and_bad_topology() -> None:
    raw = v1alpha2()
    del raw["spec"]["schedulingPolicy"]
    with pytest.raises(InvalidObject, match=r"spec.schedulingPolicy: required"):
        pg.parse_pod_group(raw)
    with pytest.raises(InvalidObject, match=r"topology\[0\].key: required"):
        pg.parse_pod_group(v1alpha2(topology=[{}]))
    with pytest.raises(InvalidObject, match=r"topology: at most 1 item, got 2"):
        pg.parse_pod_group(v1alpha2(topology=[{"key": "a"}, {"key": "b"}]))
    with pytest.raises(InvalidObject, match=r"topology: expected a list"):
        pg.parse_pod_group(v1alpha2(topology={"key": "zone"}))


@pytest.mark.parametrize(("raw", "message"), [
    ([], "PodGroup: expected an object"),
    ({"apiVersion": pg.API_V1ALPHA2, "metadata": {"namespace": "ns"}, "spec": {}}, "metadata.name: required"),
    ({"apiVersion": pg.API_V1ALPHA2, "metadata": {"name": "a"}, "spec": {}}, "metadata.namespace: required"),
    ({"apiVersion": "scheduling.volcano.sh/v1beta1", "metadata": {"name": "a"}}, "apiVersion: expected one of"),
])
def test_bad_objects(raw: Any, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        pg.parse_pod_group(raw)


def test_coscheduling_fields() -> None:
    group = pg.parse_pod_group(cosched(minMember=4, scheduleTimeoutSeconds=20,
                                       minResources={"cpu": "3", "memory": "1Gi"}))
    assert group.key == pg.GroupKey(pg.API_COSCHEDULING, "ns", "pg1")
    assert (group.policy, group.min_count, group.timeout) == (pg.GANG, 4, 20.0)
    assert group.min_resources == {"cpu": 3000, "memory": 2**30}
    assert group.topology_keys == ()


def test_coscheduling_defaults() -> None:
    group = pg.parse_pod_group(cosched())
    # minMember is omitempty: absent reads as 0, which Coscheduling's PreFilter and Permit treat like 1.
    assert (group.min_count, group.timeout, group.min_resources) == (1, pg.COSCHEDULING_TIMEOUT_SECONDS, {})


@pytest.mark.parametrize(("spec", "message"), [
    ({"minMember": 0}, r"spec.minMember: must be at least 1, got 0"),
    ({"minMember": 1.5}, "spec.minMember: expected an integer"),
    ({"scheduleTimeoutSeconds": 0}, r"scheduleTimeoutSeconds: must be at least 1"),
    ({"minResources": {"cpu": "lots"}}, r"spec.minResources.cpu"),
    ({"minResources": ["cpu"]}, r"spec.minResources: expected a map"),
])
def test_coscheduling_bad_fields(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        pg.parse_pod_group(cosched(**spec))


def pod(*, group: Any = None, label: str | None = None, namespace: str = "ns") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if group is not None:
        spec["schedulingGroup"] = group
    labels = {pg.POD_GROUP_LABEL: label} if label is not None else {}
    return {"metadata": {"name": "p", "namespace": namespace, "labels": labels}, "spec": spec}


def test_membership() -> None:
    assert pg.group_key_of(pod()) is None
    assert pg.group_key_of(pod(label="")) is None
    assert pg.group_key_of(pod(label="job")) == pg.GroupKey(pg.API_COSCHEDULING, "ns", "job")
    assert pg.group_key_of(pod(group={"podGroupName": "g"})) == pg.GroupKey(pg.API_V1ALPHA2, "ns", "g")
    # Both: kube-scheduler's own field wins.
    assert pg.group_key_of(pod(group={"podGroupName": "g"}, label="job")).api == pg.API_V1ALPHA2


@pytest.mark.parametrize(("group", "message"), [
    ({}, "podGroupName: required"),
    ({"podGroupName": ""}, "podGroupName: required"),
    ({"podGroupName": {"x": 1}}, "podGroupName: expected a string"),
    ("g", "spec.schedulingGroup: expected an object"),
])
def test_bad_membership(group: Any, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        pg.group_key_of(pod(group=group))


def condition(raw_patch: dict[str, Any] | None) -> dict[str, Any]:
    assert raw_patch is not None
    (found,) = [c for c in raw_patch["status"]["conditions"] if c["type"] == pg.SCHEDULED_CONDITION]
    return found


def test_scheduled_condition_first_write() -> None:
    patch = pg.scheduled_condition_patch(v1alpha2(), pg.REASON_UNSCHEDULABLE, "waiting", "T1")
    assert condition(patch) == {"type": pg.SCHEDULED_CONDITION, "status": "False", "reason": "Unschedulable",
                                "message": "waiting", "observedGeneration": 2, "lastTransitionTime": "T1"}
    # The API server sets no generation on PodGroups: then no observedGeneration (omitempty).
    raw = v1alpha2()
    del raw["metadata"]["generation"]
    assert "observedGeneration" not in condition(pg.scheduled_condition_patch(raw, pg.REASON_SCHEDULED, "", "T1"))


def with_conditions(*conditions: dict[str, Any]) -> dict[str, Any]:
    raw = v1alpha2()
    raw["status"] = {"conditions": list(conditions)}
    return raw


DISRUPTION = {"type": "DisruptionTarget", "status": "False", "reason": "x", "lastTransitionTime": "T0"}


def test_scheduled_condition_transitions_keep_other_conditions() -> None:
    old = {"type": pg.SCHEDULED_CONDITION, "status": "False", "reason": "Unschedulable", "message": "m",
           "observedGeneration": 2, "lastTransitionTime": "T0"}
    patch = pg.scheduled_condition_patch(with_conditions(DISRUPTION, old), pg.REASON_SCHEDULED, "", "T5")
    assert patch is not None and patch["status"]["conditions"][0] == DISRUPTION
    assert condition(patch) | {} == {**old, "status": "True", "reason": "Scheduled", "message": "",
                                     "lastTransitionTime": "T5"}
    # Same status, other reason: the transition time stays.
    patch = pg.scheduled_condition_patch(with_conditions(old), pg.REASON_SCHEDULER_ERROR, "boom", "T5")
    assert condition(patch)["lastTransitionTime"] == "T0" and condition(patch)["reason"] == "SchedulerError"


def test_scheduled_condition_unchanged_and_never_regressed() -> None:
    done = {"type": pg.SCHEDULED_CONDITION, "status": "True", "reason": "Scheduled", "message": "",
            "observedGeneration": 2, "lastTransitionTime": "T0"}
    assert pg.scheduled_condition_patch(with_conditions(done), pg.REASON_SCHEDULED, "", "T9") is None
    assert pg.scheduled_condition_patch(with_conditions(done), pg.REASON_UNSCHEDULABLE, "extra", "T9") is None
    with pytest.raises(ValueError, match="reason must be one of"):
        pg.scheduled_condition_patch(v1alpha2(), "Pending", "", "T9")


def member(phase: str = "Pending", owners: tuple[str, ...] = ()) -> dict[str, Any]:
    refs = [{"kind": "Job", "name": o} for o in owners]
    return {"metadata": {"name": "p", "namespace": "ns", "ownerReferences": refs}, "status": {"phase": phase}}


def test_count_members() -> None:
    counts = pg.count_members([member("Running", ("job-b", "job-a")), member("Succeeded"),
                               member("Failed"), member()])
    assert counts == pg.MemberCounts(4, 1, 1, 1, "ns/job-a,ns/job-b")


def cosched_with_status(status: dict[str, Any], min_member: int = 3) -> dict[str, Any]:
    raw = cosched(minMember=min_member)
    raw["status"] = status
    return raw


@pytest.mark.parametrize(("status", "counts", "expected"), [
    # New group, too few pods: Pending.
    ({}, pg.MemberCounts(2), {"phase": "Pending"}),
    # Enough pods: Pending -> Scheduling (occupiedBy) -> counted in the same settle.
    ({}, pg.MemberCounts(3, occupied_by="ns/job"),
     {"phase": "Scheduling", "occupiedBy": "ns/job", "running": 0, "succeeded": 0, "failed": 0}),
    ({"phase": "Scheduling"}, pg.MemberCounts(3, running=3),
     {"phase": "Running", "running": 3, "succeeded": 0, "failed": 0}),
    ({"phase": "Running", "running": 3}, pg.MemberCounts(3, running=1, succeeded=2),
     {"phase": "Running", "succeeded": 2, "running": 1, "failed": 0}),
    ({"phase": "Running"}, pg.MemberCounts(3, running=2, failed=1),
     {"phase": "Failed", "running": 2, "succeeded": 0, "failed": 1}),
    ({"phase": "Running"}, pg.MemberCounts(3, succeeded=3),
     {"phase": "Finished", "running": 0, "succeeded": 3, "failed": 0}),
    ({"phase": "Scheduling"}, pg.MemberCounts(2),
     {"phase": "Pending", "running": 0, "succeeded": 0, "failed": 0}),
])
def test_coscheduling_status_settles_like_its_controller(status: dict[str, Any], counts: pg.MemberCounts,
                                                          expected: dict[str, Any]) -> None:
    patch = pg.coscheduling_status(cosched_with_status(status), counts)
    assert patch is not None
    assert {**status, **patch["status"]} == expected


def test_coscheduling_final_phases_and_no_change() -> None:
    assert pg.coscheduling_status(cosched_with_status({"phase": "Finished"}), pg.MemberCounts(0)) is None
    assert pg.coscheduling_status(cosched_with_status({"phase": "Failed"}), pg.MemberCounts(9, running=9)) is None
    settled = {"phase": "Running", "running": 3, "succeeded": 0, "failed": 0}
    assert pg.coscheduling_status(cosched_with_status(settled), pg.MemberCounts(3, running=3)) is None
