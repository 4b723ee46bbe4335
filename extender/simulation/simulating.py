"""Simulate: run the standalone scheduler's loop over a snapshot, in memory, and report what it did.

Each pending pod goes through `schedule_one` (the standalone loop's own cycle), then
`ClusterState.assume` and a `MemoryBinder` bind, exactly the steps the standalone
scheduler takes against a real cluster, so "simulate says node-2" means the scheduler
would say node-2 given the same cluster. Pods are taken in the scheduling queue's
order (higher priority first, then older first, then file order), gated pods are
skipped as the loop skips them, and ties between equally good nodes are broken by a
seeded `random.Random`, so a run is reproducible. A pod that fits nowhere may preempt
pods of lower priority, as the live scheduler does: the victims are removed at once (no
grace period to wait for) and the pod is placed on its nominated node; the placement
lists them. One pass is enough: the live loop retries unschedulable pods when the
cluster changes, but here only a preemption frees space, and its pod is retried at once.
The per-pod steps are `placing.Placer`'s. The members of a pod group are placed together, all
or nothing, when the queue reaches the first of them (`gangcycles`, the standalone scheduler's
group cycle); a pod of no group never meets that code.

Two policies can be compared on the same snapshot: each gets a fresh state and the
same seed, and the differences in placement are listed.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from extender.cluster.dra_store import describe_device_use, device_use
from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.snapshot import Snapshot, load_into
from extender.cluster.state import ClusterState
from extender.errors import ExtenderError, InvalidObject
from extender.model.fields import metadata_of
from extender.model.nodes import NodeInfo
from extender.model.pods import TERMINAL_PHASES, PodView
from extender.model.quantities import format_units
from extender.policy.engine import Engine, Policy
from extender.simulation.gangcycles import GroupCycles, GroupOutcome, gates_reason
from extender.simulation.placing import Placement, Placer, Taken, Unplaced
from extender.usage.offline import snapshot_usage

__all__ = ["Comparison", "Difference", "GroupOutcome", "NodeUsage", "Placement", "SimulationResult", "Unplaced",
           "compare", "differences", "read_pods", "render_table", "simulate", "to_json"]

RESOURCES = ("cpu", "memory", "pods")
_CORDON_TAINT = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """Requested cpu (millicores), memory (bytes) and pod count against allocatable."""

    node: str
    allocatable: dict[str, int]
    before: dict[str, int]
    after: dict[str, int]
    notes: tuple[str, ...] = ()  # why new pods may not go there: cordoned, NotReady, tainted
    measured: str = ""  # measured usage after the run (load-aware policies): the sample plus pods placed since
    devices: str = ""  # DRA devices allocated of those published, per driver, after the run

    def fraction(self, resource: str, when: str) -> float:
        total = self.allocatable.get(resource, 0)
        used = (self.before if when == "before" else self.after).get(resource, 0)
        return used / total if total > 0 else 0.0


@dataclass(frozen=True)
class SimulationResult:
    policy: str
    seed: int
    placements: tuple[Placement, ...]
    unschedulable: tuple[Unplaced, ...]
    nodes: tuple[NodeUsage, ...]
    order: tuple[str, ...] = ()  # every pod considered, in the order the queue gave them
    notes: tuple[str, ...] = ()  # e.g. where the node usage for load-aware plugins came from
    groups: tuple[GroupOutcome, ...] = ()  # the pod groups with pending members, in queue order

    def node_of(self, pod: str) -> str | None:
        for placement in self.placements:
            if placement.pod == pod:
                return placement.node
        return None

    @property
    def pods(self) -> list[str]:
        """Every pod the run considered, in queue order (unreadable pods first)."""
        return list(self.order) or [p.pod for p in self.placements] + [u.pod for u in self.unschedulable]


@dataclass(frozen=True, slots=True)
class Difference:
    pod: str
    nodes: tuple[str | None, ...]  # one per policy; None = unschedulable there


@dataclass(frozen=True)
class Comparison:
    results: tuple[SimulationResult, ...]
    differences: tuple[Difference, ...] = field(default=())


# ---- inputs ------------------------------------------------------------------------------


def read_pods(path: str | Path) -> list[dict[str, Any]]:
    """Pods from a YAML/JSON file: one Pod, a PodList/List, or several documents. Other kinds are ignored."""
    try:
        documents = list(yaml.safe_load_all(Path(path).read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ExtenderError(f"cannot read pods from {path}: {exc}") from None
    pods: list[dict[str, Any]] = []
    for document in documents:
        if document is None:
            continue
        items = document.get("items") if isinstance(document, Mapping) else None
        for obj in items if isinstance(items, list) else [document]:
            if not isinstance(obj, Mapping):
                raise ExtenderError(f"{path}: expected Pod objects, got {type(obj).__name__}")
            if obj.get("kind", "Pod") == "Pod":
                pods.append(dict(obj))
    return pods


def _queue_key(item: tuple[int, PodView]) -> tuple[int, int, str, int]:
    index, view = item
    # No timestamp (hand-written extra pods) sorts after every timestamped pod: "created now".
    stamp = view.creation_timestamp
    return (-view.priority, 0 if stamp else 1, stamp, index)


def _queue(raws: Iterable[Mapping[str, Any]]) -> tuple[list[PodView], list[Unplaced]]:
    """Pending pods in scheduling-queue order, and the ones that cannot even be read."""
    views: list[tuple[int, PodView]] = []
    broken: list[Unplaced] = []
    for index, raw in enumerate(raws):
        spec, status = raw.get("spec"), raw.get("status")
        if (isinstance(spec, Mapping) and spec.get("nodeName")) or \
                (isinstance(status, Mapping) and status.get("phase") in TERMINAL_PHASES):
            continue  # placed or finished: not worth parsing (most pods of a real cluster)
        try:
            view = PodView.from_dict(raw)
        except InvalidObject as exc:
            meta = metadata_of(raw)
            key = f"{meta.get('namespace') or 'default'}/{meta.get('name') or f'#{index}'}"
            broken.append(Unplaced(key, f"invalid pod: {exc}"))
            continue
        if view.node_name or view.terminal or view.deleting:
            continue
        views.append((index, view))
    return [view for _, view in sorted(views, key=_queue_key)], broken


def _check_extra(snapshot: Snapshot, extra: Sequence[Mapping[str, Any]]) -> None:
    seen = set()
    for pod in snapshot.pods:
        meta = pod.get("metadata") or {}
        seen.add(f"{meta.get('namespace') or 'default'}/{meta.get('name')}")
    for index, raw in enumerate(extra):
        try:
            key = PodView.from_dict(raw).key
        except InvalidObject as exc:
            raise ExtenderError(f"extra pod #{index}: {exc}") from None
        if key in seen:
            raise ExtenderError(f"extra pod #{index}: {key} is already in the snapshot (names must be unique)")
        seen.add(key)


# ---- the run -----------------------------------------------------------------------------


def _notes(info: NodeInfo) -> tuple[str, ...]:
    node = info.node
    notes = []
    if node.error:
        notes.append("unreadable")
    if node.unschedulable:
        notes.append("cordoned")
    if not node.ready:
        notes.append("NotReady")
    notes += [f"taint {t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in node.taints
              if t.effect in ("NoSchedule", "NoExecute") and t.key != _CORDON_TAINT]
    return tuple(notes)


def _usage(info: NodeInfo) -> dict[str, int]:
    return {"cpu": info.requested.get("cpu", 0), "memory": info.requested.get("memory", 0),
            "pods": info.pod_count}


def simulate(snapshot: Snapshot, policy: Policy, *, extra_pods: Sequence[Mapping[str, Any]] = (),
             seed: int = 0, percentage_of_nodes_to_score: int = 0) -> SimulationResult:
    """Place the snapshot's pending pods and `extra_pods` one by one; the snapshot itself is not changed."""
    _check_extra(snapshot, extra_pods)
    state = ClusterState(assume_ttl=float("inf"))
    state.nominator.tracking = True
    load_into(state, snapshot)
    for pod in extra_pods:
        state.upsert_pod(pod)
    notes = snapshot_usage(state, snapshot.node_metrics, policy)  # placements count on top of it
    placer = Placer(Engine(policy), state, MemoryBinder(state), random.Random(seed), percentage_of_nodes_to_score)
    before = {info.name: (_usage(info), _notes(info)) for info in state.all_node_infos()}

    queue, broken = _queue([*snapshot.pods, *extra_pods])
    groups = GroupCycles(placer, snapshot.pod_groups, queue)
    unplaced = list(broken)
    placements: list[Placement] = []
    for view in queue:
        if view.group is not None:  # its whole group is decided when the first member is reached
            placed, pending = groups.run(view)
            placements += placed
            unplaced += pending
            continue
        if view.scheduling_gates:
            unplaced.append(Unplaced(view.key, gates_reason(view), view.priority))
            continue
        taken = placer.take(view)
        outcome = placer.bind(taken) if isinstance(taken, Taken) else taken
        if isinstance(outcome, Placement):
            placements.append(outcome)
        else:
            assert isinstance(outcome, Unplaced)
            unplaced.append(outcome)

    nodes = []
    table = state.node_usage()
    for info in state.all_node_infos():
        used, node_notes = before.get(info.name, ({}, ()))
        allocatable = {r: info.node.allocatable.get(r, 0) for r in RESOURCES}
        nodes.append(NodeUsage(info.name, allocatable, used, _usage(info), node_notes,
                               table.describe(info.name) if table.source else "",
                               describe_device_use(device_use(state.dra_store, info.name, info.node.labels))))
    order = tuple([u.pod for u in broken] + [view.key for view in queue])
    return SimulationResult(policy.source, seed, tuple(placements), tuple(unplaced), tuple(nodes), order,
                            tuple([*notes, *groups.notes]), tuple(groups.outcomes))


