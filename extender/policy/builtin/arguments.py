"""Plugin `args` (and `settings.usage`) checked by marshmallow schemas each plugin declares as a table.

    _ARGS = arguments.schema({"bindTimeoutSeconds": arguments.integer(minimum=1, maximum=86400, default=600)})
    timeout = arguments.load(_ARGS, args)["bindTimeoutSeconds"]     # in the plugin's factory

Every problem is reported, each as `path: message` with its path inside `args`
(`values.spot: not a number`); the policy loader prefixes `scores[1].args.`, so a user sees
exactly which line of the policy file to fix. Plugins declare their schemas through this
module only: marshmallow stays out of the engine and of the plugins' run-time code, and a
schema runs when a policy loads, never per pod.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from marshmallow import Schema, ValidationError, fields, missing, post_load, pre_load

from extender.errors import InvalidObject, PolicyError
from extender.policy import schemas

MAX_DURATION = 7 * 24 * 3600.0
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}

Read = Callable[[Any], Any]
Invalid = ValidationError  # what a `build` raises: Invalid("message") or Invalid({"field": ["message"]})


class Args(schemas.Strict):
    """A plugin's args: unknown keys are typos, never "use the default"."""

    def unknown_key(self, key: Any) -> str:
        return f"unknown argument (allowed: {', '.join(sorted(self.keys)) or 'none'})"

    @pre_load
    def _a_mapping(self, data: Any, **_: Any) -> Any:
        """Replaces Strict's: a missing value (YAML `args:` with nothing after it) is no args."""
        return {} if data is None else _mapping(data)


def _mapping(raw: Any) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ValidationError("expected a mapping")
    for key in raw:
        if not isinstance(key, str):
            raise ValidationError(f"key {key!r} is not a string (quote it in YAML)")
    return raw


class Value(fields.Field[Any]):
    """One value made by `read` (which raises ValidationError). A missing value is `default`, or
    "required", or else read as null; null is `null` when given, else read like any value; an
    empty result is the problem `empty` when given."""

    def __init__(self, read: Read, *, default: Any = missing, required: bool = False, null: Any = missing,
                 empty: str = "", data_key: str | None = None) -> None:
        super().__init__(load_default=default, required=required, data_key=data_key,
                         error_messages={"required": "required"})
        self.read, self.null, self.empty = read, null, empty

    def deserialize(self, value: Any, attr: str | None = None, data: Any = None, **kwargs: Any) -> Any:
        if value is missing and (self.required or self.load_default is not missing):
            return super().deserialize(value, attr, data, **kwargs)
        if (value is None or value is missing) and self.null is not missing:
            return self.null
        made = self.read(None if value is missing else value)
        return fail(self.empty) if self.empty and not made else made


value = Value  # the field of a value only its `read` knows how to check


def schema(table: Mapping[str, fields.Field[Any]], build: Callable[[dict[str, Any]], Any] | None = None) -> Schema:
    """The schema of one mapping; `build(values)` makes what `load` returns and may raise
    ValidationError for rules across fields (it runs only when every field is valid)."""
    attrs: dict[str, Any] = dict(table)
    if build is not None:
        attrs["_build"] = post_load(lambda self, data, **_: build(data))
    return cast(Args, type("Args", (Args,), attrs)())  # type() over Args alone makes a subclass of Args


NONE = schema({})  # the args of a plugin that takes none


def one_needed(
    keys: tuple[str, ...], message: str, build: Callable[[dict[str, Any]], Any] = dict,
) -> Callable[[dict[str, Any]], Any]:
    """A `build` that refuses values in which none of `keys` is set, then makes `build(values)`."""

    def check(values: dict[str, Any]) -> Any:
        return build(values) if any(values[key] for key in keys) else fail(message)

    return check


def load(args_schema: Schema, raw: Any, where: str = "") -> Any:
    """The checked values of `raw`, or a PolicyError naming every problem under `where`."""
    try:
        return args_schema.load(raw)
    except ValidationError as exc:
        spell = (lambda path: schemas.bracketed((where, *path))) if where else schemas.bracketed
        raise PolicyError(*schemas.problems(exc, top="args", spell=spell)) from None


def fail(message: str) -> Any:
    """Raise `message` as the problem of the value being read (for use inside an expression)."""
    raise ValidationError(message)


