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

from extender.cluster.binding import MemoryBinder
from extender.cluster.snapshot import Snapshot, load_into
from extender.cluster.state import ClusterState
from extender.errors import ClusterError, ExtenderError, InvalidObject
from extender.model.nodes import NodeInfo
from extender.model.pods import TERMINAL_PHASES, PodView
from extender.model.quantities import format_units
from extender.policy.engine import Engine, PluginError, Policy
from extender.policy.preemption import preempt
from extender.policy.reservations import all_actions, merged_annotations, release_all
from extender.policy.status import Status
from extender.scheduler.cycle import CycleResult, schedule_one
from extender.usage.offline import snapshot_usage

RESOURCES = ("cpu", "memory", "pods")
_CORDON_TAINT = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True, slots=True)
class Placement:
    pod: str
    node: str
    score: float | None  # the chosen node's total, 0..100; None when it was the only feasible node
    priority: int = 0
    feasible: int = 0  # how many nodes could have taken it
    victims: tuple[str, ...] = ()  # pods preempted to make room (the node was nominated first)


@dataclass(frozen=True, slots=True)
class Unplaced:
    pod: str
    reason: str  # the "0/N nodes are available: ..." summary, or why it was not attempted
    priority: int = 0


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """Requested cpu (millicores), memory (bytes) and pod count against allocatable."""

    node: str
    allocatable: dict[str, int]
    before: dict[str, int]
    after: dict[str, int]
    notes: tuple[str, ...] = ()  # why new pods may not go there: cordoned, NotReady, tainted
    measured: str = ""  # measured usage after the run (load-aware policies): the sample plus pods placed since

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
            meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
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
    for index, pod in enumerate(extra):
        try:
            key = PodView.from_dict(pod).key
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


def _chosen_score(decision: Any, node: str) -> float | None:
    """The chosen node's total; None when the cycle did not score (a single feasible node)."""
    for info, total in zip(decision.scored, decision.totals, strict=True):
        if info.name == node:
            return float(total)
    return None


def _preempt(engine: Engine, state: ClusterState, view: PodView, result: CycleResult, rng: random.Random,
             percentage: int, start: int) -> tuple[CycleResult, tuple[str, ...], str]:
    """The live scheduler's preemption, carried out at once in memory: the victims are deleted,
    the pod nominated, and tried again (on its nominated node first). Returns the new result,
    the victims, and why the pod stays unplaced ("" when it was placed)."""
    decision = result.decision
    outcome = preempt(engine.prepare(view, state), decision, state.all_node_infos(), state,
                      state.disruption_budgets(), rng=rng)
    candidate = outcome.candidate
    if candidate is None:
        return result, (), f"{decision.summary()} preemption: {outcome.message}"
    state.nominator.nominate(view, candidate.node)
    for victim in candidate.victims:
        state.delete_pod(victim.key)
    retried = schedule_one(engine, state, view, rng=rng, percentage_of_nodes_to_score=percentage, start_index=start)
    victims = tuple(v.key for v in candidate.victims)
    if retried.node is None:
        state.nominator.clear(view.key)
        return retried, victims, f"{retried.decision.summary()} (after preempting {', '.join(victims)})"
    return retried, victims, ""


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
    binder = MemoryBinder(state)
    engine = Engine(policy)
    rng = random.Random(seed)
    before = {info.name: (_usage(info), _notes(info)) for info in state.all_node_infos()}

    queue, broken = _queue([*snapshot.pods, *extra_pods])
    unplaced = list(broken)
    placements: list[Placement] = []
    start = 0  # the loop resumes filtering where the previous cycle stopped (large clusters)
    for view in queue:
        if view.scheduling_gates:
            reason = f"waiting for scheduling gates: [{' '.join(view.scheduling_gates)}]"
            unplaced.append(Unplaced(view.key, reason, view.priority))
            continue
        try:
            result = schedule_one(engine, state, view, rng=rng,
                                  percentage_of_nodes_to_score=percentage_of_nodes_to_score, start_index=start)
        except PluginError as exc:
            unplaced.append(Unplaced(view.key, f"policy plugin failed: {exc}", view.priority))
            continue
        start = result.next_start_index
        victims: tuple[str, ...] = ()
        if not result.node:
            result, victims, why = _preempt(engine, state, view, result, rng, percentage_of_nodes_to_score, start)
            if why:
                unplaced.append(Unplaced(view.key, why, view.priority))
                continue
        node = result.node
        assert node is not None
        info = state.node_info(node)
        reserved = engine.reserve(view, info, state) if info is not None else []
        if isinstance(reserved, Status):
            unplaced.append(Unplaced(view.key, f"node {node} refused at reserve: {reserved.reason}", view.priority))
            continue
        state.assume(view.key, node, uid=view.uid, view=view)
        try:
            actions = all_actions(reserved)
            if actions:
                binder.prebind(actions)
            binder.bind(view.namespace, view.name, view.uid, node, annotations=merged_annotations(reserved) or None)
        except ClusterError as exc:
            release_all(reserved)
            state.forget(view.key)
            unplaced.append(Unplaced(view.key, f"bind failed: {exc}", view.priority))
            continue
        placements.append(Placement(view.key, node, _chosen_score(result.decision, node), view.priority,
                                    len(result.decision.feasible), victims))

    nodes = []
    table = state.node_usage()
    for info in state.all_node_infos():
        used, node_notes = before.get(info.name, ({}, ()))
        allocatable = {r: info.node.allocatable.get(r, 0) for r in RESOURCES}
        nodes.append(NodeUsage(info.name, allocatable, used, _usage(info), node_notes,
                               table.describe(info.name) if table.source else ""))
    order = tuple([u.pod for u in broken] + [view.key for view in queue])
    return SimulationResult(policy.source, seed, tuple(placements), tuple(unplaced), tuple(nodes), order,
                            tuple(notes))


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
                        **({"preempted": list(p.victims)} if p.victims else {})} for p in result.placements],
        "unschedulable": [{"pod": u.pod, "reason": u.reason, "priority": u.priority}
                          for u in result.unschedulable],
        "nodes": [{"node": n.node, "notes": list(n.notes), "allocatable": n.allocatable,
                   "before": n.before, "after": n.after, **({"measured": n.measured} if n.measured else {})}
                  for n in result.nodes],
        **({"notes": list(result.notes)} if result.notes else {}),
    }


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


def render_result(result: SimulationResult) -> str:
    total = len(result.placements) + len(result.unschedulable)
    lines = [f"Policy {result.policy}   seed {result.seed}",
             f"Placed {len(result.placements)}/{total} pods, {len(result.unschedulable)} unschedulable.", ""]
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
    measured = any(n.measured for n in result.nodes)
    lines += _table(["NODE", "CPU", "MEMORY", "PODS", "NOTES", *(["MEASURED"] if measured else [])],
                    [[n.node, *(_percent(n, r) for r in RESOURCES), ", ".join(n.notes) or "-",
                      *([n.measured or "-"] if measured else [])] for n in result.nodes])
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
