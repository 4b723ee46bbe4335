"""Consumable capacity (DRAConsumableCapacity, beta and on in kube-scheduler v1.36): a device's
capacities with their request policies, and what a request consumes of them.

The facts are those of k8s.io/dynamic-resource-allocation@v0.36.3/structured/internal/incubating/
consumable_capacity.go (calculateConsumedCapacity, violatesPolicy, CmpRequestOverCapacity) and
k8s.io/api@v0.36.3/resource/v1/types.go (DeviceCapacity, CapacityRequestPolicy,
CapacityRequestPolicyRange). A quantity keeps both its exact value and the text the API server
returns for it, because an allocation result writes the consumed amounts back as quantities
and Go keeps each quantity's format (binary or decimal) from where it came. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

from extender.errors import InvalidObject, QuantityError
from extender.model.fields import as_list, as_object
from extender.model.quantities import parse_quantity

_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_NANO = 10**9


class Quantity(NamedTuple):
    """A resource.Quantity: its exact value and its canonical text (Quantity.String())."""

    value: Fraction
    text: str

    def __str__(self) -> str:
        return self.text


def canonical_text(value: Fraction, binary: bool, exponent: bool = False) -> str:
    """resource.Quantity String() (apimachinery quantity.go CanonicalizeBytes): the value, at
    most nano precision (rounded up, as parsing does), in the format it was written in. A
    binary quantity below 1024 or not whole is written in decimal, as Go does."""
    value = Fraction(math.ceil(value * _NANO), _NANO)
    if binary and (-1024 < value < 1024 or value.denominator != 1):
        binary = False
    sign, magnitude = ("-" if value < 0 else ""), abs(value)
    if binary:
        number, power = int(magnitude), 0
        while number and number % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
            number, power = number // 1024, power + 1
        return f"{sign}{number}{_BINARY_SUFFIXES[power]}"
    number, power = int(magnitude * _NANO), -9
    if number == 0:
        return "0"
    while number % 1000 == 0 and power < 18:
        number, power = number // 1000, power + 3
    if exponent:
        return f"{sign}{number}" + (f"e{power}" if power else "")
    return f"{sign}{number}{_DECIMAL_SUFFIXES[power]}"


def parse(raw: Any, where: str) -> Quantity:
    """A quantity as the API server sends it (a string), with its canonical text."""
    if not isinstance(raw, str):
        raise InvalidObject(f"{where}: expected a quantity string")
    try:
        value = parse_quantity(raw)
    except QuantityError as error:
        raise InvalidObject(f"{where}: {error}") from None
    text = raw.strip()
    binary = text.endswith("i")
    return Quantity(value, canonical_text(value, binary, "e" in text.lower() and not binary))


def binary(value: int) -> Quantity:
    """resource.NewQuantity(value, BinarySI), which roundUpRange returns for a stepped range."""
    return Quantity(Fraction(value), canonical_text(Fraction(value), True))


def _optional(raw: Any, where: str) -> Quantity | None:
    return None if raw is None else parse(raw, where)


def _whole(value: Fraction) -> int:
    """Quantity.Value(): the value rounded up to a whole number."""
    return math.ceil(value)


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """types.go CapacityRequestPolicy: a default, and either a range (min, optional max and
    step) or a list of valid values (sorted ascending, which API validation ensures)."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    has_range: bool = False
    range_min: Quantity | None = None
    range_max: Quantity | None = None
    range_step: Quantity | None = None

    @classmethod
    def parse(cls, raw: Any, where: str) -> RequestPolicy:
        spec = as_object(raw, where)
        values = tuple(parse(item, f"{where}.validValues[{i}]")
                       for i, item in enumerate(as_list(spec.get("validValues"), f"{where}.validValues")))
        valid_range = spec.get("validRange")
        if valid_range is None:
            return cls(_optional(spec.get("default"), f"{where}.default"), values)
        limits = as_object(valid_range, f"{where}.validRange")
        return cls(_optional(spec.get("default"), f"{where}.default"), values, True,
                   _optional(limits.get("min"), f"{where}.validRange.min"),
                   _optional(limits.get("max"), f"{where}.validRange.max"),
                   _optional(limits.get("step"), f"{where}.validRange.step"))

    def consumed(self, requested: Quantity) -> Quantity:
        """calculateConsumedCapacity for an explicit request: rounded up to the range (to its
        min, then to the next step from min) or to the next valid value; unchanged when
        neither applies or when it is above every valid value (violates() refuses that)."""
        if self.has_range and self.range_min is not None:
            low = self.range_min
            if requested.value < low.value:
                return low
            if self.range_step is None:
                return requested
            step, start = _whole(self.range_step.value), _whole(low.value)
            steps = -(-(_whole(requested.value) - start) // step)  # rounded up
            return binary(start + step * steps)
        if self.valid_values:
            return next((v for v in self.valid_values if requested.value <= v.value), requested)
        return requested

    def violates(self, consumed: Quantity) -> bool:
        """violatesPolicy: the default is always acceptable; then above max or off the step
        (counted from min, in whole units), or not one of the valid values."""
        if self.default is not None and consumed.value == self.default.value:
            return False
        if self.has_range:
            if self.range_max is not None and consumed.value > self.range_max.value:
                return True
            if self.range_step is not None:
                start = _whole(self.range_min.value) if self.range_min is not None else 0
                return (_whole(consumed.value) - start) % _whole(self.range_step.value) != 0
            return False
        if self.valid_values:
            return all(consumed.value != v.value for v in self.valid_values)
        return False

    def __str__(self) -> str:
        if self.has_range:
            text = f"range from {self.range_min}" if self.range_min is not None else "range"
            if self.range_max is not None:
                text += f" to {self.range_max}"
            if self.range_step is not None:
                text += f" in steps of {self.range_step}"
            return text
        if self.valid_values:
            return "valid values " + ", ".join(v.text for v in self.valid_values)
        return f"default {self.default}" if self.default is not None else "no policy"


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    """types.go DeviceCapacity: the device's total and, optionally, how it may be requested."""

    value: Quantity
    policy: RequestPolicy | None = None

    @classmethod
    def parse(cls, raw: Any, where: str) -> DeviceCapacity:
        spec = as_object(raw, where)
        value = spec.get("value")
        if value is None:
            raise InvalidObject(f"{where}.value: required")
        policy = spec.get("requestPolicy")
        return cls(parse(value, f"{where}.value"),
                   None if policy is None else RequestPolicy.parse(policy, f"{where}.requestPolicy"))

    def consumed(self, requested: Quantity | None) -> Quantity:
        """calculateConsumedCapacity: nothing requested takes the policy's default, or else the
        whole capacity; a request is taken as it is without a policy, else rounded up by it."""
        if requested is None:
            if self.policy is not None and self.policy.default is not None:
                return self.policy.default
            return self.value
        return requested if self.policy is None else self.policy.consumed(requested)

    def violates(self, consumed: Quantity) -> bool:
        return self.policy is not None and self.policy.violates(consumed)


def parse_capacities(raw: Mapping[str, Any], where: str) -> dict[str, DeviceCapacity]:
    """A device's `capacity` map, by capacity name."""
    return {name: DeviceCapacity.parse(item, f"{where}.{name}") for name, item in raw.items()}


def parse_requests(raw: Any, where: str) -> dict[str, Quantity]:
    """A request's CapacityRequirements (`capacity: {requests: {name: quantity}}`)."""
    if raw is None:
        return {}
    requests = as_object(as_object(raw, where).get("requests"), f"{where}.requests")
    return {name: parse(value, f"{where}.requests.{name}") for name, value in requests.items()}