def _each(pairs: Iterable[tuple[Any, Any]], read: Read) -> list[tuple[Any, Any]]:
    """(key, read(item)) for each pair, every problem kept at its key (an index or a name)."""
    made, problems = [], {}
    for key, item in pairs:
        try:
            made.append((key, read(item)))
        except ValidationError as exc:
            problems[key] = exc.messages
    if problems:
        raise ValidationError(problems)
    return made


# ---- the fields ---------------------------------------------------------------------------------


def read_string(raw: Any, *, allow_empty: bool = False) -> str:
    if not isinstance(raw, str) or (not raw and not allow_empty):
        raise ValidationError("expected a non-empty string")
    return raw


def string(*, allow_empty: bool = False, **options: Any) -> fields.Field[Any]:
    return Value(lambda raw: read_string(raw, allow_empty=allow_empty), **options)


def read_strings(raw: Any, each: Callable[[str], str] | None = None) -> tuple[str, ...]:
    """A list of non-empty strings, kept in order, duplicates dropped; `each(item)` names a problem."""

    def read_item(raw: Any) -> str:
        item = read_string(raw)
        problem = each(item) if each else ""
        return fail(problem) if problem else item

    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise ValidationError("expected a list of strings")
    return tuple(dict.fromkeys(item for _, item in _each(enumerate(raw), read_item)))


def strings(*, each: Callable[[str], str] | None = None, **options: Any) -> fields.Field[Any]:
    return Value(lambda raw: read_strings(raw, each), **({"default": ()} | options))


def read_duration(raw: Any, *, minimum: float = 0.0) -> float:
    """Seconds from a number or a string like `30s`, `2m`, `500ms`, `1h` (at most a week)."""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        seconds = float(raw)
    elif isinstance(raw, str) and (match := _DURATION.match(raw)):
        seconds = float(match[1]) * _SCALE[match[2]]
    else:
        raise Invalid("expected a duration such as 30s, 2m or a number of seconds")
    if seconds != seconds or not minimum <= seconds <= MAX_DURATION:
        raise Invalid(f"must be from {minimum:g}s to {MAX_DURATION:g}s")
    return seconds


def read_number(raw: Any, *, minimum: float | None = None) -> float:
    """An int or float (never a bool, which YAML produces from `yes`/`no`)."""
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw != raw:
        raise ValidationError("not a number")
    if abs(raw) > sys.float_info.max:  # inf, or an int no float holds
        raise ValidationError("not a finite number")
    if minimum is not None and raw < minimum:
        raise ValidationError(f"must be at least {minimum:g}")
    return float(raw)


def number(*, minimum: float | None = None, **options: Any) -> fields.Field[Any]:
    return Value(lambda raw: read_number(raw, minimum=minimum), **options)


def read_integer(raw: Any, *, minimum: int, maximum: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not minimum <= raw <= maximum:
        raise ValidationError(f"must be an integer from {minimum} to {maximum}")
    return raw


def integer(*, minimum: int, maximum: int, **options: Any) -> fields.Field[Any]:
    return Value(lambda raw: read_integer(raw, minimum=minimum, maximum=maximum), **options)


def boolean(**options: Any) -> fields.Field[Any]:
    return Value(lambda raw: raw if isinstance(raw, bool) else fail("expected true or false"), **options)


def one_of(choices: tuple[Any, ...], message: str, **options: Any) -> fields.Field[Any]:
    """One of `choices`; `message` may name the value as `{value!r}`."""
    return Value(lambda raw: raw if raw in choices else fail(message.format(value=raw)), **options)


def items(read_item: Read, what: str, **options: Any) -> fields.Field[Any]:
    """A list (null: empty), each item made by `read_item` (a schema's `load` for mappings); `what`
    is the problem of anything else."""

    def read(raw: Any) -> tuple[Any, ...]:
        if raw is not None and not isinstance(raw, list):
            raise ValidationError(what)
        return tuple(item for _, item in _each(enumerate(raw or ()), read_item))

    return Value(read, **options)


def table(read_value: Read, **options: Any) -> fields.Field[Any]:
    """A mapping of names to values made by `read_value`; each problem at its name."""
    return Value(lambda raw: dict(_each(_mapping(raw).items(), read_value)), **options)


def parsed(parse: Callable[[Any, str], Any]) -> Read:
    """A reader for a model parser (`parse(raw, where)`, raising InvalidObject whose message starts
    with `where`): its problem lands at the path the parser names below the field."""

    def read(raw: Any) -> Any:
        try:
            return parse(raw, "")
        except InvalidObject as exc:
            below, _, message = str(exc).partition(": ")
            raise ValidationError({below[1:]: [message]} if below else message) from None

    return read
