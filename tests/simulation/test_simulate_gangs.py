"""simulate places pod groups all or nothing, as the standalone scheduler's group cycle (docs/gangs.md).

Every cluster here is built of nodes with whole CPUs and members that request 1 CPU each, so
"how many fit" is plain counting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from extender.cli.simulate import simulate as simulate_command
from extender.cluster.snapshot import Snapshot, read_snapshot
from extender.gangs.coordinator import REASON_NO_GROUP, REASON_SCHEDULER_NAMES, REASON_TOO_FEW
from extender.gangs.topology import REASON_NO_DOMAIN
from extender.model.podgroups import KUBE_MEMBER_UNSCHEDULABLE_MESSAGE, POD_GROUP_LABEL
from extender.policy.defaults import default_policy
from extender.simulation.gangcycles import REASON_NO_ROOM, REASON_SOME_PENDING
from extender.simulation.report import render_report
from extender.simulation.simulating import (
    SimulationResult,
    compare,
    render_table,
    simulate,
    to_json,
)

V1ALPHA2 = "scheduling.k8s.io/v1alpha2"
COSCHEDULING = "scheduling.x-k8s.io/v1alpha1"
ZONE = "topology.kubernetes.io/zone"
EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "snapshot-gangs.yaml"


def node(name: str, cpu: int, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": str(cpu), "memory": "64Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, group: str | None = None, *, cpu: str = "1", label: str | None = None, node_name: str = "",
        priority: int = 0, created: int = 0, scheduler: str = "") -> dict[str, Any]:
    """A pod of 1 CPU; `group` joins a v1alpha2 group, `label` a Coscheduling one; `created` orders the queue."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
                            "priority": priority}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if node_name:
        spec["nodeName"] = node_name
    if scheduler:
        spec["schedulerName"] = scheduler
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}",
                            "creationTimestamp": f"2026-01-01T00:{created:02d}:00Z"}
    if label:
        meta["labels"] = {POD_GROUP_LABEL: label}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Running" if node_name else "Pending"}}