def compare(snapshot: Snapshot, policies: Sequence[Policy], *, extra_pods: Sequence[Mapping[str, Any]] = (),
            seed: int = 0, percentage_of_nodes_to_score: int = 0) -> Comparison:
    """Simulate each policy on its own copy of the snapshot, same seed; list pods placed differently."""
    results = tuple(simulate(snapshot, p, extra_pods=extra_pods, seed=seed,
                             percentage_of_nodes_to_score=percentage_of_nodes_to_score) for p in policies)
    return Comparison(results, differences(results))


def differences(results: Sequence[SimulationResult]) -> tuple[Difference, ...]:
    """Pods whose node (or lack of one) is not the same under every result, in the first run's order."""
    order: list[str] = []
    for result in results:
        order += [pod for pod in result.pods if pod not in order]
    diffs = []
    for pod in order:
        nodes = tuple(result.node_of(pod) for result in results)
        if len(set(nodes)) > 1:
            diffs.append(Difference(pod, nodes))
    return tuple(diffs)


# ---- output ------------------------------------------------------------------------------


def _amount(resource: str, units: int) -> str:
    return str(units) if resource == "pods" else format_units(resource, units)


def result_to_json(result: SimulationResult) -> dict[str, Any]:
    """cpu in millicores, memory in bytes, pods as a count; scores 0..100."""
    return {
        "policy": result.policy,
        "seed": result.seed,
        "placements": [{"pod": p.pod, "node": p.node, "score": None if p.score is None else round(p.score, 3),
                        "priority": p.priority, "feasibleNodes": p.feasible,
                        **({"preempted": list(p.victims)} if p.victims else {}),
                        **({"podGroup": p.group} if p.group else {})} for p in result.placements],
        "unschedulable": [{"pod": u.pod, "reason": u.reason, "priority": u.priority,
                           **({"podGroup": u.group} if u.group else {})} for u in result.unschedulable],
        "nodes": [{"node": n.node, "notes": list(n.notes), "allocatable": n.allocatable,
                   "before": n.before, "after": n.after, **({"measured": n.measured} if n.measured else {}),
                   **({"devices": n.devices} if n.devices else {})}
                  for n in result.nodes],
        **({"notes": list(result.notes)} if result.notes else {}),
        **({"podGroups": [group_to_json(g) for g in result.groups]} if result.groups else {}),
    }


