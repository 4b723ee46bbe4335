"""The engine: run a policy's filters and scorers for one pod over candidate nodes.

It mirrors kube-scheduler's framework runtime: per-pod work happens once
(`prefilter`/`prescore`), each node stops at its first refusal, the engine stamps
the plugin name on every Status, normalises each scorer to 0..100, checks the
range, weights and sums. It holds no cluster state and does no IO; callers pass
the NodeInfos (from a request body, the watched cache or a snapshot) and, for the
plugins that look beyond one node, a read-only `ClusterView` (see policy/cluster_view.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

from extender.errors import ExtenderError
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.model.records import PodRecord
from extender.policy import enqueue
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView, PodChange
from extender.policy.decisions import Decision
from extender.policy.enqueue import EventHint
from extender.policy.names import NODE_UNUSABLE
from extender.policy.plugins import (
    ExtensionPoints,
    FilterResult,
    NodeCheck,
    NodeScore,
    bare,
    extension_points,
    memo_key,
    only_nodes,
    own_normalize,
    passes_clear_nodes,
    updatable,
    updated_check,
)
from extender.policy.reservations import Reservation, release_all
from extender.policy.status import Code, Status, unresolvable

MAX_SCORE = 100
# Pod shapes whose scores Engine remembers per scorer (see Engine._remembered).
SCORE_MEMO_KEYS = 64
# Pod shapes whose filter verdicts Engine remembers (see FilterCycle.run), and how many
# shapes seen once it keeps in mind: a shape's verdicts are remembered from its second pod.
VERDICT_MEMO_KEYS = 32
SHAPES_SEEN = 1024

# The events after which the engine's own refusal of an unreadable node (NODE_UNUSABLE) may
# change: a node added, or one that became readable.
UNREADABLE_EVENTS = (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_READABLE))

# Per node name, the NodeInfo judged or scored first, then what was remembered of it:
# (info, index of the first refusing check, its Status or None) or (info, a row of scores).
Memo = dict[str, tuple[Any, ...]]


class PluginError(ExtenderError):
    """A plugin failed (raised, or returned an invalid score): the attempt fails, not the node."""


@dataclass(frozen=True, slots=True)
class WeightedScorer:
    plugin: object
    weight: int

    @property
    def name(self) -> str:
        return self.plugin.name  # type: ignore[attr-defined, no-any-return]  # every plugin has a str `name`


@dataclass(frozen=True)
class Policy:
    """A loaded, validated policy: which filters run, which scorers with which weights.

    Each plugin's extension points are found once, here (plugins.extension_points): the
    engine dispatches on these tables, never on what a plugin object happens to have."""

    filters: tuple[object, ...] = ()
    scorers: tuple[WeightedScorer, ...] = ()
    source: str = "<built-in>"
    digest: str = ""
    settings: dict[str, object] = field(default_factory=dict)
    filter_points: tuple[ExtensionPoints, ...] = field(init=False, repr=False, compare=False)
    scorer_points: tuple[tuple[ExtensionPoints, int], ...] = field(init=False, repr=False, compare=False)
    reservers: tuple[ExtensionPoints, ...] = field(init=False, repr=False, compare=False)
    post_filters: tuple[ExtensionPoints, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        found: dict[int, ExtensionPoints] = {}
        for plugin in (*self.filters, *(scorer.plugin for scorer in self.scorers)):
            if id(plugin) not in found:
                found[id(plugin)] = extension_points(plugin)
        object.__setattr__(self, "filter_points", tuple(found[id(p)] for p in self.filters))
        object.__setattr__(self, "scorer_points", tuple((found[id(s.plugin)], s.weight) for s in self.scorers))
        object.__setattr__(self, "reservers", tuple(p for p in found.values() if p.reserve is not None))
        object.__setattr__(self, "post_filters", tuple(p for p in found.values() if p.post_filter is not None))

    @property
    def filter_names(self) -> list[str]:
        return [points.name for points in self.filter_points]

    @property
    def needs_pods(self) -> bool:
        """Whether a plugin reads the pods placed on nodes (their requests, labels, ports,
        volumes): then the webhook must watch every pod. A plugin that reads only the node
        and the pod being placed says `needs_pods = False`; one that says nothing is
        assumed to read them, so a third-party plugin is never starved of pods."""
        return any(points.needs_pods for points in (*self.filter_points, *(p for p, _ in self.scorer_points)))

    def registered_events(self) -> dict[str, tuple[EventHint, ...] | None]:
        """The events each refusal's author registered for, by the name a refusal carries: every
        filter's (None: it did not say, so any event may change its answer), and the engine's
        own for an unreadable node. The standalone queue's hints are built from this."""
        found: dict[str, tuple[EventHint, ...] | None] = {NODE_UNUSABLE: UNREADABLE_EVENTS}
        for points in self.filter_points:
            found[points.name] = points.events
        return found


