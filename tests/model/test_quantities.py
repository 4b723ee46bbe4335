"""Resource quantities, parsed as apimachinery's resource.Quantity parses them."""

from __future__ import annotations

from fractions import Fraction

import pytest

from extender.errors import QuantityError
from extender.model.quantities import format_units, parse_quantity, to_units


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Fraction(1, 10)),
        ("1.5Gi", Fraction(3, 2) * 2**30),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("129M", Fraction(129_000_000)),
        ("0.5", Fraction(1, 2)),
        ("1Ki", Fraction(1024)),
        ("12e-3", Fraction(12, 1000)),
        (".5", Fraction(1, 2)),
        ("+1", Fraction(1)),
        ("1.", Fraction(1)),
        ("5n", Fraction(5, 10**9)),
        ("7u", Fraction(7, 10**6)),
        ("2k", Fraction(2000)),
        ("1E", Fraction(10**18)),  # E alone is the exa suffix, not an exponent
        ("1Ei", Fraction(2**60)),
        ("0", Fraction(0)),
        (" 2 ", Fraction(2)),  # apimachinery trims JSON strings
        (3, Fraction(3)),
        (2.5, Fraction(5, 2)),
    ],
)
def test_parse(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    ["1.5.5", "abc", "1Zi", "--1", "", "1 Gi", "1gi", "Mi", "e3", "1e", "0x10", "NaN", "inf", "1_000",
     "1e400", "1" * 65, True, None, float("nan")],
)
def test_invalid(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("resource", "text", "units"),
    [
        ("cpu", "100m", 100),
        ("cpu", "1", 1000),
        ("cpu", "0.5", 500),
        ("cpu", "12e-3", 12),
        ("cpu", "1n", 1),  # rounds up, like MilliValue()
        ("memory", "1.5Gi", 1610612736),
        ("memory", "129M", 129_000_000),
        ("memory", "0.5", 1),  # rounds up, like Value()
        ("memory", "100m", 1),
        ("nvidia.com/gpu", "2", 2),
        ("hugepages-2Mi", "4Mi", 4 * 2**20),
    ],
)
def test_to_units(resource, text, units):
    assert to_units(resource, text) == units


@pytest.mark.parametrize("raw", [[1], {"a": 1}])
def test_json_containers_are_quantity_errors(raw):
    # A JSON list or object where a quantity belongs must be a 400, not a TypeError (500).
    with pytest.raises(QuantityError, match="quantity must be a string"):
        to_units("cpu", raw)


def test_negative_is_refused():
    with pytest.raises(QuantityError, match="negative"):
        to_units("cpu", "-100m")


@pytest.mark.parametrize(
    ("resource", "units", "text"),
    [("cpu", 500, "500m"), ("cpu", 2000, "2"), ("memory", 2**30, "1Gi"), ("memory", 1536 * 2**20, "1536Mi"),
     ("memory", 1000, "1000"), ("hugepages-2Mi", 2 * 2**20, "2Mi"), ("example.com/x", 3, "3")],
)
def test_format_units(resource, units, text):
    assert format_units(resource, units) == text
