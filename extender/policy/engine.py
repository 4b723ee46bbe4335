"""The engine: run a policy's filters and scorers for one pod over candidate nodes.

It mirrors kube-scheduler's framework runtime: per-pod work happens once
(`prefilter`/`prescore`), each node stops at its first refusal, the engine stamps
the plugin name on every Status, normalises each scorer to 0..100, checks the
range, weights and sums. It holds no cluster state and does no IO; callers pass
the NodeInfos (from a request body, the watched cache or a snapshot).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from extender.errors import ExtenderError
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.decisions import Decision
from extender.policy.names import NODE_UNUSABLE
from extender.policy.plugins import FilterResult, NodeCheck
from extender.policy.status import Code, Status, unresolvable

MAX_SCORE = 100


class PluginError(ExtenderError):
    """A plugin failed (raised, or returned an invalid score): the attempt fails, not the node."""


@dataclass(frozen=True, slots=True)
class WeightedScorer:
    plugin: object
    weight: int

    @property
    def name(self) -> str:
        return self.plugin.name  # type: ignore[attr-defined, no-any-return]


@dataclass(frozen=True)
class Policy:
    """A loaded, validated policy: which filters run, which scorers with which weights."""

    filters: tuple[object, ...] = ()
    scorers: tuple[WeightedScorer, ...] = ()
    source: str = "<built-in>"
    digest: str = ""
    settings: dict[str, object] = field(default_factory=dict)

    @property
    def filter_names(self) -> list[str]:
        return [f.name for f in self.filters]  # type: ignore[attr-defined]


def _as_status(result: FilterResult, plugin: str) -> Status:
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
        return math.isfinite(value)  # type: ignore[arg-type]
    except TypeError:
        return False


def default_normalize(scores: Sequence[float]) -> list[float]:
    """kube-scheduler's DefaultNormalizeScore: scale so the best node gets 100."""
    top = max(scores, default=0)
    if top <= 0:
        return [0.0] * len(scores)
    return [max(0.0, s) * MAX_SCORE / top for s in scores]


class Engine:
    """Stateless apart from its policy; safe to share between threads."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def _checks(self, pod: PodView) -> tuple[list[tuple[str, NodeCheck]], Status | None]:
        checks: list[tuple[str, NodeCheck]] = []
        for plugin in self.policy.filters:
            name = plugin.name  # type: ignore[attr-defined]
            prefilter = getattr(plugin, "prefilter", None)
            if prefilter is None:
                checks.append((name, partial(plugin.filter, pod)))  # type: ignore[attr-defined]
                continue
            try:
                check = prefilter(pod)
            except ExtenderError:
                raise
            except Exception as exc:
                raise PluginError(f"filter {name} failed in prefilter: {exc}") from exc
            if isinstance(check, Status):
                return checks, _as_status(check, name)
            if check is not None:
                checks.append((name, check))
        return checks, None

    def filter(self, pod: PodView, nodes: Sequence[NodeInfo]) -> Decision:
        """Run every filter; the decision lists feasible nodes and a Status for each refused one."""
        decision = Decision(pod=pod, total=len(nodes))
        failed = decision.failed
        feasible = decision.feasible
        checks, refuse_all = self._checks(pod)
        if refuse_all is not None:
            for info in nodes:
                failed[info.name] = refuse_all
            return decision
        name = ""
        try:
            for info in nodes:
                if info.node.error:
                    failed[info.name] = Status(
                        Code.UNRESOLVABLE, ("node(s) could not be read",), info.node.error, NODE_UNUSABLE
                    )
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

    def score(self, pod: PodView, nodes: Sequence[NodeInfo], decision: Decision | None = None) -> Decision:
        """Score `nodes` (normally the feasible ones) and fill the decision's scores."""
        if decision is None:
            decision = Decision(pod=pod, total=len(nodes))
            decision.feasible.extend(nodes)
        decision.scored = list(nodes)
        count = len(nodes)
        totals = [0.0] * count
        weight_sum = 0
        for entry in self.policy.scorers:
            name, plugin, weight = entry.name, entry.plugin, entry.weight
            raw = self._raw_scores(name, plugin, pod, nodes)
            if raw is None:
                continue
            normalize: Callable[[Sequence[float]], list[float]] = getattr(
                plugin, "normalize_scores", default_normalize
            )
            try:
                normalized = normalize(raw)
                out_of_range = [value for value in normalized if not 0 <= value <= MAX_SCORE]
            except Exception as exc:  # a non-number, or a bug in normalize_scores: the plugin's fault
                raise PluginError(f"scorer {name} failed to normalize: {exc}") from exc
            if out_of_range:
                raise PluginError(f"scorer {name} gave {out_of_range[0]}, outside 0..{MAX_SCORE}")
            if len(normalized) != count:
                raise PluginError(f"scorer {name} normalized {count} scores into {len(normalized)}")
            decision.raw_scores[name] = raw
            decision.normalized_scores[name] = normalized
            decision.weights[name] = weight
            weight_sum += weight
            for i, value in enumerate(normalized):
                totals[i] += value * weight
        if weight_sum:
            totals = [t / weight_sum for t in totals]
        decision.totals = totals
        return decision

    @staticmethod
    def _raw_scores(name: str, plugin: object, pod: PodView, nodes: Sequence[NodeInfo]) -> list[float] | None:
        try:
            prescore = getattr(plugin, "prescore", None)
            if prescore is None:
                fn = partial(plugin.score, pod)  # type: ignore[attr-defined]
            else:
                fn = prescore(pod)
                if fn is None:
                    return None
            raw = [fn(info) for info in nodes]
        except ExtenderError:
            raise
        except Exception as exc:
            raise PluginError(f"scorer {name} failed: {exc}") from exc
        try:
            finite = all(map(math.isfinite, raw))  # one C loop: this runs for every node
        except TypeError:
            finite = False
        if not finite:
            raise PluginError(f"scorer {name} returned {next(v for v in raw if not _finite(v))!r}")
        return raw

    def decide(self, pod: PodView, nodes: Sequence[NodeInfo]) -> Decision:
        """Filter, then score the feasible nodes: the full answer that explain and the scheduler use."""
        decision = self.filter(pod, nodes)
        if decision.feasible:
            self.score(pod, decision.feasible, decision)
        return decision


def unknown_node_status() -> Status:
    """For a node name the cluster state does not hold (cache lag, or a typo in a test)."""
    return unresolvable("node(s) were unknown to the extender").stamped("NodeCache")