_REFUSALS = (Code.UNSCHEDULABLE, Code.UNRESOLVABLE)


def _as_status(result: FilterResult, plugin: str) -> Status:
    if result.__class__ is Status and result.plugin == plugin and result.code in _REFUSALS:
        return result  # the common case first: a built-in refusal, stamped already
    if isinstance(result, str):
        return Status(Code.UNSCHEDULABLE, (result,), "", plugin)
    if isinstance(result, Status):
        if result.code == Code.SUCCESS:
            return result
        if result.code == Code.ERROR:
            raise PluginError(f"filter {plugin} failed: {result.reason or result.detail}")
        return result.stamped(plugin)
    raise PluginError(f"filter {plugin} returned {type(result).__name__}, not a reason or None")


def _finite(value: object) -> bool:
    try:
        return math.isfinite(value)  # type: ignore[arg-type]  # any value: a non-number raises TypeError
    except TypeError:
        return False


def default_normalize(scores: Sequence[float]) -> list[float]:
    """kube-scheduler's DefaultNormalizeScore: scale so the best node gets 100."""
    top = max(scores, default=0)
    if top <= 0:
        return [0.0] * len(scores)
    return [max(0.0, s) * MAX_SCORE / top for s in scores]


class FilterCycle:
    """One pod's filters, prepared once (kube-scheduler's PreFilter results), reusable over nodes.

    `run(nodes)` is the engine's filter; preemption asks `status(node)` again and again on
    nodes with pods removed, through `updated(changes)` for the checks that count pods on
    other nodes. Pods nominated to a node with a priority at least the pod's count there
    (kube-scheduler's RunFilterPluginsWithNominatedPods): the node must fit the pod with
    them, and without them, since a nominated pod may never arrive.

    `memo` (Engine.prepare gives one for a pod shape seen before): the verdicts of the checks
    that carry a `memo_key` (they read nothing but the NodeInfo), from earlier pods with the
    same keys, per node. NodeInfos are immutable and rebuilt whenever their node or pods
    change, so a node whose NodeInfo is the one judged before gets the same verdict from
    those checks without running them: for a backlog of one Deployment's replicas, only the
    node of the last bind is judged again. The other checks (counting pods elsewhere) still
    run on every node, in their place in the order.
    """

    def __init__(self, pod: PodView, checks: list[tuple[str, NodeCheck]], refuse_all: Status | None,
                 nominations: Mapping[str, Sequence[PodRecord]], memo: Memo | None = None) -> None:
        self.pod = pod
        # As the plugins gave them (a Check's marks read once per pod), and the bare functions
        # the per-node loops call (no wrapper's call per node).
        self.checks = checks
        self._bare = [(name, bare(check)) for name, check in checks]
        self.refuse_all = refuse_all
        self.nominations = nominations
        self.memo = memo
        # kube-scheduler's PreFilterResult, set by Engine.prepare: the only nodes that can pass,
        # or None for every node, and the status of the others (AbsentNodesStatus).
        self.only: frozenset[str] | None = None
        self.absent: Status | None = None
        # Whether any check counts pods on other nodes (an UpdatableCheck), found out at the
        # first `updated` (preemption's dry runs ask it once per victim; a webhook call never).
        self._updatable: bool | None = None
        # With a memo: the checks with a memo_key, and the others with how many of those come
        # before each. (Preemption builds a cycle per dry run, with no memo: nothing to split.)
        self._remembered: list[tuple[str, NodeCheck]] = []
        self._others: list[tuple[int, str, NodeCheck]] = []
        if memo is not None:
            for (name, check), (_, call) in zip(checks, self._bare, strict=True):
                if memo_key(check) is None:
                    self._others.append((len(self._remembered), name, call))
                else:
                    self._remembered.append((name, call))

    @property
    def passes_clear_nodes(self) -> bool:
        """Whether every all-clear node passes (Ready, schedulable, no other condition True,
        readable; NodeView.all_clear): each check says so (`passes_clear_nodes`), no prefilter
        refused the pod and no nominated pod counts. The webhook's default policy, for every
        pod: the caller may then look only at the other nodes (ClusterState.screen)."""
        return self.refuse_all is None and not self.nominations and all(
            passes_clear_nodes(check) for _, check in self.checks)

    @property
    def counts_elsewhere(self) -> bool:
        """Whether a check counts pods on other nodes (an UpdatableCheck): only then does a
        change of pods need `updated`; preemption's dry runs skip writing the changes otherwise."""
        if self._updatable is None:
            self._updatable = any(updatable(check) for _, check in self.checks)
        return self._updatable

    def updated(self, changes: Sequence[PodChange]) -> FilterCycle:
        """The cycle as if `changes` had happened (pods added or removed on their nodes)."""
        if not changes or not self.counts_elsewhere:
            return self
        checks = [(name, updated_check(check, changes)) for name, check in self.checks]
        if all(new is old for (_, new), (_, old) in zip(checks, self.checks, strict=True)):
            return self  # no check counts pods elsewhere: each reads the NodeInfo it is given
        return FilterCycle(self.pod, checks, self.refuse_all, self.nominations)

    def refusal(self, info: NodeInfo) -> Status | None:
        """The first filter's refusal of `info` as it is (nominated pods ignored), or None."""
        if self.refuse_all is not None:
            return self.refuse_all
        if info.node.error:
            return _unreadable(info)
        return _first_refusal(self._bare, info)[1]

    def status(self, info: NodeInfo) -> Status | None:
        """The refusal of `info`, counting the pods nominated to it with a priority >= the pod's."""
        nominated = self.nominations.get(info.name) if self.nominations else None
        if nominated:
            pod = self.pod
            ahead = [p for p in nominated if p.priority >= pod.priority and p.key != pod.key]
            if ahead:
                node = info.node
                status = self.updated([PodChange(p, node, 1) for p in ahead]).refusal(info.plus(ahead))
                if status is not None:
                    return status
        return self.refusal(info)

    def run(self, nodes: Sequence[NodeInfo]) -> Decision:
        """Filter `nodes`: the decision lists the feasible ones and a Status for each refused one."""
        decision = Decision(pod=self.pod, total=len(nodes))
        failed = decision.failed
        feasible = decision.feasible
        if self.refuse_all is not None:
            for info in nodes:
                failed[info.name] = self.refuse_all
            decision.prefilter = self.refuse_all
            return decision
        if self.memo is not None:
            self._run_remembered(nodes, decision)
            return decision
        if self.nominations:
            for info in nodes:
                status = self.status(info)
                if status is None:
                    feasible.append(info)
                else:
                    failed[info.name] = status
            return decision
        checks = self._bare
        name = ""
        try:
            for info in nodes:
                if info.node.error:
                    failed[info.name] = _unreadable(info)
                    continue
                for name, check in checks:
                    result = check(info)
                    if result is not None:
                        status = _as_status(result, name)
                        if status.code != Code.SUCCESS:
                            failed[info.name] = status
                            break
                else:
                    feasible.append(info)
        except ExtenderError:
            raise
        except Exception as exc:
            raise PluginError(f"filter {name} failed: {exc}") from exc
        return decision

    def _run_remembered(self, nodes: Sequence[NodeInfo], decision: Decision) -> None:
        memo = self.memo
        assert memo is not None
        others = self._others
        failed = decision.failed
        feasible = decision.feasible
        # Preemption keeps pods nominated while their victims leave (PreemptionBasic: nearly
        # always some): only their nodes are judged with them, the others from the memo.
        nominations = self.nominations
        name = ""
        try:
            for info in nodes:
                node_name = info.name
                if nominations and node_name in nominations:
                    status = self.status(info)
                    if status is None:
                        feasible.append(info)
                    else:
                        failed[node_name] = status
                    continue
                known = memo.get(node_name)
                if known is None or known[0] is not info:
                    known = memo[node_name] = (info, *self._remembered_verdict(info))
                _, stop, status = known
                for before, name, check in others:
                    if before > stop:
                        break  # the remembered refusal comes first
                    result = check(info)
                    if result is not None:
                        refusal = _as_status(result, name)
                        if refusal.code != Code.SUCCESS:
                            status = refusal
                            break
                if status is None:
                    feasible.append(info)
                else:
                    failed[node_name] = status
        except ExtenderError:
            raise
        except Exception as exc:
            raise PluginError(f"filter {name} failed: {exc}") from exc

    def _remembered_verdict(self, info: NodeInfo) -> tuple[int, Status | None]:
        """The first refusal among the checks with a memo_key, and its index among them
        (their count when none refuses; -1 for an unreadable node, refused before any check)."""
        if info.node.error:
            return -1, _unreadable(info)
        return _first_refusal(self._remembered, info)


