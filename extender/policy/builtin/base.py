"""Shared behaviour of the built-in plugins.

Built-ins do their per-pod work in `prefilter`/`prescore` and return a closure for
the per-node work. The engine calls those; `filter`/`score` exist so a built-in can
also be used the simple way (tests, explain, third-party code) with the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import enqueue
from extender.policy.builtin import arguments
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView
from extender.policy.plugins import (
    FilterPlugin,
    FilterResult,
    NodeCheck,
    NodeScore,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
)
from extender.policy.status import Status


class TakesNoArgs:
    """A plugin without args: its factory refuses any key, so that a typo never passes silently."""

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Self:
        arguments.load(arguments.NONE, args)
        return cls()


class PrefilteredFilter(PreFilterPlugin, FilterPlugin):
    """A filter whose whole logic lives in `prefilter(pod)`."""

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | Status | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def filter(self, pod: PodView, node: NodeInfo) -> FilterResult:
        """One node at a time: slower than the engine's path, same answer."""
        check = self.prefilter(pod, EMPTY_CLUSTER)
        if check is None or isinstance(check, Status):
            return check
        return check(node)


class PrescoredScorer(PreScorePlugin, ScorePlugin):
    """A scorer whose whole logic lives in `prescore(pod)`."""

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def score(self, pod: PodView, node: NodeInfo) -> float:
        fn = self.prescore(pod, EMPTY_CLUSTER, [node])
        return 0 if fn is None else fn(node)


def identity(scores: list[float] | tuple[float, ...]) -> list[float]:
    """For scorers that are already on 0..100 (kube-scheduler: no ScoreExtensions)."""
    return list(scores)


def default_normalize_int(scores: list[float] | tuple[float, ...], *, reverse: bool = False) -> list[float]:
    """kube-scheduler's `helper.DefaultNormalizeScore`, integer arithmetic included."""
    top = max(scores, default=0)
    if top <= 0:
        return [100] * len(scores) if reverse else [0] * len(scores)
    if reverse:
        return [100 - (100 * int(s) // int(top)) for s in scores]
    return [100 * int(s) // int(top) for s in scores]


def _uses_claim(pod: PodView, key: str) -> bool:
    """The volume plugins' claim hints (isSchedulableAfterPersistentVolumeClaimChange): a changed
    claim may help only the pods that use it; a change without a key, every pod."""
    if not key:
        return True
    namespace, _, claim = key.partition("/")
    return pod.namespace == namespace and any(c.name == claim for c in pod.volumes.claims)


# What the volume plugins register: any storage object's change, a claim's only for its users.
STORAGE_EVENTS = (enqueue.on(enqueue.PERSISTENT_VOLUME_CLAIMS, hint=_uses_claim),
                  *enqueue.on_each([r for r in enqueue.STORAGE if r != enqueue.PERSISTENT_VOLUME_CLAIMS]))
