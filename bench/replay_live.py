"""The live check of `extender replay` (issue 42, item 5): a slice of an openb trace scheduled by
`extender schedule` on a real control plane must reach the allocation ratio `extender replay`
reaches on the same slice, in the same order, within 0.5 points.

The slice, for a seed: the first N nodes of the seed's node order (replay's names,
"%04d-<sn>", sorted), and the pods of the seed's arrival order (extender.replay.arrivals)
whose GPUs fit in those nodes' GPUs: the order is walked until the next pod would pass 100 %
of the slice's capacity. Both sides get these nodes under these names and these pods in this
order; replay is `extender.replay.runner.run` given that order.

The live side: the nodes are plain Node objects (their status patched in, Ready, the not-ready
taint removed, as tests.fakeapi.client.KubeTestClient.create_node does; no kubelet), then
`extender schedule --percentage-of-nodes-to-score 100 --disable-preemption` starts (every node
scored and no preemption, as replay); the pods are created one at a time, each waited for until
it is bound or reported unschedulable (PodScheduled=False, reason Unschedulable), and an
unschedulable one is deleted, as replay drops it, before the next is created. At the end the
bound pods are read back: the allocation ratio is the sum of their GPU milli over the slice's
capacity; no GPU may be over its capacity (the sums of the `extender.example/gpu-assignment`
shares per device), every pod's assignment must name GPUs of its own node, as many as it asked
for, each with its share, and the sums per node must be what its pods asked for.

FGD's target workload (`--workload`):
* `pinned` (the default): each plugin argument `workload` in the policy file is replaced by the
  slice's shapes (extender.model.gpushare.top_shapes of its pods, the distribution replay's
  `--workload trace` gives FGD), written to a policy variant that both sides load, and replay
  runs with `--workload online` semantics (no priming), so both read the same file and nothing
  is learned. This isolates what the check is about: the live path (the queue, the cache, the
  binds, the device ledger) against the offline one.
* `learned`: the policy file as it is on both sides, replay without priming: both learn from the
  pods they see. Retries of unschedulable pods make the live scheduler see more pods.

Usage:
    python -m bench.replay_live --nodes NODES.csv --pods PODS.csv --policy config/replay/fgd.yaml \\
        [--policy ...] [--slice 100] [--seed 42] [--workload pinned|learned] [--json]

Needs KUBEBUILDER_ASSETS (etcd, kube-apiserver). Exit status 1 when a policy is more than
--tolerance points off, or an invariant is broken.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from extender.errors import InvalidObject  # noqa: E402
from extender.model.devices import (  # noqa: E402
    ASSIGNMENT_ANNOTATION,
    FULL_CORES,
    node_inventory,
    parse_assignment,
)
from extender.model.gpushare import MILLI, PodShape, top_shapes  # noqa: E402
from extender.replay.arrivals import Arrivals, arrivals, renamed_nodes  # noqa: E402
from extender.replay.runner import RunResult, run  # noqa: E402
from extender.replay.traces import NAMESPACE, Trace, TracePod, read_trace  # noqa: E402

SCHEDULER_NAME = "extender-scheduler"
LEDGERS = "replay-ledgers"  # the device ledger's Leases (extender schedule --lease-namespace)
TOLERANCE = 0.5  # points of allocation ratio
POD_TIMEOUT = 60.0  # seconds one pod may take to be bound or reported unschedulable
WORKLOADS = ("pinned", "learned")


# ---- the slice -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Slice:
    """The nodes (under the run's names) and pods (in arrival order) both sides get."""

    trace: Trace  # the slice as a trace: its nodes renamed, its pods in order
    order: Arrivals  # the pods in order, and the identity renaming (the nodes carry their names)
    seed: int

    @property
    def capacity(self) -> int:
        return self.trace.gpu_capacity


def make_slice(trace: Trace, seed: int, size: int, *, tune: float = 1.3) -> Slice:
    """The first `size` nodes of the seed's node order and the pods of its arrival order up to
    100 % of their GPUs (the walk stops at the first pod that would pass it)."""
    if size < 1:
        raise ValueError(f"--slice: expected at least 1 node, not {size}")
    order = arrivals(trace, seed, tune)
    nodes = sorted(renamed_nodes(trace.nodes, order.node_names), key=lambda node: node["metadata"]["name"])[:size]
    sliced = Trace(tuple(nodes), (), trace.source)
    capacity = sliced.gpu_capacity
    if capacity <= 0:
        raise ValueError(f"{trace.source}: the first {size} nodes of seed {seed} have no GPUs")
    pods: list[TracePod] = []
    asked = 0
    for pod in order.pods:
        if asked + pod.gpu > capacity:
            break
        pods.append(pod)
        asked += pod.gpu
    names = {node["metadata"]["name"]: node["metadata"]["name"] for node in nodes}
    return Slice(Trace(tuple(nodes), tuple(pods), f"{trace.source}[{size} nodes, seed {seed}]"),
                 Arrivals(tuple(pods), names), seed)


def shape_args(shapes: Sequence[PodShape]) -> list[dict[str, Any]]:
    """The pinned `workload` argument for these shapes: FGD's target workload from them, as
    replay's `--workload trace` makes it (top_shapes)."""
    counts: dict[PodShape, float] = {}
    for shape in shapes:
        counts[shape] = counts.get(shape, 0.0) + 1
    return [{"cpu": shape.cpu, "gpuMilli": shape.milli, "gpus": shape.count, "types": list(shape.types),
             "weight": weight} for weight, shape in top_shapes(counts).shapes]


def pinned_policy(policy: Path, shapes: Sequence[PodShape], out_dir: Path) -> tuple[Path, int]:
    """A copy of the policy file with every plugin's `workload` argument pinned to `shapes`
    (in `out_dir`, under the same file name, so the policy keeps its name); how many it pinned."""
    document = yaml.safe_load(policy.read_text(encoding="utf-8"))
    pinned = shape_args(shapes)
    count = 0
    for section in ("filters", "scores"):
        for entry in (document or {}).get(section) or []:
            args = entry.get("args") if isinstance(entry, Mapping) else None
            if isinstance(args, dict) and "workload" in args:
                args["workload"] = copy.deepcopy(pinned)  # no YAML anchors between the two plugins
                count += 1
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / policy.name
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path, count


# ---- the replay side -----------------------------------------------------------------------


def replay_slice(piece: Slice, policy: Path) -> tuple[RunResult, list[str | None]]:
    """`extender replay` on the slice, in its order: the result and each pod's node (None: dropped).
    No priming: the policy file's workload (pinned by the caller, or learned) is what FGD uses."""
    nodes: list[str | None] = [None] * len(piece.order.pods)

    def placed_on(index: int, node: str | None) -> None:
        nodes[index] = node

    result = run(piece.trace, str(policy), piece.seed, workload="online", order=piece.order, placed_on=placed_on)
    return result, nodes


# ---- the live side -------------------------------------------------------------------------


@dataclass
class LiveResult:
    nodes: list[str | None]  # each pod's node, None when it was unschedulable (and deleted)
    used: int  # GPU milli held by the bound pods, from their requests
    seconds: float  # creating the pods until the last one was decided
    problems: list[str] = field(default_factory=list)  # broken invariants, one line each

    @property
    def placed(self) -> int:
        return sum(1 for node in self.nodes if node is not None)


def create_nodes(kube: Any, nodes: Sequence[Mapping[str, Any]]) -> None:
    """The slice's nodes as a kubelet and the node lifecycle controller would leave them."""
    for node in nodes:
        metadata = node["metadata"]
        allocatable = node["status"]["allocatable"]
        kube.create_node(metadata["name"], cpu=allocatable["cpu"], memory=allocatable["memory"],
                         pods=allocatable["pods"], labels=metadata.get("labels") or {},
                         annotations=metadata.get("annotations") or {})


def _unschedulable(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _decided(kube: Any, name: str, timeout: float) -> dict[str, Any]:
    """The pod once it is bound or reported unschedulable (polled: 2 ms at first, then up to 20 ms)."""
    deadline = time.monotonic() + timeout
    pause = 0.002
    while True:
        pod = kube.get_pod(name, NAMESPACE)
        if pod is None:
            raise RuntimeError(f"pod {NAMESPACE}/{name} disappeared before it was scheduled")
        if (pod.get("spec") or {}).get("nodeName") or _unschedulable(pod):
            return pod  # type: ignore[no-any-return]
        if time.monotonic() >= deadline:
            raise TimeoutError(f"pod {NAMESPACE}/{name} neither bound nor reported unschedulable after {timeout}s; "
                               f"its status: {json.dumps(pod.get('status'))}")
        time.sleep(pause)
        pause = min(0.02, pause * 1.5)


def schedule_live(kube: Any, piece: Slice, *, scheduler_name: str = SCHEDULER_NAME, timeout: float = POD_TIMEOUT,
                  progress: Callable[[int], None] | None = None) -> LiveResult:
    """Create the slice's pods one at a time (the scheduler must be running) and read the end state."""
    nodes: list[str | None] = []
    started = time.perf_counter()
    for index, trace_pod in enumerate(piece.order.pods):
        raw = json.loads(json.dumps(trace_pod.raw))
        raw["metadata"].pop("uid", None)
        raw["metadata"]["namespace"] = NAMESPACE
        raw["spec"]["schedulerName"] = scheduler_name
        raw.pop("status", None)
        name = raw["metadata"]["name"]
        kube.call("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", raw)
        pod = _decided(kube, name, timeout)
        node = (pod.get("spec") or {}).get("nodeName") or None
        if node is None:
            kube.delete_pod(name, NAMESPACE, grace_period_seconds=0)
        nodes.append(node)
        if progress is not None:
            progress(index + 1)
    seconds = time.perf_counter() - started
    used, problems = check_state(piece, kube.list_pods(NAMESPACE), nodes)
    return LiveResult(nodes, used, seconds, problems)


def check_state(piece: Slice, pods: Sequence[Mapping[str, Any]], nodes: Sequence[str | None]) -> tuple[int, list[str]]:
    """The GPU milli the bound pods asked for, and every broken invariant: a pod bound but not
    recorded (or the reverse), an assignment that is missing, unreadable, for another node, for
    GPUs the node does not have, of the wrong count or share; a GPU over its capacity; a node
    whose assigned milli is not the sum of its pods' requests."""
    problems: list[str] = []
    shapes = {pod.raw["metadata"]["name"]: pod.shape for pod in piece.order.pods}
    expected = {piece.order.pods[i].raw["metadata"]["name"]: node for i, node in enumerate(nodes) if node}
    devices: dict[str, dict[str, tuple[int, int]]] = {}  # node -> device id -> (memory, cores) capacity
    for node_object in piece.trace.nodes:
        inventory = node_inventory(node_object["metadata"].get("annotations"))
        devices[node_object["metadata"]["name"]] = {d.id: (d.memory, d.cores) for d in inventory.devices} \
            if inventory is not None else {}
    held: dict[tuple[str, str], list[int]] = {}  # (node, device) -> [memory, cores, pods]
    assigned_milli: dict[str, int] = {}
    asked_milli: dict[str, int] = {}
    used = 0
    seen: set[str] = set()
    for pod in pods:
        name = pod["metadata"]["name"]
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            problems.append(f"pod {name} is still there and not bound (an unschedulable pod is deleted)")
            continue
        seen.add(name)
        if expected.get(name) != node:
            problems.append(f"pod {name} is bound to {node}, the run saw it on {expected.get(name)}")
        shape = shapes.get(name)
        if shape is None:
            problems.append(f"pod {name} is not one of the slice's")
            continue
        used += shape.gpu
        asked_milli[node] = asked_milli.get(node, 0) + shape.gpu
        text = (pod["metadata"].get("annotations") or {}).get(ASSIGNMENT_ANNOTATION)
        if not shape.count:
            if text is not None:
                problems.append(f"pod {name} asks for no GPU but has an assignment: {text}")
            continue
        if text is None:
            problems.append(f"pod {name} on {node} asks for {shape.count}x{shape.milli}m GPU and has no assignment")
            continue
        try:
            assignment = parse_assignment(text)
        except InvalidObject as exc:
            problems.append(f"pod {name}: {exc}")
            continue
        if assignment.node != node:
            problems.append(f"pod {name} is bound to {node}, its assignment names {assignment.node}")
        shares = assignment.shares()
        want = (shape.milli, shape.milli * FULL_CORES // MILLI)
        if len(shares) != shape.count or any((memory, cores) != want for _, memory, cores in shares):
            problems.append(f"pod {name} asks for {shape.count} GPU(s) of {want[0]} memory and {want[1]} % cores, "
                            f"its assignment holds {shares}")
        for device, memory, cores in shares:
            if device not in devices.get(node, {}):
                problems.append(f"pod {name}'s assignment names {device}, not a GPU of {node}")
            entry = held.setdefault((node, device), [0, 0, 0])
            entry[0] += memory
            entry[1] += cores
            entry[2] += 1
            assigned_milli[node] = assigned_milli.get(node, 0) + memory * MILLI // \
                devices.get(node, {}).get(device, (MILLI, FULL_CORES))[0]
    for name in sorted(set(expected) - seen):
        problems.append(f"pod {name} was bound to {expected[name]} and is gone")
    for (node, device), (memory, cores, count) in sorted(held.items()):
        capacity = devices.get(node, {}).get(device)
        if capacity is not None and (memory > capacity[0] or cores > capacity[1]):
            problems.append(f"GPU {device} of {node} is over its capacity: {count} pods hold {memory} of {capacity[0]} "
                            f"memory and {cores} of {capacity[1]} % cores")
    for node in sorted(set(asked_milli) | set(assigned_milli)):
        if asked_milli.get(node, 0) != assigned_milli.get(node, 0):
            problems.append(f"node {node}: its pods ask for {asked_milli.get(node, 0)} milli-GPU, their assignments "
                            f"hold {assigned_milli.get(node, 0)}")
    return used, problems


# ---- both, compared --------------------------------------------------------------------------


@dataclass
class Comparison:
    policy: str
    seed: int
    nodes: int
    pods: int
    capacity: int
    pinned: int  # plugin arguments pinned to the slice's workload (0 with --workload learned)
    replay_ratio: float
    live_ratio: float
    replay_placed: int
    live_placed: int
    same_node: int  # pods on the same node (or dropped) on both sides
    first_difference: int | None  # index of the first pod placed differently
    replay_seconds: float
    live_seconds: float
    problems: list[str]

    @property
    def difference(self) -> float:
        return abs(self.live_ratio - self.replay_ratio)

    def ok(self, tolerance: float = TOLERANCE) -> bool:
        return not self.problems and self.difference <= tolerance

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "seed": self.seed, "nodes": self.nodes, "pods": self.pods,
                "capacity_milli": self.capacity, "pinned": self.pinned,
                "replay_ratio": round(self.replay_ratio, 2), "live_ratio": round(self.live_ratio, 2),
                "difference": round(self.difference, 2), "replay_placed": self.replay_placed,
                "live_placed": self.live_placed, "same_node": self.same_node,
                "first_difference": self.first_difference, "replay_seconds": round(self.replay_seconds, 2),
                "live_seconds": round(self.live_seconds, 2), "problems": self.problems}


def prepare(piece: Slice, policy: Path, workdir: Path, workload: str) -> tuple[Path, int]:
    """The policy file both sides load, and how many workload arguments were pinned."""
    if workload not in WORKLOADS:
        raise ValueError(f"--workload: expected one of {', '.join(WORKLOADS)}, not {workload!r}")
    if workload == "learned":
        return policy, 0
    return pinned_policy(policy, [pod.shape for pod in piece.order.pods], workdir / "policies")


def compare(piece: Slice, policy: Path, pinned: int, live: LiveResult, replayed: RunResult,
            replay_nodes: Sequence[str | None]) -> Comparison:
    differences = [i for i, (a, b) in enumerate(zip(live.nodes, replay_nodes, strict=True)) if a != b]
    return Comparison(
        policy.stem, piece.seed, len(piece.trace.nodes), len(piece.order.pods), piece.capacity, pinned,
        round(replayed.gpu_milli * 100 / piece.capacity, 2), round(live.used * 100 / piece.capacity, 2),
        replayed.placed, live.placed, len(replay_nodes) - len(differences), differences[0] if differences else None,
        replayed.seconds, live.seconds, list(live.problems))


def live_check(kube: Any, kubeconfig: Path, workdir: Path, piece: Slice, policy: Path, *,
               workload: str = "pinned", timeout: float = POD_TIMEOUT, log_name: str = "schedule",
               progress: Callable[[int], None] | None = None) -> Comparison:
    """The slice on a clean real API server (`kube` as its admin): nodes, `extender schedule`
    with the policy, the pods one by one; then replay on the same slice; the two compared."""
    from tests.e2e import processes  # late: the repository's test helpers start the process

    used_policy, pinned = prepare(piece, policy, workdir, workload)
    kube.ensure_namespace(NAMESPACE)
    kube.ensure_namespace(LEDGERS)
    create_nodes(kube, piece.trace.nodes)
    scheduler = processes.schedule(
        kubeconfig, workdir, scheduler_name=SCHEDULER_NAME, policy=used_policy, name=log_name,
        extra=["--percentage-of-nodes-to-score", "100", "--disable-preemption", "--no-leader-elect",
               "--lease-namespace", LEDGERS, "--log-level", "WARNING"])
    scheduler.start(timeout=60)
    try:
        live = schedule_live(kube, piece, timeout=timeout, progress=progress)
    finally:
        code = scheduler.stop()
    if code != 0:
        live.problems.append(f"extender schedule exited with {code} after SIGTERM (log: {scheduler.log_path})")
    replayed, replay_nodes = replay_slice(piece, used_policy)
    return compare(piece, policy, pinned, live, replayed, replay_nodes)


def _table(rows: Sequence[Comparison]) -> str:
    lines = [f"{'policy':<12} {'seed':>4} {'nodes':>5} {'pods':>5} {'replay %':>9} {'live %':>7} {'diff':>5} "
             f"{'same node':>9} {'replay s':>8} {'live s':>7}  verdict"]
    for row in rows:
        verdict = "ok" if row.ok() else ("BROKEN: " + row.problems[0] if row.problems else "DIVERGES")
        lines.append(f"{row.policy:<12} {row.seed:>4} {row.nodes:>5} {row.pods:>5} {row.replay_ratio:>9.2f} "
                     f"{row.live_ratio:>7.2f} {row.difference:>5.2f} {row.same_node:>4}/{row.pods:<4} "
                     f"{row.replay_seconds:>8.1f} {row.live_seconds:>7.1f}  {verdict}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replay_live", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", required=True, help="openb node CSV")
    parser.add_argument("--pods", required=True, help="openb pod CSV")
    parser.add_argument("--policy", action="append", required=True, help="policy file (repeatable)")
    parser.add_argument("--slice", type=int, default=100, help="nodes in the slice [100]")
    parser.add_argument("--seed", type=int, default=42, help="the seed of the node and pod order [42]")
    parser.add_argument("--tune", type=float, default=1.3, help="replay's --tune for the order [1.3]")
    parser.add_argument("--workload", choices=WORKLOADS, default="pinned",
                        help="FGD's target workload on both sides: the slice's shapes pinned, or learned [pinned]")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE, help="points [0.5]")
    parser.add_argument("--pod-timeout", type=float, default=POD_TIMEOUT, help="seconds per pod [60]")
    parser.add_argument("--json", action="store_true", help="one JSON object per policy")
    args = parser.parse_args(argv)

    from extender.errors import ExtenderError
    from tests.e2e.controlplane import ControlPlane

    try:
        piece = make_slice(read_trace(nodes=args.nodes, pods=args.pods), args.seed, args.slice, tune=args.tune)
    except (ExtenderError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"slice: {len(piece.trace.nodes)} nodes, {piece.capacity // MILLI} GPUs, {len(piece.order.pods)} pods "
          f"asking {sum(p.gpu for p in piece.order.pods) * 100 / piece.capacity:.1f} % of them", file=sys.stderr)
    rows = []
    for policy in args.policy:
        workdir = Path(tempfile.mkdtemp(prefix="replay-live-"))
        print(f"{Path(policy).stem}: the scheduler's log and the policy both sides load are under {workdir}",
              file=sys.stderr)
        with ControlPlane() as plane:
            def progress(done: int, name: str = Path(policy).stem) -> None:
                if done % 100 == 0:
                    print(f"  {name}: {done}/{len(piece.order.pods)} pods", file=sys.stderr)

            row = live_check(plane.client, plane.kubeconfig, workdir, piece, Path(policy), workload=args.workload,
                             timeout=args.pod_timeout, progress=progress)
        rows.append(row)
        if args.json:
            print(json.dumps(row.to_json()), flush=True)
        for problem in row.problems[:20]:
            print(f"  {row.policy}: {problem}", file=sys.stderr)
    if not args.json:
        print(_table(rows))
    return 0 if all(row.ok(args.tolerance) for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
