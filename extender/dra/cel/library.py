"""CEL functions and operators: the standard library, Kubernetes' string, list, set, quantity and semver
extensions, each charging the cost it spends."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Protocol, TypeVar, cast

from extender.dra.cel.values import (
    _INT_MAX,
    _INT_MIN,
    _UINT_MAX,
    Quantity,
    Semver,
    UInt,
    _Env,
    _Fail,
    _no_overload,
    _type_name,
)
from extender.errors import QuantityError
from extender.model.quantities import parse_quantity

# --------------------------------------------------------------------------- functions
# Each overload: (member?, parameter kinds, result kind). "dyn" matches anything; the
# implementation dispatches on the run-time values and fails with "no such overload".
# Parameters are Any for that reason; once `_want` (or `_q`) has checked them, `cast` states
# the type it checked.

_F = Callable[..., Any]
_FnT = TypeVar("_FnT", bound=_F)
_OVERLOADS: dict[str, list[tuple[bool, tuple[str, ...], str]]] = {}
_IMPLS: dict[str, _F] = {}


def _fn(name: str, *overloads: tuple[bool, tuple[str, ...], str]) -> Callable[[_FnT], _FnT]:
    def register(impl: _FnT) -> _FnT:
        _OVERLOADS[name] = list(overloads)
        _IMPLS[name] = impl
        return impl
    return register


def _charge(env: _Env, amount: float) -> None:
    budget = env[_COST]
    budget[0] -= math.ceil(amount)
    if budget[0] < 0:
        raise _Fail("operation cancelled: actual cost limit exceeded")


_COST = " cost"  # not an identifier: cannot collide with a variable
M, G = True, False  # member or global overload


def _want(cond: bool, name: str, *args: Any) -> None:
    if not cond:
        raise _no_overload(name, *args)


def _is_int(v: Any) -> bool:
    return type(v) is int


@_fn("size", (M, ("string",), "int"), (G, ("string",), "int"), (M, ("list",), "int"),
     (G, ("list",), "int"), (M, ("map",), "int"), (G, ("map",), "int"), (M, ("bytes",), "int"),
     (G, ("bytes",), "int"))
def _size(env: _Env, x: Any) -> int:
    _want(isinstance(x, str | bytes | list | tuple | dict), "size", x)
    return len(x)


def _strings(name: str, *more: str) -> tuple[bool, tuple[str, ...], str]:
    return (M, ("string", *more[:-1]), more[-1])


@_fn("contains", _strings("contains", "string", "bool"))
def _contains(env: _Env, s: Any, t: Any) -> bool:
    _want(type(s) is str and type(t) is str, "contains", s, t)
    _charge(env, 0.1 * len(s))
    return t in s


@_fn("startsWith", _strings("startsWith", "string", "bool"))
def _starts(env: _Env, s: Any, t: Any) -> bool:
    _want(type(s) is str and type(t) is str, "startsWith", s, t)
    return cast(str, s).startswith(t)


@_fn("endsWith", _strings("endsWith", "string", "bool"))
def _ends(env: _Env, s: Any, t: Any) -> bool:
    _want(type(s) is str and type(t) is str, "endsWith", s, t)
    return cast(str, s).endswith(t)


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise _Fail(f"error parsing regexp: {exc}") from None


@_fn("matches", (M, ("string", "string"), "bool"), (G, ("string", "string"), "bool"))
def _matches(env: _Env, s: Any, p: Any) -> bool:
    _want(type(s) is str and type(p) is str, "matches", s, p)
    _charge(env, 0.1 * len(s) * max(1, len(p)))
    return _regex(p).search(s) is not None


@_fn("find", _strings("find", "string", "string"))
def _find(env: _Env, s: Any, p: Any) -> str:
    _want(type(s) is str and type(p) is str, "find", s, p)
    _charge(env, 0.1 * len(s) * max(1, len(p)))
    m = _regex(p).search(s)
    return m[0] if m else ""


@_fn("findAll", _strings("findAll", "string", "list"), _strings("findAll", "string", "int", "list"))
def _find_all(env: _Env, s: Any, p: Any, n: Any = -1) -> list[str]:
    _want(type(s) is str and type(p) is str and _is_int(n), "findAll", s, p, n)
    _charge(env, 0.1 * len(s) * max(1, len(p)))
    found = [m[0] for m in _regex(p).finditer(s)]
    return found if n < 0 else found[:n]


@_fn("lowerAscii", _strings("lowerAscii", "string"))
def _lower(env: _Env, s: Any) -> str:
    _want(type(s) is str, "lowerAscii", s)
    _charge(env, 0.1 * len(s))
    return cast(str, s).translate(_LOWER)


@_fn("upperAscii", _strings("upperAscii", "string"))
def _upper(env: _Env, s: Any) -> str:
    _want(type(s) is str, "upperAscii", s)
    _charge(env, 0.1 * len(s))
    return cast(str, s).translate(_UPPER)


_LOWER = {c: c + 32 for c in range(65, 91)}
_UPPER = {c + 32: c for c in range(65, 91)}


@_fn("trim", _strings("trim", "string"))
def _trim(env: _Env, s: Any) -> str:
    _want(type(s) is str, "trim", s)
    return cast(str, s).strip()


@_fn("charAt", _strings("charAt", "int", "string"))
def _char_at(env: _Env, s: Any, i: Any) -> str:
    _want(type(s) is str and _is_int(i), "charAt", s, i)
    if not 0 <= i <= len(s):
        raise _Fail(f"index out of range: {i}")
    return cast(str, s)[i:i + 1]


@_fn("indexOf", _strings("indexOf", "string", "int"), _strings("indexOf", "string", "int", "int"),
     (M, ("list", "dyn"), "int"))
def _index_of(env: _Env, s: Any, t: Any, start: Any = 0) -> int:
    if isinstance(s, list | tuple):
        return next((i for i, v in enumerate(s) if _equal(v, t)), -1)
    _want(type(s) is str and type(t) is str and _is_int(start), "indexOf", s, t)
    if not 0 <= start <= len(s):
        raise _Fail(f"index out of range: {start}")
    return cast(str, s).find(t, start)


@_fn("lastIndexOf", _strings("lastIndexOf", "string", "int"),
     _strings("lastIndexOf", "string", "int", "int"), (M, ("list", "dyn"), "int"))
def _last_index_of(env: _Env, s: Any, t: Any, end: Any = None) -> int:
    if isinstance(s, list | tuple):
        return next((i for i in range(len(s) - 1, -1, -1) if _equal(s[i], t)), -1)
    _want(type(s) is str and type(t) is str and (end is None or _is_int(end)), "lastIndexOf", s, t)
    if end is None:
        return cast(str, s).rfind(t)
    if not 0 <= end < max(len(s), 1):
        raise _Fail(f"index out of range: {end}")
    return cast(str, s).rfind(t, 0, end + len(t))


@_fn("replace", _strings("replace", "string", "string", "string"),
     _strings("replace", "string", "string", "int", "string"))
def _replace(env: _Env, s: Any, old: Any, new: Any, n: Any = -1) -> str:
    _want(type(s) is str and type(old) is str and type(new) is str and _is_int(n), "replace", s, old)
    out = cast(str, s).replace(old, new, n)
    _charge(env, 0.1 * (len(s) + len(out)))
    return out


@_fn("split", _strings("split", "string", "list"), _strings("split", "string", "int", "list"))
def _split_fn(env: _Env, s: Any, sep: Any, n: Any = -1) -> list[str]:
    _want(type(s) is str and type(sep) is str and _is_int(n), "split", s, sep)
    _charge(env, 0.1 * len(s))
    if n == 0:
        return []
    if sep == "":
        parts = list(s)
        return parts if n < 0 or n >= len(parts) else parts[:n - 1] + ["".join(parts[n - 1:])]
    return cast(str, s).split(sep, n - 1 if n > 0 else -1)


@_fn("substring", _strings("substring", "int", "string"), _strings("substring", "int", "int", "string"))
def _substring(env: _Env, s: Any, start: Any, end: Any = None) -> str:
    end = len(s) if end is None and type(s) is str else end
    _want(type(s) is str and _is_int(start) and _is_int(end), "substring", s, start)
    if not 0 <= start <= len(s) or not 0 <= end <= len(s):
        raise _Fail(f"index out of range: {start if not 0 <= start <= len(s) else end}")
    if start > end:
        raise _Fail(f"invalid substring range. start: {start}, end: {end}")
    return cast(str, s)[start:end]


@_fn("join", (M, ("list",), "string"), (M, ("list", "string"), "string"))
def _join(env: _Env, items: Any, sep: Any = "") -> str:
    _want(isinstance(items, list | tuple) and all(type(i) is str for i in items) and type(sep) is str,
          "join", items)
    out = cast(str, sep).join(items)
    _charge(env, 0.1 * len(out))
    return out


@_fn("reverse", _strings("reverse", "string"))
def _reverse(env: _Env, s: Any) -> str:
    _want(type(s) is str, "reverse", s)
    return cast(str, s)[::-1]


@_fn("isSorted", (M, ("list",), "bool"))
def _is_sorted(env: _Env, items: Any) -> bool:
    _want(isinstance(items, list | tuple), "isSorted", items)
    _charge(env, len(items))
    return all(_compare(a, b, "<=") for a, b in zip(items, items[1:], strict=False))


@_fn("sum", (M, ("list",), "dyn"))
def _sum(env: _Env, items: Any) -> Any:
    _want(isinstance(items, list | tuple), "sum", items)
    _charge(env, len(items))
    total: Any = 0
    for item in items:
        total = _arith("+", total, item)
    return total


@_fn("min", (M, ("list",), "dyn"))
def _min(env: _Env, items: Any) -> Any:
    return _extreme(env, items, "min", "<")


@_fn("max", (M, ("list",), "dyn"))
def _max(env: _Env, items: Any) -> Any:
    return _extreme(env, items, "max", ">")


def _extreme(env: _Env, items: Any, name: str, op: str) -> Any:
    _want(isinstance(items, list | tuple), name, items)
    if not items:
        raise _Fail(f"{name}(list) called on an empty list")
    _charge(env, len(items))
    best = items[0]
    for item in items[1:]:
        if _compare(item, best, op):
            best = item
    return best


@_fn("sets.contains", (G, ("list", "list"), "bool"))
def _sets_contains(env: _Env, a: Any, b: Any) -> bool:
    _want(isinstance(a, list | tuple) and isinstance(b, list | tuple), "sets.contains", a, b)
    _charge(env, len(a) * len(b))
    return all(any(_equal(x, y) for x in a) for y in b)


@_fn("sets.equivalent", (G, ("list", "list"), "bool"))
def _sets_equivalent(env: _Env, a: Any, b: Any) -> bool:
    return _sets_contains(env, a, b) and _sets_contains(env, b, a)


@_fn("sets.intersects", (G, ("list", "list"), "bool"))
def _sets_intersects(env: _Env, a: Any, b: Any) -> bool:
    _want(isinstance(a, list | tuple) and isinstance(b, list | tuple), "sets.intersects", a, b)
    _charge(env, len(a) * len(b))
    return any(_equal(x, y) for x in a for y in b)


@_fn("quantity", (G, ("string",), "quantity"))
def _quantity(env: _Env, s: Any) -> Quantity:
    _want(type(s) is str, "quantity", s)
    try:
        return Quantity(parse_quantity(s))
    except QuantityError as exc:
        raise _Fail(f"quantities must match the regular expression: {exc}") from None


@_fn("isQuantity", (G, ("string",), "bool"))
def _is_quantity(env: _Env, s: Any) -> bool:
    _want(type(s) is str, "isQuantity", s)
    try:
        parse_quantity(s)
    except QuantityError:
        return False
    return True


def _q(name: str, *values: Any) -> None:
    _want(all(isinstance(v, Quantity) for v in values), name, *values)


@_fn("sign", (G, ("quantity",), "int"), (M, ("quantity",), "int"))
def _sign(env: _Env, q: Any) -> int:
    _q("sign", q)
    value = cast(Quantity, q).value
    return (value > 0) - (value < 0)


@_fn("isInteger", (M, ("quantity",), "bool"))
def _q_is_integer(env: _Env, q: Any) -> bool:
    _q("isInteger", q)
    value = cast(Quantity, q).value
    return value.denominator == 1 and _INT_MIN <= value <= _INT_MAX


@_fn("asInteger", (M, ("quantity",), "int"))
def _q_as_integer(env: _Env, q: Any) -> int:
    if not _q_is_integer(env, q):
        raise _Fail("cannot convert value to integer")
    return int(q.value)


@_fn("asApproximateFloat", (M, ("quantity",), "double"))
def _q_float(env: _Env, q: Any) -> float:
    _q("asApproximateFloat", q)
    return float(q.value)


def _q_operand(name: str, q: Any, other: Any) -> Fraction:
    _q(name, q)
    if _is_int(other):
        return Fraction(other)
    _q(name, other)
    return cast(Quantity, other).value


@_fn("add", (M, ("quantity", "quantity"), "quantity"), (M, ("quantity", "int"), "quantity"))
def _q_add(env: _Env, q: Any, other: Any) -> Quantity:
    return Quantity(q.value + _q_operand("add", q, other))


@_fn("sub", (M, ("quantity", "quantity"), "quantity"), (M, ("quantity", "int"), "quantity"))
def _q_sub(env: _Env, q: Any, other: Any) -> Quantity:
    return Quantity(q.value - _q_operand("sub", q, other))


def _ordered(name: str, a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    raise _no_overload(name, a, b)


_ORDERED = ((M, ("quantity", "quantity"), "bool"), (M, ("semver", "semver"), "bool"))


@_fn("isGreaterThan", *_ORDERED)
def _greater(env: _Env, a: Any, b: Any) -> bool:
    return _ordered("isGreaterThan", a, b) == 1


@_fn("isLessThan", *_ORDERED)
def _less(env: _Env, a: Any, b: Any) -> bool:
    return _ordered("isLessThan", a, b) == -1


@_fn("compareTo", (M, ("quantity", "quantity"), "int"), (M, ("semver", "semver"), "int"))
def _compare_to(env: _Env, a: Any, b: Any) -> int:
    return _ordered("compareTo", a, b)


@_fn("semver", (G, ("string",), "semver"), (G, ("string", "bool"), "semver"))
def _semver(env: _Env, s: Any, normalize: Any = False) -> Semver:
    _want(type(s) is str and type(normalize) is bool, "semver", s)
    try:
        return Semver.normalized(s) if normalize else Semver(s)
    except ValueError as exc:
        raise _Fail(str(exc)) from None


@_fn("isSemver", (G, ("string",), "bool"), (G, ("string", "bool"), "bool"))
def _is_semver(env: _Env, s: Any, normalize: Any = False) -> bool:
    try:
        _semver(env, s, normalize)
    except _Fail:
        return False
    return True


def _semver_part(name: str) -> _F:
    def part(env: _Env, v: Any) -> int:
        _want(isinstance(v, Semver), name, v)
        return cast(int, getattr(v, name))  # name is major, minor or patch: an int
    return part


for _part in ("major", "minor", "patch"):
    _fn(_part, (M, ("semver",), "int"))(_semver_part(_part))


@_fn("int", (G, ("dyn",), "int"))
def _to_int(env: _Env, v: Any) -> int:
    try:
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            raise _no_overload("int", v)
        out = int(v) if not isinstance(v, float) else int(v)
    except ValueError:
        raise _Fail(f"cannot convert {v!r} to int") from None
    except OverflowError:
        raise _Fail("integer overflow") from None
    if not _INT_MIN <= out <= _INT_MAX:
        raise _Fail("integer overflow")
    return out


@_fn("uint", (G, ("dyn",), "uint"))
def _to_uint(env: _Env, v: Any) -> UInt:
    out = _to_int(env, v) if not isinstance(v, UInt) else int(v)
    if out < 0:
        raise _Fail("unsigned integer overflow")
    return UInt(out)


@_fn("double", (G, ("dyn",), "double"))
def _to_double(env: _Env, v: Any) -> float:
    _want(isinstance(v, int | float | str) and not isinstance(v, bool), "double", v)
    try:
        return float(v)
    except ValueError:
        raise _Fail(f"cannot convert {v!r} to double") from None


@_fn("string", (G, ("dyn",), "string"))
def _to_string(env: _Env, v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | str):
        return str(v)
    if isinstance(v, float):
        return repr(v) if v != int(v) or abs(v) >= 1e21 else f"{v:g}" if abs(v) < 1e16 else repr(v)
    if isinstance(v, bytes):
        return v.decode("utf-8")
    raise _no_overload("string", v)


@_fn("bool", (G, ("dyn",), "bool"))
def _to_bool(env: _Env, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if type(v) is str and v in ("true", "True", "TRUE", "t", "1", "false", "False", "FALSE", "f", "0"):
        return v in ("true", "True", "TRUE", "t", "1")
    raise _no_overload("bool", v)


@_fn("bytes", (G, ("dyn",), "bytes"))
def _to_bytes(env: _Env, v: Any) -> bytes:
    _want(isinstance(v, str | bytes), "bytes", v)
    return v.encode() if isinstance(v, str) else v


@_fn("dyn", (G, ("dyn",), "dyn"))
def _dyn(env: _Env, v: Any) -> Any:
    return v


# --------------------------------------------------------------------------- operators


def _equal(a: object, b: object) -> bool:
    """CEL heterogeneous equality: numbers compare by value across int, uint and double;
    bool is not a number; lists and maps compare element by element."""
    ta, tb = type(a), type(b)
    if ta is tb and ta in (str, int, bool, float):
        return a == b
    numeric_a = isinstance(a, int | float) and not isinstance(a, bool)
    numeric_b = isinstance(b, int | float) and not isinstance(b, bool)
    if numeric_a or numeric_b:
        return numeric_a and numeric_b and a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return len(a) == len(b) and all(k in b and _equal(v, b[k]) for k, v in a.items())
    if isinstance(a, bool) or isinstance(b, bool):
        return ta is tb and a == b
    return ta is tb and a == b


class _Ordered(Protocol):
    """What `_compare` compares once it has checked its operands (two numbers, or two str, bytes
    or bool): every comparison answers a bool."""

    def __lt__(self, other: Any, /) -> bool: ...
    def __le__(self, other: Any, /) -> bool: ...
    def __gt__(self, other: Any, /) -> bool: ...
    def __ge__(self, other: Any, /) -> bool: ...


def _compare(a: Any, b: Any, op: str) -> bool:
    numeric = (isinstance(a, int | float) and not isinstance(a, bool)
               and isinstance(b, int | float) and not isinstance(b, bool))
    if not numeric and not (type(a) is type(b) and type(a) in (str, bytes, bool)):
        raise _no_overload(_OP_NAMES[op], a, b)
    x: _Ordered = a  # checked just above; annotated names rather than casts on this hot path
    y: _Ordered = b
    if op == "<":
        return x < y
    if op == "<=":
        return x <= y
    if op == ">":
        return x > y
    return x >= y


_OP_NAMES = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_",
             "+": "_+_", "-": "_-_", "*": "_*_", "/": "_/_", "%": "_%_", "in": "@in"}


def _arith(op: str, a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is int and tb is int or ta is UInt and tb is UInt:
        if op == "+":
            out = a + b
        elif op == "-":
            out = a - b
        elif op == "*":
            out = a * b
        elif b == 0:
            raise _Fail("division by zero" if op == "/" else "modulus by zero")
        elif op == "/":
            out = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        else:
            out = int(math.fmod(a, b)) if abs(a) < 2**52 and abs(b) < 2**52 else a - b * int(a / b)
        if ta is UInt:
            if not 0 <= out <= _UINT_MAX:
                raise _Fail("unsigned integer overflow")
            return UInt(out)
        if not _INT_MIN <= out <= _INT_MAX:
            raise _Fail("integer overflow")
        return out
    if ta is float and tb is float and op != "%":
        if op == "/":
            return a / b if b else (math.copysign(math.inf, a) * math.copysign(1, b) if a else math.nan)
        return a + b if op == "+" else a - b if op == "-" else a * b
    if op == "+" and ta is tb and ta in (str, bytes, list):
        return a + b
    if op == "+" and isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return list(a) + list(b)
    raise _no_overload(_OP_NAMES[op], a, b)


def _in(item: Any, container: Any) -> bool:
    if isinstance(container, dict):
        try:
            return item in container and dict.__contains__(container, item)
        except TypeError:
            return False
    if isinstance(container, list | tuple):
        return any(_equal(item, x) for x in container)
    raise _no_overload("@in", item, container)


def _lookup(container: Any, key: Any) -> Any:
    if isinstance(container, dict):
        try:
            return container[key]
        except KeyError:
            raise _Fail(f"no such key: {key}") from None
        except TypeError:
            raise _Fail(f"unsupported key type: {_type_name(key)}") from None
    if isinstance(container, list | tuple):
        if isinstance(key, float) and key == int(key):
            key = int(key)
        if not isinstance(key, int) or isinstance(key, bool):
            raise _Fail(f"unsupported index type '{_type_name(key)}' in list")
        if not 0 <= key < len(container):
            raise _Fail(f"index out of bounds: {key}")
        return container[key]
    raise _Fail(f"no such overload: {_type_name(container)}[{_type_name(key)}]")


def _field(container: Any, name: str) -> Any:
    """`x.name`: a map's entry, as `x["name"]` reads it; nothing else has fields at run time."""
    if isinstance(container, dict):
        return _lookup(container, name)
    raise _Fail(f"type '{_type_name(container)}' does not support field selection")


def _has(container: Any, name: str) -> bool:
    """`has(x.name)`: whether the map has the entry (an unknown domain of device.attributes reads
    as an empty map, but has() says it is absent)."""
    if not isinstance(container, dict):
        raise _Fail(f"invalid type for field selection: {_type_name(container)}")
    return dict.__contains__(container, name)


def _map_key(key: Any) -> Any:
    """A map literal's key: CEL keys are int, uint, bool and string only."""
    if isinstance(key, float | list | dict | type(None) | Quantity | Semver):
        raise _Fail(f"unsupported key type: {_type_name(key)}")
    return key
