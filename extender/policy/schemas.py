"""The one way this project checks what a user wrote: marshmallow schemas, each problem a `path: message` line.

The policy file, plugin args, `settings.usage`, kube-scheduler's configuration (checks/configs)
and the extender/v1 envelope (wire) all load through marshmallow and report through `problems`.
They run when a policy or a file loads and on a request's envelope; the engine never imports this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, pre_load, validates_schema

Path = tuple[str | int, ...]
_KINDS = ((bool, "a boolean"), (int | float, "a number"), (str, "a string"), (list, "a list"), (Mapping, "a mapping"))


def type_name(value: Any) -> str:
    """How a message names what it got: `a number`, `a mapping`, `null`."""
    return "null" if value is None else next((name for kind, name in _KINDS if isinstance(value, kind)),
                                             type(value).__name__)


class Strict(Schema):
    """A mapping whose every key is a declared field: each unknown key is a problem at its own path,
    beside the problems of the known ones (marshmallow's RAISE names no field that exists)."""

    class Meta:
        unknown = EXCLUDE

    #: The problem of a value that is no mapping; `{type}` names what it is.
    not_a_mapping = "expected a mapping"

    @property
    def keys(self) -> list[str]:
        """The keys a mapping may hold, in declaration order."""
        return [field.data_key or name for name, field in self.load_fields.items()]

    def unknown_key(self, key: Any) -> str:
        """The problem of a key that is not a field."""
        return "unknown field"

    @pre_load
    def _a_mapping(self, data: Any, **_: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValidationError(self.not_a_mapping.format(type=type_name(data)))
        return data

    @validates_schema(pass_original=True, skip_on_field_errors=False)
    def _known_keys(self, _: Any, original: Mapping[Any, Any], **__: Any) -> None:
        keys = self.keys
        unknown = {str(key): [self.unknown_key(key)] for key in original or () if key not in keys}
        if unknown:
            raise ValidationError(unknown)


def flatten(messages: Any, path: Path = ()) -> Iterator[tuple[Path, str]]:
    """marshmallow's nested {"scores": {1: {"weight": [...]}}} -> (("scores", 1, "weight"), message)."""
    if isinstance(messages, Mapping):
        for key, value in messages.items():
            yield from flatten(value, path if key == "_schema" else (*path, key))
    elif isinstance(messages, list):
        for message in messages:
            yield from flatten(message, path)
    else:
        yield path, str(messages)


def bracketed(path: Path) -> str:
    """("scores", 1, "args") -> `scores[1].args`, as a user points into YAML."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def dotted(path: Path) -> str:
    """("Nodes", "items", 2) -> `Nodes.items.2`, the wire's spelling."""
    return ".".join(str(part) for part in path)


def problems(error: ValidationError, *, top: str = "", spell: Callable[[Path], str] = bracketed,
             words: Mapping[str, str] | None = None) -> list[str]:
    """Every problem of `error` once, sorted by path: `path: message`, `top: message` (or the bare
    message when `top` is empty) for the object itself; `words` rewords marshmallow's stock messages."""
    found = sorted({(path, (words or {}).get(message, message)) for path, message in flatten(error.messages)},
                   key=lambda item: (spell(item[0]), item[1]))
    return [f"{where}: {message}" if (where := spell(path) or top) else message for path, message in found]
