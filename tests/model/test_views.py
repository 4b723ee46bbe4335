"""PodView and NodeView: the fields scheduling reads, and errors that name the bad field."""

from __future__ import annotations

import json

import pytest

from extender.errors import InvalidObject
from extender.model.nodes import NodeInfo, NodeView
from extender.model.pods import PodView
from tests.helpers import wire_body


def pod(**spec):
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [], **spec}}


def test_pod_view_reads_what_scheduling_needs():
    view = PodView.from_dict(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "b"},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}],
                "nodeSelector": {"zone": "a"},
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                "schedulingGates": [{"name": "g"}],
                "priority": 10,
                "schedulerName": "ours",
            },
        }
    )
    assert (view.key, view.uid, view.labels, view.priority, view.scheduler_name) == ("ns/p", "u", {"a": "b"}, 10, "ours")
    assert view.requests == {"cpu": 250}
    assert view.score_requests == {"cpu": 250, "memory": 200 * 2**20}
    assert view.node_selector == {"zone": "a"} and view.scheduling_gates == ("g",)
    assert view.tolerations[0].tolerates("k", "anything", "NoSchedule")
    assert view.owner == ("ReplicaSet", "rs")
    assert view.required_terms is None and view.preferred_terms == ()


def test_pod_defaults():
    view = PodView.from_dict({"metadata": {"name": "p"}})
    assert (view.namespace, view.scheduler_name, view.phase, view.priority) == ("default", "default-scheduler", "Pending", 0)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "pod: expected an object"),
        ({"metadata": {}}, "metadata.name: required"),
        ({"metadata": "x"}, "metadata: expected an object"),
        (pod(priority="high"), "spec.priority: expected an integer"),
        (pod(tolerations=[{"operator": "Gt"}]), "spec.tolerations[0].operator: 'Gt' is not Equal or Exists"),
        (pod(tolerations="all"), "spec.tolerations: expected a list"),
        (pod(nodeSelector=["a"]), "spec.nodeSelector: expected a map of strings"),
        (pod(containers=[{"name": "c", "resources": {"requests": {"memory": "1Zi"}}}]),
         "spec.containers[0].resources.requests.memory"),
        (pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Nope"}]}]}}}),
         "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
         ".matchExpressions[0].operator"),
        (pod(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 101, "preference": {}}]}}),
         "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"),
    ],
)
def test_pod_errors_name_the_field(raw, message):
    with pytest.raises(InvalidObject) as exc:
        PodView.from_dict(raw)
    assert str(exc.value).startswith(message)


def test_node_view_reads_what_scheduling_needs():
    view = NodeView.from_dict(
        {
            "metadata": {"name": "n", "labels": {"zone": "a"}},
            "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "3800m", "memory": "7Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]},
        }
    )
    assert view.ready and view.unschedulable and not view.error
    assert view.allocatable == {"cpu": 3800, "memory": 7 * 2**30, "pods": 110}
    assert str(view.taints[0]) == "{k}" and view.taints[0].effect == "NoSchedule"
    info = NodeInfo(view, {"cpu": 800}, {}, 3)
    assert (info.free("cpu"), info.free("pods"), info.free("memory")) == (3000, 107, 7 * 2**30)


@pytest.mark.parametrize(
    ("unschedulable", "conditions", "clear"),
    [
        (False, {"Ready": "True", "DiskPressure": "False", "NetworkUnavailable": "False"}, True),
        (True, {"Ready": "True"}, False),
        (False, {"Ready": "False"}, False),
        (False, {"Ready": "Unknown"}, False),
        (False, {}, False),
        (False, {"Ready": "True", "MemoryPressure": "True"}, False),
        # A condition of its own (node-problem-detector's, say) True: NodeReady decides with its arguments.
        (False, {"Ready": "True", "KernelDeadlock": "True"}, False),
    ],
)
def test_all_clear_only_when_nothing_could_refuse_the_node(unschedulable, conditions, clear):
    view = NodeView.from_dict({
        "metadata": {"name": "n"}, "spec": {"unschedulable": unschedulable},
        "status": {"conditions": [{"type": kind, "status": status} for kind, status in conditions.items()]},
    })
    assert view.all_clear is clear


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"status": {"allocatable": {"cpu": "many"}}}, "status.allocatable.cpu"),
        ({"spec": {"taints": "x"}}, "spec.taints"),
        ({"status": {"conditions": [1]}}, "status.conditions[0]"),
    ],
)
def test_a_bad_node_field_marks_the_node_unusable(raw, field):
    view = NodeView.from_dict({"metadata": {"name": "n"}, **raw})
    assert view.error.startswith("node n is unusable: " + field)


