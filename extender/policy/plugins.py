"""The plugin interfaces: small Protocols, as kube-scheduler's framework has one per extension point.

A filter answers, for one pod and one node, None (the node passes), a reason
string (unschedulable), or a `Status` (to say unresolvable or give a detail).
A scorer returns a number; the engine normalises each scorer's numbers to 0..100.

Both may define `prefilter(pod)` / `prescore(pod)`: called once per pod and per
request, it returns the per-node function with everything about the pod already
computed, or None when the plugin has nothing to say about this pod (the engine
then skips it for every node). Plugins without it get `filter(pod, node)` called
directly, which is all a third-party plugin needs to write.

A per-node check that passes every node whose `NodeView.all_clear` is set, whatever
the pod, may say so with a `passes_clear_nodes = True` attribute: when every check of a
pod does, the webhook looks only at the nodes that are not all clear.

A per-node score function (what `prescore` returns) may carry a `memo_key` attribute (a
hashable naming everything it reads of the pod, when it reads nothing of the cluster but
the node's NodeInfo): the engine then scores a node again only when its NodeInfo changed
since a pod with the same key was scored (NodeInfos are immutable, rebuilt on every change).

A plugin that reads only the node and the pod being placed (never the pods already
on nodes) may say `needs_pods = False`: a webhook whose whole policy says so, and
that does not bind, watches no pods at all (engine.Policy.needs_pods).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.status import Status

FilterResult = Status | str | None
NodeCheck = Callable[[NodeInfo], FilterResult]
NodeScore = Callable[[NodeInfo], float]


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, pod: PodView, node: NodeInfo) -> FilterResult: ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(self, pod: PodView, node: NodeInfo) -> float: ...


class Prefilter(Protocol):
    def prefilter(self, pod: PodView) -> NodeCheck | Status | None:
        """Per-pod setup. A Status here refuses every node for the same reason."""


class Prescore(Protocol):
    def prescore(self, pod: PodView) -> NodeScore | None: ...


class NormalizeScores(Protocol):
    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        """Map raw scores onto 0..100. Without it the engine scales by the highest score."""


# A plugin factory takes the `args` mapping from the policy file and returns a plugin.
# It validates its arguments and raises PolicyError with paths relative to `args`.
PluginFactory = Callable[[Mapping[str, Any]], Any]