def group_to_json(group: GroupOutcome) -> dict[str, Any]:
    """One pod group's outcome; `policy` and `minCount` are null when the group could not be read."""
    return {"podGroup": group.group, "api": group.api, "policy": group.policy or None,
            "minCount": group.min_count or None, "members": group.members, "bound": group.bound,
            "placed": list(group.placed), "pending": list(group.pending), "complete": group.complete,
            "reason": group.reason, "message": group.message}


def to_json(outcome: SimulationResult | Comparison) -> dict[str, Any]:
    if isinstance(outcome, SimulationResult):
        return result_to_json(outcome)
    return {
        "policies": [result_to_json(r) for r in outcome.results],
        "differences": [{"pod": d.pod, "nodes": list(d.nodes)} for d in outcome.differences],
    }


def _table(header: Sequence[str], lines: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    return ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in [header, *lines]]


def _percent(usage: NodeUsage, resource: str) -> str:
    before, after = usage.fraction(resource, "before"), usage.fraction(resource, "after")
    text = f"{before:.0%} -> {after:.0%}" if before != after else f"{before:.0%}"
    amount = _amount(resource, usage.after.get(resource, 0))
    return f"{text} ({amount}/{_amount(resource, usage.allocatable.get(resource, 0))})"


def group_policy(group: GroupOutcome) -> str:
    """"gang, minCount 4", "basic", or "-" for a group that does not exist or cannot be read."""
    if group.policy == "gang":
        return f"gang, minCount {group.min_count}"
    return group.policy or "-"