def test_a_node_without_a_name_raises():
    with pytest.raises(InvalidObject, match="metadata.name: required"):
        NodeView.from_dict({"metadata": {}})


def test_captured_kube_scheduler_objects_parse():
    body = wire_body("filter-request-nodecache-false.json")
    view = PodView.from_dict(body["Pod"])
    assert view.requests == {"cpu": 100, "memory": 64 * 2**20}
    nodes = [NodeView.from_dict(item) for item in body["Nodes"]["items"]]
    assert all(n.ready and not n.error and n.allocatable["pods"] == 110 for n in nodes)


def test_tolerations_seen_before_are_shared_and_bad_ones_still_named():
    good = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}, {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    first = PodView.from_dict(pod(tolerations=good)).tolerations
    again = PodView.from_dict(pod(tolerations=json.loads(json.dumps(good)))).tolerations
    assert again == first and all(a is b for a, b in zip(again, first, strict=True))
    assert [t.operator for t in first] == ["Exists", "Equal"]  # an omitted operator is Equal
    # A known toleration next to a bad one: the bad one is still found and named.
    with pytest.raises(InvalidObject, match=r"spec.tolerations\[1\].key: expected a string"):
        PodView.from_dict(pod(tolerations=[good[0], {"key": {"nested": "object"}}]))
    # Scalars are read as their text, and never confused: 1 == True, but "1" != "True".
    assert PodView.from_dict(pod(tolerations=[{"key": 1}])).tolerations[0].key == "1"
    assert PodView.from_dict(pod(tolerations=[{"key": True}])).tolerations[0].key == "True"
    with pytest.raises(InvalidObject, match=r"spec.tolerations\[0\]: expected an object"):
        PodView.from_dict(pod(tolerations=["node.kubernetes.io/not-ready"]))
    with pytest.raises(InvalidObject, match=r"spec.tolerations\[0\].operator"):
        PodView.from_dict(pod(tolerations=[{"key": ["unhashable"], "operator": "Sometimes"}]))


def test_adding_a_pod_to_a_node_info_sums_as_building_it_with_the_pod() -> None:
    """Preemption's reprieve loop adds victims back one at a time (NodeInfo.adding, kube-scheduler's
    AddPod): the sums, the pod count, the host ports and the pods must be what a rebuild gives."""
    from extender.model.records import record_from_dict
    from tests.policy.builders import node_dict, placed

    node = NodeView.from_dict(node_dict("n", cpu="8"))
    ported = placed("ported", "n", cpu="300m", spec={"containers": [{
        "name": "c", "resources": {"requests": {"cpu": "300m", "memory": "1Gi"}},
        "ports": [{"containerPort": 80, "hostPort": 8080}]}]})
    pods = [record_from_dict(placed(f"p{i}", "n", cpu=f"{100 * (i + 1)}m")) for i in range(3)]
    extra = record_from_dict(ported)
    base = NodeInfo.build(node, pods)
    added = base.adding(extra)
    built = NodeInfo.build(node, [*pods, extra])
    assert (added.requested, added.score_requested, added.pod_count, added.host_ports, added.pods) == (
        built.requested, built.score_requested, built.pod_count, built.host_ports, built.pods)
    assert added.requested["cpu"] == 900 and added.host_ports  # the test sees real sums and a port
    assert base.requested["cpu"] == 600 and base.pod_count == 3  # the original is left as it was