def _narrowed(checks: Sequence[tuple[str, NodeCheck]]) -> tuple[frozenset[str] | None, tuple[str, ...]]:
    """RunPreFilterPlugins' merged PreFilterResult: the intersection of the checks' `only_nodes`
    (None: every node), and the plugins that gave one, sorted."""
    only: frozenset[str] | None = None
    plugins: list[str] = []
    for name, check in checks:
        named = only_nodes(check)
        if named is not None:
            only = named if only is None else only & named
            plugins.append(name)
    return only, tuple(sorted(plugins))


def _unreadable(info: NodeInfo) -> Status:
    return Status(Code.UNRESOLVABLE, ("node(s) could not be read",), info.node.error, NODE_UNUSABLE)


def _first_refusal(checks: Sequence[tuple[str, NodeCheck]], info: NodeInfo) -> tuple[int, Status | None]:
    """The first of `checks` to refuse `info`, as (its index, its Status); (len(checks), None)
    when all pass. FilterCycle.run repeats this loop inline: it runs for every node of every pod."""
    name = ""
    try:
        for index, (name, check) in enumerate(checks):
            result = check(info)
            if result is not None:
                status = _as_status(result, name)
                if status.code != Code.SUCCESS:
                    return index, status
    except ExtenderError:
        raise
    except Exception as exc:
        raise PluginError(f"filter {name} failed: {exc}") from exc
    return len(checks), None


