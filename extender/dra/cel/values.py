"""CEL values: the errors, uint, Kubernetes quantities and semantic versions, and the `device` variable.

See the package docstring (extender/dra/cel/__init__.py) for what Kubernetes does and why this evaluator."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from extender.errors import QuantityError
from extender.model.quantities import parse_quantity

COST_LIMIT = 1_000_000  # resourceapi.CELSelectorExpressionMaxCost
MAX_EXPRESSION_LENGTH = 10 * 1024  # resourceapi.CELSelectorExpressionMaxLength
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_UINT_MAX = 2**64 - 1

# The evaluation environment: the variables by name ("device", bound and loop variables) and,
# under library._COST, the remaining budget as a one-element list of int.
_Env = dict[str, Any]


class CelError(ValueError):
    """The expression does not compile (syntax, unknown name, wrong types, not bool)."""


class CelRuntimeError(ValueError):
    """Evaluating the expression failed for this device (missing key, wrong type, cost)."""


class _Fail(Exception):
    """Raised inside evaluation; Selector.matches turns it into CelRuntimeError."""


# --------------------------------------------------------------------------- values


class UInt(int):
    """CEL's uint: an int that keeps its type for equality and overloads."""

    __slots__ = ()


class Quantity:
    """A Kubernetes resource.Quantity, exact (apiserver/pkg/cel/library/quantity.go)."""

    __slots__ = ("value",)

    def __init__(self, value: Fraction) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({self.value})"


_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)


class Semver:
    """A semantic version as github.com/blang/semver/v4 parses and orders it."""

    __slots__ = ("major", "minor", "patch", "pre")

    def __init__(self, text: str) -> None:
        match = _SEMVER.fullmatch(text)
        if match is None:
            raise ValueError(f"invalid semantic version {text!r}")
        self.major, self.minor, self.patch = (int(match[i]) for i in (1, 2, 3))
        self.pre = tuple(int(p) if p.isdigit() else p for p in match[4].split(".")) if match[4] else ()

    @classmethod
    def normalized(cls, text: str) -> Semver:
        """semver(s, true): strip a leading v, fill in missing minor and patch, drop leading
        zeros (semverlib.go normalizeAndParse)."""
        text = text.removeprefix("v")
        core = re.match(r"[0-9.]*", text)[0]  # type: ignore[index]  # "[0-9.]*" always matches: never None
        rest = text[len(core):]
        parts = core.split(".") if core else []
        if not 1 <= len(parts) <= 3 or not all(parts):
            return cls(text)
        parts = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
        return cls(".".join(parts) + rest)

    def _key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def compare(self, other: Semver) -> int:
        a, b = self._key(), other._key()
        if a != b:
            return -1 if a < b else 1
        if self.pre == other.pre:
            return 0
        if not self.pre or not other.pre:
            return 1 if not self.pre else -1
        for x, y in zip(self.pre, other.pre, strict=False):
            if x == y:
                continue
            if isinstance(x, int) != isinstance(y, int):
                return -1 if isinstance(x, int) else 1
            return -1 if x < y else 1  # type: ignore[operator]  # both int or both str: checked just above
        return -1 if len(self.pre) < len(other.pre) else 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash((self._key(), self.pre))


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, UInt):
        return "uint"
    if isinstance(value, int):
        return "int"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


_TYPE_NAMES = {float: "double", str: "string", bytes: "bytes", type(None): "null_type", list: "list",
               tuple: "list", dict: "map", Quantity: "kubernetes.Quantity", Semver: "kubernetes.Semver"}


def _no_overload(name: str, *args: Any) -> _Fail:
    return _Fail(f"no such overload: {name}({', '.join(_type_name(a) for a in args)})")


# --------------------------------------------------------------------------- the device


class _Domains(dict[str, dict[str, Any]]):
    """device.attributes / device.capacity: an unknown domain reads as an empty map
    (compile.go newStringInterfaceMapWithDefault), while `in` still says it is absent."""

    __slots__ = ()

    def __missing__(self, key: object) -> dict[str, Any]:
        return {}


class CelDevice:
    """The `device` variable for one device, shared by every selector evaluated on it."""

    __slots__ = ("value", "error")

    def __init__(self, value: dict[str, Any], error: str | None) -> None:
        self.value = value
        self.error = error


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute(raw: Any) -> Any:
    """One DeviceAttribute's value (compile.go getAttributeValue, list types gated off)."""
    if isinstance(raw, Mapping):
        if "int" in raw:
            return int(raw["int"])
        if "bool" in raw:
            return bool(raw["bool"])
        if "string" in raw:
            return str(raw["string"])
        if "version" in raw:
            try:
                return Semver(str(raw["version"]))
            except ValueError as exc:
                raise ValueError(f"parse semantic version: {exc}") from None
    raise ValueError("unsupported attribute value")


def cel_device(driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Any], *,
               allow_multiple_allocations: bool = False) -> CelDevice:
    """The `device` variable, built once per device and reused by every selector.

    `attributes` and `capacity` are the raw ResourceSlice forms: {"model": {"string": "a100"},
    "gpu.example.com/mem": {"int": 5}, "v": {"version": "1.2.3"}, "ok": {"bool": True}} and
    {"memory": {"value": "40Gi"}} (qualified name -> value). Unqualified names get the
    driver's domain. A value Kubernetes cannot convert makes every evaluation on this device
    fail, as DeviceMatches does ("attribute x: unsupported attribute value").
    """
    error = None
    attrs: _Domains = _Domains()
    for name, raw in attributes.items():
        domain, ident = _split(name, driver)
        try:
            attrs.setdefault(domain, {})[ident] = _attribute(raw)
        except ValueError as exc:
            error = error or f"attribute {name}: {exc}"
    caps: _Domains = _Domains()
    for name, raw in capacity.items():
        domain, ident = _split(name, driver)
        value = raw.get("value") if isinstance(raw, Mapping) else raw
        try:
            caps.setdefault(domain, {})[ident] = Quantity(parse_quantity(value))
        except QuantityError as exc:
            error = error or f"capacity {name}: {exc}"
    device = {"driver": driver, "attributes": attrs, "capacity": caps,
              "allowMultipleAllocations": bool(allow_multiple_allocations)}
    return CelDevice(device, error)
