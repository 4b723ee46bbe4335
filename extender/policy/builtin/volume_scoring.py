"""The opt-in VolumeBinding scorer: how full the volumes the pod would get on each node are.

kube-scheduler v1.36's VolumeBinding Score, which it runs only with the alpha
StorageCapacityScoring feature gate (off by default), so no default policy here uses it
either (`scores: - name: VolumeBinding` to opt in). For each node, the volumes the filter
would bind there are grouped by storage class: requested (the claims' sizes) against
capacity (the volumes'), or, when the pod only needs provisioning, against the
CSIStorageCapacity reachable from the node; each class's utilization goes through the
`shape` (a broken line, 0..10 per point, times 10), and the node gets the classes' mean.
No normalisation: the scores are already 0..100.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import names
from extender.policy.builtin import arguments
from extender.policy.builtin.base import identity
from extender.policy.builtin.volume_binding import NodeVolumes, find_pod_volumes, pod_claims
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView
from extender.policy.plugins import NodeScore, PreScorePlugin, ScorePlugin
from extender.policy.status import Status

NAME = names.VOLUME_BINDING

MAX_UTILIZATION = 100
MAX_CUSTOM_SCORE = 10
DEFAULT_SHAPE = ((0, MAX_CUSTOM_SCORE), (100, 0))  # StorageCapacityScoring's default: prefer room


def _increasing(args: dict[str, Any]) -> tuple[tuple[int, int], ...]:
    """ValidateVolumeBindingArgs' shape: utilizations 0..100, strictly increasing; scores 0..10."""
    points = tuple((point["utilization"], point["score"]) for point in args["shape"])
    for i in range(1, len(points)):
        if points[i][0] <= points[i - 1][0]:
            raise arguments.Invalid({"shape": {i: {"utilization": ["must be greater than the previous point's"]}}})
    return points


_POINTS = "expected a non-empty list of {utilization, score}"
_ARGS = arguments.schema({"shape": arguments.items(arguments.schema({
    "utilization": arguments.integer(minimum=0, maximum=MAX_UTILIZATION),
    "score": arguments.integer(minimum=0, maximum=MAX_CUSTOM_SCORE),
}).load, _POINTS, empty=_POINTS, default=tuple({"utilization": u, "score": s} for u, s in DEFAULT_SHAPE))}, _increasing)


def broken_linear(shape: tuple[tuple[int, int], ...], utilization: int) -> int:
    """helper.BuildBrokenLinearFunction, on 0..100 scores (shape scores times 10)."""
    for i, (point, score) in enumerate(shape):
        if utilization <= point:
            if i == 0:
                return score * 10
            before, before_score = shape[i - 1]
            return before_score * 10 + _go_div((score - before_score) * 10 * (utilization - before), point - before)
    return shape[-1][1] * 10


def _go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def capacity_score(shape: tuple[tuple[int, int], ...], classes: Mapping[str, tuple[int, int]]) -> int:
    """buildScorerFunction: per class, the shape at requested/capacity; the classes' rounded mean."""
    if not classes:
        return 0
    total = 0
    for requested, capacity in classes.values():
        if capacity == 0 or requested > capacity:
            total += broken_linear(shape, MAX_UTILIZATION)
        else:
            total += broken_linear(shape, requested * MAX_UTILIZATION // capacity)
    mean = total / len(classes)
    return int(mean + 0.5) if mean >= 0 else -int(-mean + 0.5)


def _class_resources(found: NodeVolumes) -> dict[str, tuple[int, int]]:
    """Requested and capacity per class: of the volumes to bind, else of the claims to provision
    with the capacity the node can reach (kube-scheduler's Score with StorageCapacityScoring)."""
    classes: dict[str, tuple[int, int]] = {}
    if found.static:
        for claim, volume in found.static:
            requested, capacity = classes.get(volume.class_name, (0, 0))
            classes[volume.class_name] = (requested + claim.size, capacity + volume.capacity)
        return classes
    for claim, node_capacity in found.provisions:
        if node_capacity is None:
            continue
        requested, _ = classes.get(claim.class_name, (0, 0))
        classes[claim.class_name] = (requested + claim.size, node_capacity.capacity or 0)
    return classes


@dataclass(frozen=True)
class VolumeBindingScore(PreScorePlugin, ScorePlugin):
    """Opt-in scorer `VolumeBinding`: how full the chosen volumes (or the reachable storage
    capacity) would be on each node, mapped through `shape` (default: emptier is better)."""

    name: ClassVar[str] = NAME
    shape: tuple[tuple[int, int], ...] = DEFAULT_SHAPE

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> VolumeBindingScore:
        return cls(arguments.load(_ARGS, args))

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore | None:
        if not pod.volumes.claims:
            return None
        claims = pod_claims(pod, cluster.storage())
        if isinstance(claims, Status) or not claims.delayed:
            return None
        shape = self.shape

        def score(info: NodeInfo) -> float:
            found = find_pod_volumes(claims, info.node)
            if found.reasons:
                return 0
            return capacity_score(shape, _class_resources(found))

        return score

    def score(self, pod: PodView, node: NodeInfo, cluster: ClusterView | None = None) -> float:
        fn = self.prescore(pod, cluster if cluster is not None else EMPTY_CLUSTER, [node])
        return 0 if fn is None else fn(node)

    normalize_scores = staticmethod(identity)  # no ScoreExtensions: already 0..100

