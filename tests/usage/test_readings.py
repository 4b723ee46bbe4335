"""Turning a source's values into millicores and bytes, and refusing garbage by name."""

from __future__ import annotations

import pytest

from extender.model.nodes import NodeView
from extender.usage import readings
from extender.usage.readings import Capacity, Dropped

from .conftest import node


def test_quantities_are_exact_and_unrounded():
    assert readings.quantity("123456789n", "cpu") == pytest.approx(123.456789)
    assert readings.quantity("2", "cpu") == 2000.0
    assert readings.quantity("1536Mi", "memory") == 1536 * 2**20
    assert readings.quantity("1.5e3", "memory") == 1500.0


@pytest.mark.parametrize(("raw", "reason"), [
    ("-5m", readings.NEGATIVE), ("12 cores", readings.BAD_QUANTITY), (12, readings.BAD_QUANTITY),
    (None, readings.BAD_QUANTITY), ("1.5Zi", readings.BAD_QUANTITY),
])
def test_bad_quantities(raw, reason):
    with pytest.raises(Dropped) as caught:
        readings.quantity(raw, "cpu")
    assert caught.value.reason == reason


@pytest.mark.parametrize(("raw", "reason"), [
    ("NaN", readings.NOT_A_NUMBER), ("+Inf", readings.NOT_A_NUMBER), ("-1", readings.NEGATIVE),
    ("ten", readings.NOT_A_NUMBER), (True, readings.MALFORMED), (None, readings.NOT_A_NUMBER),
])
def test_bad_numbers(raw, reason):
    with pytest.raises(Dropped) as caught:
        readings.number(raw)
    assert caught.value.reason == reason


def test_numbers():
    assert readings.number("0.42") == 0.42
    assert readings.number(7) == 7.0


def test_units_convert_against_capacity():
    capacity = Capacity(cpu=4000, memory=8 * 2**30)
    assert readings.convert(0.5, "ratio", "cpu", capacity) == 2000
    assert readings.convert(25, "percent", "memory", capacity) == 2 * 2**30
    assert readings.convert(1.5, "absolute", "cpu", capacity) == 1500  # cores
    assert readings.convert(1024, "absolute", "memory", capacity) == 1024  # bytes


def test_capacity_prefers_status_capacity():
    view = NodeView.from_dict(node("n", cpu="8", memory="16Gi", allocatable_cpu="7500m"))
    assert readings.node_capacity(view) == Capacity(8000, 16 * 2**30)
    raw = node("m")
    del raw["status"]["capacity"]
    assert readings.node_capacity(NodeView.from_dict(raw)) == Capacity(4000, 8 * 2**30)  # allocatable


def test_timestamps():
    assert readings.timestamp("2023-11-14T22:13:20Z") == 1_700_000_000.0
    assert readings.timestamp("2023-11-14T22:13:20.5+00:00") == 1_700_000_000.5
    assert readings.timestamp("2023-11-14T22:13:20") == 1_700_000_000.0  # no zone: UTC
    for bad in ("yesterday", "", None, 1_700_000_000):
        with pytest.raises(Dropped, match=readings.BAD_TIMESTAMP):
            readings.timestamp(bad)


def test_go_durations():
    assert readings.go_duration("20.012s") == pytest.approx(20.012)
    assert readings.go_duration("1m0.5s") == pytest.approx(60.5)
    assert readings.go_duration("1h2m3s") == 3723.0
    assert readings.go_duration("150ms") == pytest.approx(0.15)
    assert readings.go_duration("0") == 0.0
    for bad in ("20", "s", "1x", "1m junk", 20):
        with pytest.raises(Dropped):
            readings.go_duration(bad)