def gang(name: str, min_count: int, *, topology: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {"apiVersion": V1ALPHA2, "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def basic(name: str) -> dict[str, Any]:
    return {"apiVersion": V1ALPHA2, "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulingPolicy": {"basic": {}}}}


def coscheduling(name: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": COSCHEDULING, "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": min_member}}


def run(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], groups: list[dict[str, Any]]) -> SimulationResult:
    return simulate(Snapshot(nodes=nodes, pods=pods, pod_groups=groups), default_policy("standalone"))


def members(group: str, count: int, **options: Any) -> list[dict[str, Any]]:
    return [pod(f"{group}-{i}", group, created=i, **options) for i in range(1, count + 1)]


def placed(result: SimulationResult) -> list[str]:
    return sorted(p.pod for p in result.placements)


def reasons(result: SimulationResult) -> dict[str, str]:
    return {u.pod: u.reason for u in result.unschedulable}


def test_a_gang_that_does_not_fit_whole_places_none_and_says_why() -> None:
    result = run([node("n1", 2), node("n2", 1)], members("pg1", 4), [gang("pg1", 4)])
    assert result.placements == ()
    why = reasons(result)
    # Three were placed in the cycle, then given back: kube-scheduler's gang message.
    assert sorted(p for p, r in why.items() if r == KUBE_MEMBER_UNSCHEDULABLE_MESSAGE) == \
        ["default/pg1-1", "default/pg1-2", "default/pg1-3"]
    assert why["default/pg1-4"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert all(u.group == "default/pg1" for u in result.unschedulable)
    [outcome] = result.groups
    assert (outcome.group, outcome.policy, outcome.min_count, outcome.members, outcome.bound) == \
        ("default/pg1", "gang", 4, 4, 0)
    assert outcome.placed == () and len(outcome.pending) == 4 and not outcome.complete
    assert outcome.reason == REASON_NO_ROOM
    assert "3 of minCount 4 members fit (0 bound, 3 placed, 1 not); every place given back" in outcome.message
    assert all(n.after == n.before for n in result.nodes)  # every place was given back


def test_room_for_the_whole_gang_places_it_all() -> None:
    result = run([node("n1", 2), node("n2", 2)], members("pg1", 4), [gang("pg1", 4)])
    assert placed(result) == ["default/pg1-1", "default/pg1-2", "default/pg1-3", "default/pg1-4"]
    assert result.unschedulable == ()
    assert all(p.group == "default/pg1" for p in result.placements)
    [outcome] = result.groups
    assert outcome.complete and len(outcome.placed) == 4 and outcome.pending == () and outcome.reason == ""


def test_members_beyond_min_count_that_do_not_fit_stay_pending_alone() -> None:
    result = run([node("n1", 2), node("n2", 2)], members("pg1", 5), [gang("pg1", 3)])
    assert len(result.placements) == 4
    [(pending, reason)] = reasons(result).items()
    assert pending == "default/pg1-5" and reason.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    [outcome] = result.groups
    assert outcome.complete and outcome.pending == ("default/pg1-5",)
    assert outcome.reason == REASON_SOME_PENDING
    assert outcome.message == "pod group default/pg1: 1 member(s) beyond the quorum stay pending"


def test_two_competing_gangs_one_completes_the_other_places_nothing() -> None:
    # 6 CPUs for two gangs of 4: one by one, they would end 3 + 3 and neither complete.
    pods = [p for i in range(1, 5) for p in (pod(f"a-{i}", "pga", created=2 * i), pod(f"b-{i}", "pgb", created=2 * i + 1))]
    result = run([node("n1", 2), node("n2", 2), node("n3", 2)], pods, [gang("pga", 4), gang("pgb", 4)])
    assert placed(result) == ["default/a-1", "default/a-2", "default/a-3", "default/a-4"]
    outcomes = {g.group: g for g in result.groups}
    assert outcomes["default/pga"].complete and not outcomes["default/pgb"].complete
    assert outcomes["default/pgb"].placed == () and outcomes["default/pgb"].reason == REASON_NO_ROOM
    assert "2 of minCount 4" in outcomes["default/pgb"].message


def test_a_missing_group_holds_its_members_before_the_queue() -> None:
    result = run([node("n1", 4)], members("pg1", 2), [])
    assert result.placements == ()
    assert set(reasons(result).values()) == {"pod group default/pg1 does not exist (yet)"}
    [outcome] = result.groups
    assert (outcome.policy, outcome.min_count, outcome.complete, outcome.reason) == ("", 0, False, REASON_NO_GROUP)


def test_too_few_members_says_how_many_are_missing() -> None:
    result = run([node("n1", 4)], members("pg1", 2), [gang("pg1", 3)])
    assert result.placements == ()
    [outcome] = result.groups
    assert outcome.reason == REASON_TOO_FEW
    assert outcome.message == "pod group default/pg1 has 2 of 3 members (minCount 3); 1 missing"
    assert set(reasons(result).values()) == {outcome.message}


def test_members_under_different_scheduler_names_are_refused() -> None:
    pods = [pod("pg1-1", "pg1", created=1), pod("pg1-2", "pg1", created=2, scheduler="other")]
    result = run([node("n1", 4)], pods, [gang("pg1", 2)])
    assert result.placements == ()
    [outcome] = result.groups
    assert outcome.reason == REASON_SCHEDULER_NAMES and "'default-scheduler', 'other'" in outcome.message


def test_bound_members_count_toward_the_quorum() -> None:
    pods = [pod("pg1-0", "pg1", node_name="n1"), *members("pg1", 2)]
    result = run([node("n1", 2)], pods, [gang("pg1", 3)])  # one CPU left: 1 bound + 1 placed < 3
    assert result.placements == ()
    assert result.groups[0].bound == 1 and result.groups[0].members == 3
    result = run([node("n1", 3)], pods, [gang("pg1", 3)])
    assert placed(result) == ["default/pg1-1", "default/pg1-2"] and result.groups[0].complete


def test_a_bound_member_preempted_earlier_in_the_run_no_longer_counts() -> None:
    # urgent (priority 100) preempts pg1-0 off n1; pg1-1 alone is then fewer members than minCount 2.
    pods = [pod("pg1-0", "pg1", node_name="n1"), pod("urgent", cpu="2", priority=100), pod("pg1-1", "pg1", created=1)]
    result = run([node("n1", 2), node("n2", 1)], pods, [gang("pg1", 2)])
    assert placed(result) == ["default/urgent"] and result.placements[0].victims == ("default/pg1-0",)
    [outcome] = result.groups
    assert (outcome.members, outcome.bound, outcome.reason) == (1, 0, REASON_TOO_FEW)


def test_a_basic_group_binds_what_fits() -> None:
    result = run([node("n1", 2)], members("pg1", 3), [basic("pg1")])
    assert placed(result) == ["default/pg1-1", "default/pg1-2"]
    assert list(reasons(result)) == ["default/pg1-3"]
    [outcome] = result.groups
    assert (outcome.policy, outcome.min_count, outcome.complete) == ("basic", 1, True)
    assert outcome.message == "pod group default/pg1: 1 member(s) stay pending (basic: no quorum)"
    nothing = run([node("n1", 2)], members("pg1", 1, cpu="3"), [basic("pg1")])
    assert not nothing.groups[0].complete and nothing.groups[0].reason == REASON_NO_ROOM
    assert nothing.groups[0].message == "pod group default/pg1: none of its 1 pending members fits"


def test_a_coscheduling_group_by_its_label() -> None:
    pods = [pod(f"w-{i}", label="job", created=i) for i in range(1, 4)]
    result = run([node("n1", 2)], pods, [coscheduling("job", 3)])
    assert result.placements == ()
    [outcome] = result.groups
    assert (outcome.group, outcome.api, outcome.min_count, outcome.complete) == ("default/job", COSCHEDULING, 3, False)
    result = run([node("n1", 3)], pods, [coscheduling("job", 3)])
    assert placed(result) == ["default/w-1", "default/w-2", "default/w-3"] and result.groups[0].complete


def test_members_are_placed_in_priority_order_and_preempt_as_a_group() -> None:
    # kube-scheduler's scenario 7: a low-priority blocker (2 CPU) on a 4-CPU node; a gang of 4 at priority 100.
    blocker = pod("blocker", cpu="2", node_name="n1", priority=10)
    result = run([node("n1", 4)], [blocker, *members("pg1", 4, priority=100)], [gang("pg1", 4)])
    assert len(result.placements) == 4 and result.groups[0].complete
    assert [v for p in result.placements for v in p.victims] == ["default/blocker"]


def test_victims_of_a_gang_that_still_does_not_fit_are_named() -> None:
    blocker = pod("blocker", node_name="n1", priority=10)
    result = run([node("n1", 2)], [blocker, *members("pg1", 4, priority=100)], [gang("pg1", 4)])
    assert result.placements == () and not result.groups[0].complete
    assert result.groups[0].message.endswith("; preempted for it all the same: default/blocker")
    assert all(n.after["cpu"] == 0 for n in result.nodes)  # the blocker is gone, the places given back


def test_a_topology_constraint_keeps_the_gang_in_one_domain() -> None:
    nodes = [node("a1", 1, **{ZONE: "a"}), node("a2", 1, **{ZONE: "a"}), node("b1", 2, **{ZONE: "b"}),
             node("b2", 1, **{ZONE: "b"})]
    result = run(nodes, members("pg1", 3), [gang("pg1", 3, topology=ZONE)])
    assert sorted(p.node for p in result.placements) == ["b1", "b1", "b2"]  # zone a has room for 2 only
    # Four members: no zone holds them, though the cluster does.
    result = run(nodes, members("pg1", 4), [gang("pg1", 4, topology=ZONE)])
    assert result.placements == () and result.groups[0].reason == REASON_NO_ROOM
    unlabelled = run([node("n1", 4)], members("pg1", 2), [gang("pg1", 2, topology=ZONE)])
    assert unlabelled.groups[0].reason == REASON_NO_DOMAIN


def test_pods_of_no_group_are_placed_as_before_beside_the_groups() -> None:
    pods = [pod("solo", created=0), *members("pg1", 4)]
    result = run([node("n1", 2), node("n2", 1)], pods, [gang("pg1", 4)])
    assert placed(result) == ["default/solo"]  # the gang no longer fits whole: it places nothing
    assert result.placements[0].group == "" and len(result.groups) == 1


def test_json_output_fields() -> None:
    result = run([node("n1", 2), node("n2", 1)], [pod("solo"), *members("pg1", 4)], [gang("pg1", 4)])
    body = to_json(result)
    assert body["podGroups"] == [{
        "podGroup": "default/pg1", "api": V1ALPHA2, "policy": "gang", "minCount": 4, "members": 4, "bound": 0,
        "placed": [], "pending": ["default/pg1-1", "default/pg1-2", "default/pg1-3", "default/pg1-4"],
        "complete": False, "reason": REASON_NO_ROOM, "message": result.groups[0].message}]
    assert {u["podGroup"] for u in body["unschedulable"]} == {"default/pg1"}
    assert "podGroup" not in body["placements"][0]  # a pod of no group: the keys it always had
    missing = to_json(run([node("n1", 4)], members("pg1", 1), []))["podGroups"][0]
    assert (missing["policy"], missing["minCount"], missing["reason"]) == (None, None, REASON_NO_GROUP)
    assert "podGroups" not in to_json(run([node("n1", 4)], [pod("solo")], []))


def test_table_and_html_show_the_groups() -> None:
    result = run([node("n1", 2), node("n2", 1)], members("pg1", 4), [gang("pg1", 4)])
    text = render_table(result)
    assert "Placed 0/4 pods, 4 unschedulable. Pod groups: 0 complete, 1 incomplete." in text
    header = next(line for line in text.splitlines() if line.startswith("POD GROUP"))
    assert header.split() == ["POD", "GROUP", "API", "POLICY", "MEMBERS", "BOUND", "PLACED", "PENDING", "COMPLETE",
                              "WHY"]
    row = next(line for line in text.splitlines() if line.startswith("default/pg1 "))
    assert "gang, minCount 4" in row and " no " in row and "every place given back" in row
    page = render_report(result)
    assert '<tr class="group" data-group="default/pg1">' in page and "incomplete" in page
    assert REASON_NO_ROOM.replace("'", "&#x27;") in page
    assert "Pod groups" not in render_report(run([node("n1", 4)], [pod("solo")], []))


def test_the_cli_reads_pod_groups_from_the_snapshot(tmp_path: Path) -> None:
    items = [node("n1", 2), node("n2", 2), gang("pg1", 4), coscheduling("job", 2),
             *members("pg1", 4), *[pod(f"w-{i}", label="job", created=9) for i in (1, 2)]]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert len(read_snapshot(path).pod_groups) == 2
    result = CliRunner().invoke(simulate_command, [str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    groups = {g["podGroup"]: g for g in json.loads(result.output)["podGroups"]}
    assert groups["default/pg1"]["complete"] and len(groups["default/pg1"]["placed"]) == 4
    assert not groups["default/job"]["complete"] and groups["default/job"]["pending"] == ["default/w-1", "default/w-2"]


def test_an_unreadable_group_is_named_with_its_error() -> None:
    broken = gang("pg1", 2)
    broken["spec"]["schedulingPolicy"] = {}
    result = run([node("n1", 4)], members("pg1", 2), [broken])
    assert result.placements == ()
    assert result.groups[0].message.startswith("pod group default/pg1 cannot be read: spec.schedulingPolicy")


def test_the_shipped_example() -> None:
    """config/snapshot-gangs.yaml does what its header (and docs/gangs.md) says."""
    result = simulate(read_snapshot(EXAMPLE), default_policy("standalone"))
    outcomes = {g.group: (g.complete, len(g.placed), len(g.pending)) for g in result.groups}
    assert outcomes == {"ml/trainer": (True, 4, 0), "ml/spark": (False, 0, 4), "ml/mpi": (True, 3, 0),
                        "ml/eval": (True, 2, 1), "ml/late": (False, 0, 1)}
    nodes = {p.pod: p.node for p in result.placements}
    assert {nodes[f"ml/trainer-{i}"] for i in range(4)} == {"node-a", "node-b"}  # one zone
    assert nodes["ml/web"] == "node-c"


def test_two_policies_each_report_their_groups() -> None:
    snapshot = Snapshot(nodes=[node("n1", 2), node("n2", 2)], pods=members("pg1", 4), pod_groups=[gang("pg1", 4)])
    comparison = compare(snapshot, [default_policy("standalone"), default_policy("standalone")])
    assert [len(r.groups) for r in comparison.results] == [1, 1] and comparison.differences == ()
    assert render_table(comparison).count("POD GROUP") == 2
    assert [len(run["podGroups"]) for run in to_json(comparison)["policies"]] == [1, 1]