def _make_room(store: dict[Any, Any], limit: int) -> None:
    """Drop the oldest key of `store` when it holds `limit` of them."""
    if len(store) >= limit:
        try:
            store.pop(next(iter(store)))
        except (RuntimeError, StopIteration, KeyError):  # another thread evicted or added one
            pass


def _bounded(store: dict[Hashable, Memo], key: Hashable, limit: int) -> Memo:
    """The memo of `key` in `store`, made (and the oldest key dropped past `limit`) when new."""
    memo = store.get(key)
    if memo is None:
        _make_room(store, limit)
        memo = store[key] = {}
    return memo


def _verdict_key(checks: Sequence[tuple[str, NodeCheck]]) -> Hashable | None:
    """What the checks that read nothing but the NodeInfo read of the pod (None: no such check)."""
    keys = []
    for name, check in checks:
        key = memo_key(check)
        if key is not None:
            keys.append((name, key))
    return tuple(keys) if keys else None


def _scored(name: str, fn: NodeScore, nodes: Sequence[NodeInfo]) -> list[float]:
    try:
        return [fn(info) for info in nodes]
    except ExtenderError:
        raise
    except Exception as exc:
        raise PluginError(f"scorer {name} failed: {exc}") from exc


def _row(fns: Sequence[tuple[str, NodeScore]], info: NodeInfo) -> tuple[float, ...]:
    """One node's raw score from each function, a failure named after its scorer."""
    row = []
    for name, fn in fns:
        try:
            row.append(fn(info))
        except ExtenderError:
            raise
        except Exception as exc:
            raise PluginError(f"scorer {name} failed: {exc}") from exc
    return tuple(row)


