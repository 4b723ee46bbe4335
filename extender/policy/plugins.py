"""The plugin author's contract: one Protocol per extension point, as kube-scheduler's framework has.

A plugin is an object with a `name` that implements one or more of these:

    FilterPlugin     filter(pod, node) -> None | reason | Status           one node at a time
    PreFilterPlugin  prefilter(pod, cluster) -> NodeCheck | Status | None  once per pod
    ScorePlugin      score(pod, node) -> float                             one node at a time
    PreScorePlugin   prescore(pod, cluster, nodes) -> NodeScore | None     once per pod
    NormalizeScores  normalize_scores(scores) -> list[float]               0..100, else scaled
    ReservePlugin    reserve(pod, node, cluster) -> Reservation | Status | None
                     (PreBind: the Reservation's `actions`, carried out by the binder;
                      Unreserve: its `release`, and its `undo` writes; see policy/reservations.py)
    PostFilterPlugin post_filter(pod, failed, cluster) -> actions             no node fits
                     (API writes that may make the pod fit later, such as deallocating an idle
                      resource claim: plain data carried out by the binder, as PreBind's are)
    EnqueueExtensions events_to_register() -> EventHints                     once, at load
                     (the cluster events after which the plugin's refusal may change, each
                      with an optional queueing hint: policy/enqueue.py. A plugin without it
                      is asked again after every event.)

A filter answers None (the node passes), a reason string (unschedulable), or a `Status`
(to say unresolvable or give a detail). A scorer returns a number. `prefilter`/`prescore`
do the per-pod work once and return the per-node function, or None when the plugin has
nothing to say about this pod (the engine then skips it for every node); a Status from
`prefilter` refuses every node for the same reason. `cluster` is a read-only ClusterView
(policy/cluster_view.py) for the plugins that look beyond one node; the others ignore it.
When a plugin has both `prefilter` and `filter`, the engine calls `prefilter`: `filter`
is then the same answer one node at a time (tests, third-party callers).

A plugin may implement these by subclassing the Protocols (the built-ins do, so their
type says which points they serve) or just by having the methods: the engine classifies
each plugin once, when its policy is built (`extension_points`), and dispatches on that.

Marks, read once per pod, never per node:
* a per-node check may be an `UpdatableCheck` (PreFilterExtensions' AddPod/RemovePod:
  `updated(changes)` gives the check as if pods were added or removed on other nodes; only
  checks that count pods elsewhere need it);
* `prefilter` may return a `Check(fn, ...)` to declare, of its per-node function:
  `passes_clear_nodes=True`, it passes every node whose `NodeView.all_clear` is set, whatever
  the pod (when every check of a pod does, the webhook looks only at the nodes that are not
  all clear); `memo_key`, a hashable naming everything it reads of the pod, when it reads
  nothing but the node's NodeInfo (when every check of a pod has one, the engine filters a
  node again only when its NodeInfo changed since a pod with the same keys was filtered);
  `only_nodes`, a frozenset of node names (kube-scheduler's PreFilterResult): every other
  node fails it, so the standalone cycle filters only those (NodeAffinity's `metadata.name`
  fields: a DaemonSet pod names its one node among 15,000);
* `prescore` may return a `Score(fn, ...)` to declare `memo_key` with the same promise (the
  engine then scores a node again only when its NodeInfo changed since a pod with the same
  key was scored) and `explain(node)`, the score's parts for `extender explain`; a per-node
  score object may be a `NodesNormalizer`, whose own `normalize(scores, nodes)` takes
  precedence over the plugin's.

Plugin declarations (class attributes, read when the policy loads):
* `needs_pods = False`: the plugin reads only the node and the pod being placed, never the
  pods already on nodes; a webhook whose whole policy says so, and that does not bind,
  watches no pods at all (engine.Policy.needs_pods). Without it pods are assumed read.
* `needs_usage = True`: the plugin reads measured node usage (policy/usage_settings.py).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.cluster_view import ClusterView, PodChange
from extender.policy.enqueue import EventHint
from extender.policy.reservations import Reservation
from extender.policy.status import Status

FilterResult = Status | str | None
NodeCheck = Callable[[NodeInfo], FilterResult]
NodeScore = Callable[[NodeInfo], float]


class Named(Protocol):
    """Every plugin's name, as the policy file and the reasons spell it."""

    if TYPE_CHECKING:  # read-only for the type checker, so a ClassVar (the built-ins) implements it
        @property
        def name(self) -> str: ...
    else:  # a bare annotation at run time: no descriptor, so a subclass may still set `name` per instance
        name: str


