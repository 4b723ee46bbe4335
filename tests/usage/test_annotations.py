"""Usage written onto nodes by someone else (Crane's `value,time` annotations), read from the watched nodes."""

from __future__ import annotations

import pytest

from extender.model.nodes import NodeView
from extender.policy.usage_settings import AnnotationSettings
from extender.usage import readings
from extender.usage.annotations import AnnotationSource
from tests.helpers import Clock

from .conftest import node

CRANE = AnnotationSettings()  # cpu_usage_avg_5m / mem_usage_avg_5m, percent


def views(*nodes: dict) -> dict[str, NodeView]:
    return {n["metadata"]["name"]: NodeView.from_dict(n) for n in nodes}


def test_crane_format_in_percent(clock: Clock):
    nodes = views(node("a", cpu="4", memory="8Gi", annotations={
        "cpu_usage_avg_5m": "38.5,2023-11-14T22:13:20Z", "mem_usage_avg_5m": "50,2023-11-14T22:13:10Z"}))
    fetch = AnnotationSource(CRANE, clock=clock).fetch(nodes)
    [reading] = fetch.readings
    assert reading.cpu == pytest.approx(0.385 * 4000)
    assert reading.memory == 4 * 2**30
    assert reading.timestamp == 1_700_000_000.0  # the newer of the two
    assert not fetch.dropped


def test_ratio_unit_custom_keys_and_window_deviation(clock: Clock):
    settings = AnnotationSettings(cpu="example.com/cpu", memory="", cpu_stdev="example.com/cpu-stdev", unit="ratio")
    nodes = views(node("a", cpu="2", annotations={"example.com/cpu": "0.5", "example.com/cpu-stdev": "0.1",
                                                   "mem_usage_avg_5m": "99"}))
    [reading] = AnnotationSource(settings, clock=clock).fetch(nodes).readings
    assert (reading.cpu, reading.cpu_stdev, reading.memory) == (1000, pytest.approx(200), None)


def test_values_without_a_time_age_from_when_first_seen(clock: Clock):
    source = AnnotationSource(CRANE, clock=clock)
    first_seen = clock.now
    nodes = views(node("a", annotations={"cpu_usage_avg_5m": "20"}))
    assert source.fetch(nodes).readings[0].timestamp == first_seen
    clock.advance(60)
    assert source.fetch(nodes).readings[0].timestamp == first_seen  # unchanged: it ages, then goes stale
    nodes = views(node("a", annotations={"cpu_usage_avg_5m": "25"}))
    assert source.fetch(nodes).readings[0].timestamp == clock.now  # a new value is a new sample


def test_garbage_is_dropped_by_reason(clock: Clock):
    nodes = views(
        node("a", annotations={"cpu_usage_avg_5m": "-3,2023-11-14T22:13:20Z"}),
        node("b", annotations={"cpu_usage_avg_5m": "busy"}),
        node("c", annotations={"cpu_usage_avg_5m": "40,last tuesday"}),
        node("d", annotations={"cpu_usage_avg_5m": "NaN,2023-11-14T22:13:20Z", "mem_usage_avg_5m": "10"}),
        node("e"),
    )
    fetch = AnnotationSource(CRANE, clock=clock).fetch(nodes)
    assert [(r.node, r.cpu) for r in fetch.readings] == [("d", None)]  # d keeps its memory figure
    assert fetch.dropped == {readings.NEGATIVE: 1, readings.NOT_A_NUMBER: 2, readings.BAD_TIMESTAMP: 1}
