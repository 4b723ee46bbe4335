"""Two small plugins that show the interface (see docs/plugins.md in the extender repository).

MaxPodsPerNode (filter): refuse nodes that already run `max` pods or more, a policy
    cap below the kubelet's own `allocatable.pods`, e.g. to limit blast radius.
FewestPods (scorer): prefer the node running the fewest pods; shows `normalize_scores`.

Plugins receive read-only views: `PodView` (extender.model.pods) and `NodeInfo`
(extender.model.nodes: `.node` is the NodeView, `.pod_count`, `.requested`).
They keep no state between calls, so they are safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from extender.errors import PolicyError
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import enqueue
from extender.policy.status import Status, unschedulable

REASON_TOO_MANY = "node(s) had reached the policy's pod limit"


class MaxPodsPerNode:
    """Filter. Args: `max` (integer >= 1), `namespaces` (optional list: only these pods are capped)."""

    name = "MaxPodsPerNode"

    def __init__(self, limit: int, namespaces: frozenset[str] | None = None) -> None:
        self.limit = limit
        self.namespaces = namespaces

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> MaxPodsPerNode:
        """Validate the policy file's args; errors start with the path inside args."""
        unknown = sorted(set(args) - {"max", "namespaces"})
        if unknown:
            raise PolicyError(f"{unknown[0]}: unknown argument (allowed: max, namespaces)")
        limit = args.get("max")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise PolicyError("max: must be an integer of at least 1")
        namespaces = args.get("namespaces")
        if namespaces is not None:
            if not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces):
                raise PolicyError("namespaces: expected a list of strings")
            namespaces = frozenset(namespaces)
        return cls(limit, namespaces)

    def filter(self, pod: PodView, node: NodeInfo) -> Status | str | None:
        """None: the node passes. A string: refused (preemption may help). A Status: anything else."""
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return None
        if node.pod_count >= self.limit:
            # The reason is a fixed phrase (nodes are counted by identical reasons); numbers go in detail.
            return unschedulable(REASON_TOO_MANY, detail=f"{node.pod_count} pods, limit {self.limit}")
        return None

    def events_to_register(self) -> Sequence[enqueue.EventHint]:
        """The standalone queue retries a pod this filter refused only after these (a plugin
        without this method is retried after every cluster event): a node added, or a placed
        pod deleted (one slot freed) of a namespace the cap applies to."""
        return (enqueue.NODE_ADDED, enqueue.on(enqueue.PODS, enqueue.DELETE, hint=self._frees_a_slot))

    def _frees_a_slot(self, pod: PodView, deleted: Any) -> bool:
        return self.namespaces is None or pod.namespace in self.namespaces


class FewestPods:
    """Scorer. No args. Raw score: the pod count; normalised so the emptiest node gets 100."""

    name = "FewestPods"

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> FewestPods:
        if args:
            raise PolicyError(f"{sorted(args)[0]}: unknown argument (FewestPods takes none)")
        return cls()

    def score(self, pod: PodView, node: NodeInfo) -> float:
        return node.pod_count

    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        """Fewer is better: map [min, max] onto [100, 0]; all equal -> all 100."""
        low, high = min(scores, default=0), max(scores, default=0)
        if high == low:
            return [100.0] * len(scores)
        return [100.0 * (high - s) / (high - low) for s in scores]
