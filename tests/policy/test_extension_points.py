"""The extension points as Protocols: what the built-ins declare, and what the engine dispatches on."""

from __future__ import annotations

from typing import Any

import pytest

from extender.policy import builtin
from extender.policy.cluster_view import EMPTY_CLUSTER
from extender.policy.engine import Engine, Policy, WeightedScorer
from extender.policy.plugins import (
    FilterPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)

from .builders import make_node, make_pod

FILTERS = (*builtin.FILTERS, *builtin.OPT_IN_FILTERS)
SCORERS = (*builtin.SCORERS, *builtin.OPT_IN_SCORERS)


@pytest.mark.parametrize("cls", FILTERS, ids=lambda c: c.name)
def test_every_builtin_filter_says_in_its_type_which_points_it_serves(cls: type) -> None:
    assert FilterPlugin in cls.__mro__ and PreFilterPlugin in cls.__mro__, f"{cls.name} declares no filter Protocol"


@pytest.mark.parametrize("cls", SCORERS, ids=lambda c: c.name)
def test_every_builtin_scorer_says_in_its_type_which_points_it_serves(cls: type) -> None:
    assert ScorePlugin in cls.__mro__ and PreScorePlugin in cls.__mro__, f"{cls.name} declares no score Protocol"


@pytest.mark.parametrize("cls", (*FILTERS, *SCORERS), ids=lambda c: c.name)
def test_a_builtin_reserves_exactly_when_its_type_says_so(cls: type) -> None:
    assert (ReservePlugin in cls.__mro__) == callable(getattr(cls, "reserve", None))


class _Recording:
    """A plugin implementing every point by duck typing, recording what the engine hands it."""

    name = "Recording"

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def prefilter(self, pod, cluster):
        self.calls.append(("prefilter", cluster))
        return lambda info: None if info.name == "a" else "not a"

    def filter(self, pod, node):  # never called: prefilter takes precedence
        raise AssertionError("filter() called although prefilter() exists")

    def prescore(self, pod, cluster, nodes):
        self.calls.append(("prescore", [n.name for n in nodes]))
        return lambda info: 7.0

    def reserve(self, pod, node, cluster):
        self.calls.append(("reserve", node.name))
        return None


def test_the_engine_dispatches_on_the_classified_points_with_one_signature_each() -> None:
    plugin = _Recording()
    engine = Engine(Policy(filters=(plugin,), scorers=(WeightedScorer(plugin, 1),)))
    cluster = EMPTY_CLUSTER
    decision = engine.decide(make_pod(), [make_node("a"), make_node("b")], cluster)
    assert [n.name for n in decision.feasible] == ["a"]
    assert decision.failed["b"].reasons == ("not a",)
    assert engine.reserve(make_pod(), decision.feasible[0]) == []
    assert plugin.calls == [("prefilter", cluster), ("prescore", ["a"]), ("reserve", "a")]
    assert engine.policy.reservers == (engine.policy.filter_points[0],)  # one plugin, reserved once
