"""Kubernetes resource quantities, parsed exactly as apimachinery's `resource.Quantity` does.

Quantities are exact decimals (`1.5Gi`, `100m`, `1e3`), so they are parsed with
`Fraction` and rounded up only at the end, the way `Quantity.Value()` and
`Quantity.MilliValue()` round. Parsing is cached: a cluster repeats the same few
hundred strings across hundreds of thousands of objects.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from extender.errors import QuantityError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# apimachinery's grammar: a signed decimal number, then a binary SI suffix, a decimal
# SI suffix, or a decimal exponent (e/E and a signed integer).
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)
MILLI_RESOURCES = frozenset({"cpu"})


@lru_cache(maxsize=65536)
def parse_quantity(text: object) -> Fraction:
    """Return the exact value of a quantity string; raise QuantityError if Kubernetes would."""
    if not isinstance(text, str):
        if isinstance(text, bool) or not isinstance(text, int | float):
            raise QuantityError(f"quantity must be a string, got {type(text).__name__}")
        if isinstance(text, float) and not math.isfinite(text):
            raise QuantityError(f"quantity {text!r} is not a finite number")
        return Fraction(text)
    match = _QUANTITY.match(text.strip()) if len(text) <= 64 else None
    if match is None:
        raise QuantityError(f"quantity {text[:64]!r} does not match the Kubernetes quantity format")
    number = Fraction(match["num"])
    if match["bin"]:
        return number * _BINARY[match["bin"]]
    if match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > 30:
            raise QuantityError(f"quantity {text!r} has an exponent out of range")
        return number * Fraction(10) ** exponent
    return number * _DECIMAL[match["dec"] or ""]


def to_units(resource: str, text: object) -> int:
    """Convert a quantity to this project's integer unit: millicores for cpu, base units otherwise.

    Rounds up like `MilliValue()`/`Value()`, so a request is never under-counted.
    Negative values are refused: no request or allocatable may be below zero.
    """
    if isinstance(text, list | dict):  # unhashable: the caches would raise TypeError
        raise QuantityError(f"quantity must be a string, got {type(text).__name__}")
    return _to_units(resource, text)


@lru_cache(maxsize=65536)
def _to_units(resource: str, text: object) -> int:
    """Cached: a cluster's pods repeat a few hundred (resource, quantity) pairs."""
    value = parse_quantity(text)
    if value < 0:
        raise QuantityError(f"quantity {text!r} is negative")
    if resource in MILLI_RESOURCES:
        value *= 1000
    return math.ceil(value)


def format_units(resource: str, units: int) -> str:
    """Render units the way kubectl shows them, for reasons people read."""
    if resource in MILLI_RESOURCES:
        return f"{units // 1000}" if units % 1000 == 0 else f"{units}m"
    if resource == "memory" or resource == "ephemeral-storage" or resource.startswith("hugepages-"):
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if units >= size and units % size == 0:
                return f"{units // size}{suffix}"
    return str(units)
