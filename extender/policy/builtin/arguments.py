"""Checking a plugin's `args` mapping without marshmallow (the policy layer must not import it).

Every error is a `PolicyError` whose message starts with the path inside `args`
(`values.spot: not a number`); the policy loader prefixes `scores[1].args.`, so a
user sees exactly which line of the policy file to fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from extender.errors import InvalidObject, PolicyError
from extender.model.selectors import LabelSelector, parse_label_selector


def join(where: str, key: str | int) -> str:
    """`join("values", "spot")` -> `values.spot`; `join("rules", 0)` -> `rules[0]`."""
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def mapping(raw: Any, where: str) -> Mapping[str, Any]:
    """A mapping, or {} for a missing value (YAML `args:` with nothing after it is None)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{where or 'args'}: expected a mapping")
    for key in raw:
        if not isinstance(key, str):
            raise PolicyError(f"{where or 'args'}: key {key!r} is not a string (quote it in YAML)")
    return raw


def only_keys(args: Mapping[str, Any], allowed: Iterable[str], where: str = "") -> None:
    """Refuse unknown keys: a typo in a policy must not silently mean "use the default"."""
    known = sorted(allowed)
    for key in args:
        if key not in known:
            hint = ", ".join(known) if known else "none"
            raise PolicyError(f"{join(where, key)}: unknown argument (allowed: {hint})")


def string(raw: Any, where: str, *, allow_empty: bool = False) -> str:
    if not isinstance(raw, str) or (not raw and not allow_empty):
        raise PolicyError(f"{where}: expected a non-empty string")
    return raw


def string_list(raw: Any, where: str) -> tuple[str, ...]:
    """A list of non-empty strings, kept in order, duplicates dropped."""
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise PolicyError(f"{where}: expected a list of strings")
    seen: dict[str, None] = {}
    for index, item in enumerate(raw):
        seen[string(item, join(where, index))] = None
    return tuple(seen)


def number(raw: Any, where: str, *, minimum: float | None = None) -> float:
    """An int or float (never a bool, which YAML produces from `yes`/`no`)."""
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw != raw:
        raise PolicyError(f"{where}: not a number")
    if raw in (float("inf"), float("-inf")):
        raise PolicyError(f"{where}: not a finite number")
    if minimum is not None and raw < minimum:
        raise PolicyError(f"{where}: must be at least {minimum:g}")
    return raw


def integer(raw: Any, where: str, *, minimum: int, maximum: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not minimum <= raw <= maximum:
        raise PolicyError(f"{where}: must be an integer from {minimum} to {maximum}")
    return raw


def label_selector(raw: Any, where: str) -> LabelSelector:
    """metav1.LabelSelector; the model's parser already names the field, we only re-type the error."""
    try:
        return parse_label_selector(raw, where)
    except InvalidObject as exc:
        raise PolicyError(str(exc)) from None