@runtime_checkable
class FilterPlugin(Named, Protocol):
    def filter(self, pod: PodView, node: NodeInfo) -> FilterResult: ...


@runtime_checkable
class PreFilterPlugin(Named, Protocol):
    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | Status | None:
        """Per-pod setup: the per-node check, a Status refusing every node, or None (skip)."""


@runtime_checkable
class ScorePlugin(Named, Protocol):
    def score(self, pod: PodView, node: NodeInfo) -> float: ...


@runtime_checkable
class PreScorePlugin(Named, Protocol):
    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore | None:
        """Per-pod setup over the nodes to be scored: the per-node score function, or None (skip)."""


@runtime_checkable
class NormalizeScores(Protocol):
    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        """Map raw scores onto 0..100. Without it the engine scales by the highest score."""


@runtime_checkable
class ReservePlugin(Named, Protocol):
    def reserve(self, pod: PodView, node: NodeInfo, cluster: ClusterView) -> Reservation | Status | None:
        """Claim what the pod will use on its chosen node, before the next pod is considered."""


@runtime_checkable
class PostFilterPlugin(Named, Protocol):
    def post_filter(self, pod: PodView, failed: Mapping[str, Status], cluster: ClusterView) -> Sequence[Any]:
        """No node fits (`failed`: each node's refusal): the API writes to make, if any."""


@runtime_checkable
class EnqueueExtensions(Named, Protocol):
    def events_to_register(self) -> Sequence[EventHint]:
        """The cluster events after which a pod this plugin refused may fit (kube-scheduler's
        EventsToRegister), each with its queueing hint. Asked once, when the policy loads."""


@runtime_checkable
class UpdatableCheck(Protocol):
    """A per-node check that depends on pods on other nodes (kube-scheduler's AddPod/RemovePod)."""

    def __call__(self, node: NodeInfo) -> FilterResult: ...

    def updated(self, changes: Sequence[PodChange]) -> NodeCheck: ...


@runtime_checkable
class DeclaresPods(Protocol):
    """`needs_pods = False`: the plugin reads only the node and the pod being placed (see the
    module docstring). Without it, pods are assumed read."""

    needs_pods: bool


@runtime_checkable
class DeclaresUsage(Protocol):
    """`needs_usage = True`: the plugin reads measured node usage (policy/usage_settings.py)."""

    needs_usage: bool


@dataclass(frozen=True, slots=True)
class ExtensionPoints:
    """What one plugin implements, found once when its policy is built: the engine's dispatch table."""

    name: str
    plugin: Any
    prefilter: Callable[[PodView, ClusterView], NodeCheck | Status | None] | None = None
    filter: Callable[[PodView, NodeInfo], FilterResult] | None = None
    prescore: Callable[[PodView, ClusterView, Sequence[NodeInfo]], NodeScore | None] | None = None
    score: Callable[[PodView, NodeInfo], float] | None = None
    normalize_scores: Callable[[Sequence[float]], list[float]] | None = None
    reserve: Callable[[PodView, NodeInfo, ClusterView], Reservation | Status | None] | None = None
    post_filter: Callable[[PodView, Mapping[str, Status], ClusterView], Sequence[Any]] | None = None
    needs_pods: bool = True
    needs_usage: bool = False
    # The events the plugin registered for (EnqueueExtensions); None: it did not say, so
    # every event may change its answer.
    events: tuple[EventHint, ...] | None = None

    @property
    def filters(self) -> bool:
        return self.prefilter is not None or self.filter is not None

    @property
    def scores(self) -> bool:
        return self.prescore is not None or self.score is not None


def extension_points(plugin: Any) -> ExtensionPoints:
    """Classify `plugin` by the Protocols it implements."""
    return ExtensionPoints(
        name=plugin.name,
        plugin=plugin,
        prefilter=plugin.prefilter if isinstance(plugin, PreFilterPlugin) else None,
        filter=plugin.filter if isinstance(plugin, FilterPlugin) else None,
        prescore=plugin.prescore if isinstance(plugin, PreScorePlugin) else None,
        score=plugin.score if isinstance(plugin, ScorePlugin) else None,
        normalize_scores=plugin.normalize_scores if isinstance(plugin, NormalizeScores) else None,
        reserve=plugin.reserve if isinstance(plugin, ReservePlugin) else None,
        post_filter=plugin.post_filter if isinstance(plugin, PostFilterPlugin) else None,
        needs_pods=plugin.needs_pods is not False if isinstance(plugin, DeclaresPods) else True,
        needs_usage=plugin.needs_usage is True if isinstance(plugin, DeclaresUsage) else False,
        events=tuple(plugin.events_to_register()) if isinstance(plugin, EnqueueExtensions) else None,
    )


