"""Parsing of Kubernetes resource quantities (``500m``, ``1Gi``, ``2e3``), exact to the milli-unit.

Not extender.model.quantities: it refuses, by design, what kube-apiserver v1.36 stores (over 64 characters, exponents past 30).

The fake needs it to validate pod resources and for the QoS class the real server computes on create.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)


def parse_quantity(text: str | int | float) -> Decimal:
    """The exact value of a quantity string; raises ValueError on malformed input."""
    if isinstance(text, (int, float)):
        return Decimal(str(text))
    m = _QUANTITY.match(text.strip())
    if not m:
        raise ValueError(
            f"quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}"
        )
    number, exponent, suffix = m.groups()
    try:
        value = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"invalid quantity {text!r}") from None
    if exponent:
        return value * (Decimal(10) ** int(exponent[1:]))
    return value * _SUFFIX[suffix or ""]


def quantities_equal(a: str | int | float | None, b: str | int | float | None) -> bool:
    if a is None or b is None:
        return a is b
    try:
        return parse_quantity(a) == parse_quantity(b)
    except ValueError:
        return False