def _groups_table(groups: Sequence[GroupOutcome]) -> list[str]:
    rows = [[g.group, g.api, group_policy(g), str(g.members), str(g.bound), str(len(g.placed)), str(len(g.pending)),
             "yes" if g.complete else "no", g.message or "-"] for g in groups]
    return _table(["POD GROUP", "API", "POLICY", "MEMBERS", "BOUND", "PLACED", "PENDING", "COMPLETE", "WHY"], rows)


def render_result(result: SimulationResult) -> str:
    total = len(result.placements) + len(result.unschedulable)
    summary = f"Placed {len(result.placements)}/{total} pods, {len(result.unschedulable)} unschedulable."
    if result.groups:
        complete = sum(g.complete for g in result.groups)
        summary += f" Pod groups: {complete} complete, {len(result.groups) - complete} incomplete."
    lines = [f"Policy {result.policy}   seed {result.seed}", summary, ""]
    if result.placements:
        preempting = any(p.victims for p in result.placements)
        header = ["POD", "NODE", "SCORE", "PRIORITY", *(["PREEMPTED"] if preempting else [])]
        lines += _table(header, [[p.pod, p.node, "-" if p.score is None else f"{p.score:.1f}", str(p.priority),
                                  *([", ".join(p.victims) or "-"] if preempting else [])]
                                 for p in result.placements])
        lines.append("")
    if result.unschedulable:
        lines += _table(["UNSCHEDULABLE", "REASON"], [[u.pod, u.reason] for u in result.unschedulable])
        lines.append("")
    if result.groups:
        lines += _groups_table(result.groups)
        lines.append("")
    measured = any(n.measured for n in result.nodes)
    devices = any(n.devices for n in result.nodes)
    lines += _table(["NODE", "CPU", "MEMORY", "PODS", *(["DEVICES"] if devices else []), "NOTES",
                     *(["MEASURED"] if measured else [])],
                    [[n.node, *(_percent(n, r) for r in RESOURCES), *([n.devices or "-"] if devices else []),
                      ", ".join(n.notes) or "-", *([n.measured or "-"] if measured else [])] for n in result.nodes])
    lines += [f"Note: {note}" for note in result.notes]
    return "\n".join(lines) + "\n"


def render_table(outcome: SimulationResult | Comparison) -> str:
    """Text for `-o table`: each run, then (with two policies) the placement differences."""
    if isinstance(outcome, SimulationResult):
        return render_result(outcome)
    text = "\n".join(render_result(r) for r in outcome.results)
    labels = [f"POLICY {i + 1}" for i in range(len(outcome.results))]
    text += "\n" + "\n".join(f"{label}: {r.policy}" for label, r in zip(labels, outcome.results, strict=True))
    if not outcome.differences:
        return text + "\nEvery pod lands on the same node under both policies.\n"
    rows = [[d.pod, *(n or "(unschedulable)" for n in d.nodes)] for d in outcome.differences]
    return text + f"\n{len(rows)} pod(s) placed differently:\n" + "\n".join(_table(["POD", *labels], rows)) + "\n"