@dataclass(frozen=True, slots=True)
class Check:
    """A per-node check with what it declares about itself (see the module docstring): `prefilter`
    returns one instead of the bare function to say so. The engine reads the marks once per pod
    and calls `fn` itself; calling the Check calls `fn`."""

    fn: NodeCheck
    memo_key: Hashable | None = None
    only_nodes: frozenset[str] | None = None
    passes_clear_nodes: bool = False

    def __call__(self, node: NodeInfo) -> FilterResult:
        return self.fn(node)


@dataclass(frozen=True, slots=True)
class Score:
    """A per-node score function with what it declares about itself (see the module docstring):
    `prescore` returns one instead of the bare function to say so. `explain(node)` gives the
    score's parts for `extender explain`."""

    fn: NodeScore
    memo_key: Hashable | None = None
    explain: Callable[[NodeInfo], str] | None = None

    def __call__(self, node: NodeInfo) -> float:
        return self.fn(node)


@runtime_checkable
class NodesNormalizer(Protocol):
    """A per-node score object that normalises its own scores and needs the nodes to (the
    per-pod state of InterPodAffinity's and PodTopologySpread's scorers); it takes precedence
    over the plugin's `normalize_scores`."""

    def __call__(self, node: NodeInfo) -> float: ...

    def normalize(self, scores: Sequence[float], nodes: Sequence[NodeInfo] = ()) -> list[float]: ...


# Whether a per-node object's type implements a Protocol, found once per type: these are asked
# for every check of every pod (preemption: for every candidate), and an isinstance() against
# a runtime Protocol inspects the object's attributes each time.
_IMPLEMENTS: dict[tuple[type, type], bool] = {}


def _implements(obj: object, protocol: type) -> bool:
    key = (obj.__class__, protocol)
    found = _IMPLEMENTS.get(key)
    if found is None:
        found = _IMPLEMENTS[key] = isinstance(obj, protocol)
    return found


def bare(fn: NodeCheck | NodeScore) -> Callable[[NodeInfo], Any]:
    """The function the engine calls per node: a Check's or Score's `fn`, else `fn` itself."""
    return fn.fn if isinstance(fn, (Check, Score)) else fn


def memo_key(fn: NodeCheck | NodeScore) -> Hashable | None:
    """A Check's or Score's `memo_key` (see the module docstring), or None."""
    return fn.memo_key if isinstance(fn, (Check, Score)) else None


def only_nodes(check: NodeCheck) -> frozenset[str] | None:
    """A Check's `only_nodes` (see the module docstring), or None: every node."""
    return check.only_nodes if isinstance(check, Check) else None


def own_normalize(fn: NodeScore) -> Callable[..., list[float]] | None:
    """A per-node score object's own `normalize(scores, nodes)` (NodesNormalizer), or None."""
    return fn.normalize if _implements(fn, NodesNormalizer) else None  # type: ignore[attr-defined]  # by the test


def explainer(fn: NodeScore | None) -> Callable[[NodeInfo], str] | None:
    """A Score's `explain` (its parts, for `extender explain`), or None."""
    return fn.explain if isinstance(fn, Score) else None


def passes_clear_nodes(check: NodeCheck) -> bool:
    """A Check's `passes_clear_nodes` (see the module docstring)."""
    return isinstance(check, Check) and check.passes_clear_nodes


def updatable(check: NodeCheck) -> bool:
    """Whether `check` (or the function a Check wraps) counts pods on other nodes (an UpdatableCheck)."""
    return _implements(bare(check), UpdatableCheck)


def updated_check(check: NodeCheck, changes: Sequence[PodChange]) -> NodeCheck:
    """`check` as if `changes` had happened: its own `updated` when it (or the function a Check
    wraps: its marks hold for the check as it is, not as updated) is an UpdatableCheck, else
    itself (it reads only its NodeInfo, which the caller changes)."""
    inner = bare(check)
    return inner.updated(changes) if _implements(inner, UpdatableCheck) else check  # type: ignore[attr-defined]  # by the test


# A plugin factory takes the `args` mapping from the policy file and returns a plugin.
# It validates its arguments and raises PolicyError with paths relative to `args`.
PluginFactory = Callable[[Mapping[str, Any]], Any]