class Engine:
    """Stateless apart from its policy; safe to share between threads.

    `cluster` is what plugins read about other nodes and pods in `prefilter`, `prescore`
    and `reserve` (the cluster state in every mode); without one they see an empty cluster.
    """

    def __init__(self, policy: Policy, *, memo_shapes: int = 0) -> None:
        """`memo_shapes`: how many pod shapes the memos keep (0: the defaults, sized for a live
        scheduler's few Deployments). A trace replay sees hundreds of shapes over thousands of
        pods, each worth keeping."""
        self.policy = policy
        self._verdict_shapes = memo_shapes or VERDICT_MEMO_KEYS
        self._first_pods = bool(memo_shapes)  # remember a shape from its first pod
        self._score_shapes = memo_shapes or SCORE_MEMO_KEYS
        # Score functions with a `memo_key`: (scorer, key) -> node name -> (the NodeInfo scored, its raw score).
        self._memos: dict[Hashable, Memo] = {}
        # Pods whose checks all carry a `memo_key`: their keys -> node name -> (NodeInfo, verdict).
        self._verdicts: dict[Hashable, Memo] = {}
        self._seen: dict[Hashable, None] = {}  # keys of one pod so far, oldest first

    def prepare(self, pod: PodView, cluster: ClusterView | None = None) -> FilterCycle:
        """Run every filter's per-pod step once; the result filters any number of nodes."""
        view = cluster if cluster is not None else EMPTY_CLUSTER
        checks: list[tuple[str, NodeCheck]] = []
        for points in self.policy.filter_points:
            name = points.name
            if points.prefilter is None:
                # A filter without prefilter has filter: the loader refuses one with neither (loading._build).
                checks.append((name, partial(cast("Callable[[PodView, NodeInfo], FilterResult]", points.filter), pod)))
                continue
            try:
                check = points.prefilter(pod, view)
            except ExtenderError:
                raise
            except Exception as exc:
                raise PluginError(f"filter {name} failed in prefilter: {exc}") from exc
            if isinstance(check, Status):
                if check.code == Code.SUCCESS:
                    continue
                return FilterCycle(pod, checks, _as_status(check, name), {})
            if check is not None:
                checks.append((name, check))
        only, plugins = _narrowed(checks)
        if only is not None and not only:  # the plugins' node sets do not meet
            reason = (f"node(s) didn't satisfy plugin {plugins[0]}" if len(plugins) == 1
                      else f"node(s) didn't satisfy plugin(s) [{' '.join(plugins)}] simultaneously")
            return FilterCycle(pod, checks, Status(Code.UNRESOLVABLE, (reason,), "", plugins[0]), {})
        cycle = FilterCycle(pod, checks, None, view.nominations(), self._verdict_memo(_verdict_key(checks)))
        if only is not None:
            cycle.only = only
            cycle.absent = Status(Code.UNRESOLVABLE, (f"node(s) didn't satisfy plugin(s) [{' '.join(plugins)}]",),
                                  "", plugins[0])
        return cycle

    def _verdict_memo(self, key: Hashable | None) -> Memo | None:
        """The verdict memo of a pod shape seen before. Not for a shape's first pod: pods of
        a shape of their own (each asking for its own extended resource, say) would each fill
        a memo of every node that no other pod reads, and keep it alive for the collector."""
        if key is None:
            return None
        if self._first_pods or key in self._verdicts or key in self._seen:
            self._seen.pop(key, None)
            return _bounded(self._verdicts, key, self._verdict_shapes)
        _make_room(self._seen, SHAPES_SEEN)
        self._seen[key] = None
        return None

    def filter(self, pod: PodView, nodes: Sequence[NodeInfo], cluster: ClusterView | None = None) -> Decision:
        """Run every filter; the decision lists feasible nodes and a Status for each refused one."""
        return self.prepare(pod, cluster).run(nodes)

    def score(self, pod: PodView, nodes: Sequence[NodeInfo], decision: Decision | None = None,
              cluster: ClusterView | None = None) -> Decision:
        """Score `nodes` (normally the feasible ones) and fill the decision's scores."""
        if decision is None:
            decision = Decision(pod=pod, total=len(nodes))
            decision.feasible.extend(nodes)
        view = cluster if cluster is not None else EMPTY_CLUSTER
        decision.scored = list(nodes)
        count = len(nodes)
        totals = [0.0] * count
        weight_sum = 0
        prepared = []
        for points, weight in self.policy.scorer_points:
            fn = self._score_function(points, pod, nodes, view)
            if fn is not None:
                prepared.append((points, weight, fn))
        columns = self._raw_scores([(points.name, fn) for points, _, fn in prepared], nodes)
        # The weighted sum of the columns that differ between nodes, and of the others (a
        # column with one value on every node, as ImageLocality's 0 or TaintToleration's 100
        # mostly are) a single number added once, at the end.
        constant = 0.0
        for (points, weight, fn), raw in zip(prepared, columns, strict=True):
            name = points.name
            normalized, low, high = self._normalized(points, fn, nodes, raw)
            if len(normalized) != count:
                raise PluginError(f"scorer {name} normalized {count} scores into {len(normalized)}")
            decision.raw_scores[name] = raw
            decision.normalized_scores[name] = normalized
            decision.weights[name] = weight
            weight_sum += weight
            if low == high:
                constant += low * weight
            else:
                totals = [total + value * weight for total, value in zip(totals, normalized)]  # noqa: B905 - checked
        if weight_sum:
            totals = [(t + constant) / weight_sum for t in totals]
        decision.totals = totals
        return decision

    def _normalized(self, points: ExtensionPoints, fn: NodeScore, nodes: Sequence[NodeInfo],
                    raw: list[float]) -> tuple[list[float], float, float]:
        """A scorer's normalized column, with its lowest and highest value, checked to be in 0..100."""
        name = points.name
        try:
            normalized = self._normalizer(points, fn, nodes)(raw)
            # C loops (min, max, isfinite): this runs for every scorer over every node.
            low, high = (min(normalized), max(normalized)) if normalized else (0.0, 0.0)
            in_range = 0 <= low and high <= MAX_SCORE and all(map(math.isfinite, normalized))
            out_of_range = [] if in_range else [v for v in normalized if not 0 <= v <= MAX_SCORE]
        except Exception as exc:  # a non-number, or a bug in normalize_scores: the plugin's fault
            raise PluginError(f"scorer {name} failed to normalize: {exc}") from exc
        if out_of_range:  # NaN and infinities fail 0 <= v <= MAX_SCORE too
            raise PluginError(f"scorer {name} gave {out_of_range[0]}, outside 0..{MAX_SCORE}")
        return normalized, low, high

    @staticmethod
    def _score_function(points: ExtensionPoints, pod: PodView, nodes: Sequence[NodeInfo],
                        cluster: ClusterView) -> NodeScore | None:
        """The scorer's per-node function for this pod, or None when it has nothing to say."""
        if points.prescore is None:
            # A scorer without prescore has score: the loader refuses one with neither (loading._build).
            return partial(cast("Callable[[PodView, NodeInfo], float]", points.score), pod)
        try:
            return points.prescore(pod, cluster, nodes)
        except ExtenderError:
            raise
        except Exception as exc:
            raise PluginError(f"scorer {points.name} failed: {exc}") from exc

    def _raw_scores(self, fns: Sequence[tuple[str, NodeScore]], nodes: Sequence[NodeInfo]) -> list[list[float]]:
        """Each function's raw scores over `nodes`: those with a `memo_key` in one remembered
        pass (Engine._remembered), the others node by node."""
        keys = [memo_key(fn) for _, fn in fns]
        fns = [(name, bare(fn)) for name, fn in fns]
        columns: list[list[float]] = [
            _scored(name, fn, nodes) if key is None else [] for (name, fn), key in zip(fns, keys, strict=True)]
        remembered = [i for i, key in enumerate(keys) if key is not None]
        if remembered:
            found = self._remembered(tuple((fns[i][0], keys[i]) for i in remembered), [fns[i] for i in remembered],
                                     nodes)
            for i, column in zip(remembered, found, strict=True):
                columns[i] = column
        for (name, _), raw in zip(fns, columns, strict=True):
            try:
                finite = all(map(math.isfinite, raw))  # one C loop: this runs for every node
            except TypeError:
                finite = False
            if not finite:
                raise PluginError(f"scorer {name} returned {next(v for v in raw if not _finite(v))!r}")
        return columns

    def _remembered(self, key: Hashable, fns: Sequence[tuple[str, NodeScore]],
                    nodes: Sequence[NodeInfo]) -> list[list[float]]:
        """`fns` over `nodes`, each node scored again only when its NodeInfo is a new object.

        A per-node score function's `memo_key` names everything it reads of the pod;
        NodeInfos are immutable and rebuilt whenever their node or pods change. So for
        pods of one shape (a Deployment's replicas) only the nodes that changed since the
        last such pod are scored: one per bind in a backlog. The functions of one pod
        share one memo (a row of scores per node), so a node costs one look-up, not one
        per scorer.
        """
        memo = _bounded(self._memos, key, self._score_shapes)
        rows: list[tuple[float, ...]] = []
        for info in nodes:
            known = memo.get(info.name)
            if known is not None and known[0] is info:
                rows.append(known[1])  # a row, as _row made
            else:
                row = _row(fns, info)
                memo[info.name] = (info, row)
                rows.append(row)
        if not rows:
            return [[] for _ in fns]
        return [list(column) for column in zip(*rows, strict=True)]

    @staticmethod
    def _normalizer(points: ExtensionPoints, fn: NodeScore, nodes: Sequence[NodeInfo]
                    ) -> Callable[[Sequence[float]], list[float]]:
        """The per-pod function's own `normalize(scores, nodes)` when it has one, else the
        plugin's, else the default."""
        own = own_normalize(fn)
        if own is not None:
            return partial(own, nodes=nodes)
        return points.normalize_scores or default_normalize

    def reserve(self, pod: PodView, node: NodeInfo, cluster: ClusterView | None = None
                ) -> list[Reservation] | Status:
        """Ask every plugin with `reserve` to claim what `pod` needs on `node`, in policy order.

        A refusal releases what the plugins before it reserved and is returned, stamped.
        """
        view = cluster if cluster is not None else EMPTY_CLUSTER
        reservations: list[Reservation] = []
        for points in self.policy.reservers:
            name = points.name
            try:
                # Policy.reservers holds only the plugins whose reserve is set (Policy.__post_init__).
                result = cast("Callable[[PodView, NodeInfo, ClusterView], Reservation | Status | None]",
                              points.reserve)(pod, node, view)
            except ExtenderError:
                release_all(reservations)
                raise
            except Exception as exc:
                release_all(reservations)
                raise PluginError(f"plugin {name} failed in reserve: {exc}") from exc
            if isinstance(result, Status):
                if result.code == Code.SUCCESS:
                    continue
                release_all(reservations)
                return _as_status(result, name)
            if result is not None:
                reservations.append(result)
        return reservations

    def post_filter(self, pod: PodView, failed: Mapping[str, Status], cluster: ClusterView | None = None
                    ) -> list[Any]:
        """No node fits: the API writes the PostFilter plugins ask for, in policy order (preemption
        is the scheduler's own, after these, as DefaultPreemption comes after DynamicResources)."""
        view = cluster if cluster is not None else EMPTY_CLUSTER
        actions: list[Any] = []
        for points in self.policy.post_filters:
            try:
                # Policy.post_filters holds only the plugins whose post_filter is set (Policy.__post_init__).
                post_filter = cast("Callable[[PodView, Mapping[str, Status], ClusterView], Sequence[Any]]",
                                   points.post_filter)
                actions.extend(post_filter(pod, failed, view))
            except ExtenderError:
                raise
            except Exception as exc:
                raise PluginError(f"plugin {points.name} failed in post-filter: {exc}") from exc
        return actions

    def decide(self, pod: PodView, nodes: Sequence[NodeInfo], cluster: ClusterView | None = None) -> Decision:
        """Filter, then score the feasible nodes: the full answer that explain and the scheduler use."""
        decision = self.filter(pod, nodes, cluster)
        if decision.feasible:
            self.score(pod, decision.feasible, decision, cluster)
        return decision


def unknown_node_status() -> Status:
    """For a node name the cluster state does not hold (cache lag, or a typo in a test)."""
    return unresolvable("node(s) were unknown to the extender").stamped("NodeCache")
