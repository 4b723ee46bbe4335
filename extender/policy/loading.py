"""The policy file: YAML, validated with marshmallow, turned into a `Policy` of built plugins.

    apiVersion: extender/v1alpha1
    kind: Policy
    filters:
      - name: NodeReady
        args: {pressureConditions: [MemoryPressure]}
    scores:
      - name: LeastAllocated
        weight: 1            # 1..100, default 1

The envelope is checked here with a schema built on policy/schemas, each plugin checks
its own `args` in its factory (through policy/builtin/arguments). Every problem is a
`PolicyError` whose message names the file and the path to fix, such as
`policy.yaml: scores[1].args.values.spot: not a number`; all problems are reported
at once so a user fixes a file in one round.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from os import PathLike
from typing import Any

import yaml
from marshmallow import ValidationError, fields, validate

from extender.errors import ExtenderError, PolicyError
from extender.policy import names, schemas
from extender.policy.builtin import arguments
from extender.policy.builtin.devices import DeviceFit
from extender.policy.engine import Policy, WeightedScorer
from extender.policy.plugins import extension_points
from extender.policy.registry import Registry, default_registry
from extender.policy.usage_settings import parse_usage_settings

API_VERSION = "extender/v1alpha1"
KIND = "Policy"
MAX_WEIGHT = 100
MAX_POLICY_BYTES = 1 << 20

_MESSAGES = {
    "Missing data for required field.": "required",
    "Not a valid string.": "expected a string",
    "Not a valid mapping type.": "expected a mapping",
    "Invalid input type.": "expected a mapping",
    "Not a valid list.": "expected a list",
    "Field may not be null.": "must not be null",
}


class _Entry(schemas.Strict):
    def unknown_key(self, key: Any) -> str:
        return f"unknown key (allowed: {', '.join(self.keys)})"


class _FilterEntry(_Entry):
    name = fields.String(required=True, validate=validate.Length(min=1, error="must not be empty"))
    args = fields.Dict(keys=fields.String(), allow_none=True, load_default=None)


class _ScoreEntry(_FilterEntry):
    weight = arguments.integer(minimum=1, maximum=MAX_WEIGHT, default=1)  # YAML's `true` or `1.5` refused

    class Meta(_Entry.Meta):
        fields = ("name", "weight", "args")  # in this order in the message of an unknown key


class _PolicySchema(_Entry):
    apiVersion = fields.String(
        required=True, validate=validate.Equal(API_VERSION, error=f"must be {API_VERSION}")
    )
    kind = fields.String(required=True, validate=validate.Equal(KIND, error=f"must be {KIND}"))
    filters = fields.List(fields.Nested(_FilterEntry), allow_none=True, load_default=None)
    scores = fields.List(fields.Nested(_ScoreEntry), allow_none=True, load_default=None)
    settings = fields.Dict(keys=fields.String(), allow_none=True, load_default=None)


# How the best-scoring nodes are told apart (extender.cycle.pod.select_host).
TIE_BREAKS = ("random", "nodeName")


def _parse_text(text: str, source: str) -> Any:
    if len(text.encode()) > MAX_POLICY_BYTES:
        raise PolicyError(f"{source}: larger than {MAX_POLICY_BYTES} bytes")
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise PolicyError(f"{source}: {where}invalid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise PolicyError(f"{source}: invalid YAML: {exc}") from None


def _digest(text_or_mapping: str | Mapping[str, Any]) -> str:
    if isinstance(text_or_mapping, str):
        data = text_or_mapping.encode()
    else:
        data = json.dumps(text_or_mapping, sort_keys=True, default=str).encode()
    return hashlib.sha256(data).hexdigest()


def _build(
    registry: Registry, section: str, index: int, entry: Mapping[str, Any], errors: list[str]
) -> Any:
    """Build one plugin; problems are appended to `errors` with their path."""
    name = entry["name"]
    kind, other = ("filter", "scorer") if section == "filters" else ("scorer", "filter")
    known = registry.filter_names() if section == "filters" else registry.scorer_names()
    if name not in known:
        others = registry.scorer_names() if section == "filters" else registry.filter_names()
        hint = ""
        if name in others:
            hint = f"; {name} is a {other}, list it under {'scores' if other == 'scorer' else 'filters'}"
        errors.append(
            f"{section}[{index}].name: unknown {kind} plugin {name!r} (known: {', '.join(known)}){hint}"
        )
        return None
    args = entry.get("args") or {}
    build = registry.build_filter if section == "filters" else registry.build_scorer
    try:
        plugin = build(name, args)
    except PolicyError as exc:
        for message in exc.problems or (str(exc),):
            if message.startswith("args: "):
                errors.append(f"{section}[{index}].{message}")
            elif _is_path(message):
                errors.append(f"{section}[{index}].args.{message}")
            else:
                errors.append(f"{section}[{index}].args: {message}")
        return None
    except ExtenderError as exc:
        errors.append(f"{section}[{index}].args: {exc}")
        return None
    except Exception as exc:  # a third-party factory's bug must not hide which entry failed
        errors.append(f"{section}[{index}]: plugin {name} could not be built: {type(exc).__name__}: {exc}")
        return None
    points = extension_points(plugin)
    if not (points.filters if section == "filters" else points.scores):
        method = "filter" if section == "filters" else "score"
        errors.append(f"{section}[{index}]: plugin {name} has no {method}() method")
        return None
    return plugin


def _is_path(message: str) -> bool:
    """True when a factory's message starts with a path inside args ("values.spot: ...")."""
    head, sep, _ = message.partition(": ")
    return bool(sep) and " " not in head


def load_policy(
    text_or_mapping: str | Mapping[str, Any], source: str = "<string>", registry: Registry | None = None
) -> Policy:
    """Validate a policy (YAML text or an already parsed mapping) and build its plugins."""
    raw = _parse_text(text_or_mapping, source) if isinstance(text_or_mapping, str) else text_or_mapping
    if raw is None:
        raise PolicyError(f"{source}: the policy is empty (expected apiVersion: {API_VERSION}, kind: {KIND})")
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{source}: expected a mapping with apiVersion: {API_VERSION} and kind: {KIND}")
    try:
        loaded = _PolicySchema().load(raw)
    except ValidationError as exc:
        raise PolicyError(f"{source}: " + "; ".join(schemas.problems(exc, top="policy", words=_MESSAGES))) from None

    registry = registry if registry is not None else default_registry()
    errors: list[str] = []
    built: dict[str, list[Any]] = {"filters": [], "scores": []}
    for section in ("filters", "scores"):
        seen: dict[str, int] = {}
        for index, entry in enumerate(loaded.get(section) or []):
            name = entry["name"]
            if name in seen:
                errors.append(f"{section}[{index}].name: {name} is already listed at {section}[{seen[name]}]")
                continue
            seen[name] = index
            plugin = _build(registry, section, index, entry, errors)
            if plugin is not None:
                if section == "scores":
                    plugin = WeightedScorer(plugin, entry["weight"])
                built[section].append(plugin)
    settings = loaded.get("settings") or {}
    try:
        parse_usage_settings(settings.get("usage"))
    except PolicyError as exc:
        errors.extend(exc.problems)
    if settings.get("tieBreak", TIE_BREAKS[0]) not in TIE_BREAKS:
        errors.append(f"settings.tieBreak: {settings['tieBreak']!r} is not one of {', '.join(TIE_BREAKS)} "
                      "(random: kube-scheduler's; nodeName: the smallest node name among the best)")
    if errors:
        raise PolicyError(f"{source}: " + "; ".join(errors))
    return Policy(
        filters=_claims_placed_once(tuple(built["filters"])),
        scorers=tuple(built["scores"]),
        source=source,
        digest=_digest(text_or_mapping),
        settings=dict(settings),
    )


def _claims_placed_once(filters: tuple[Any, ...]) -> tuple[Any, ...]:
    """With DynamicResources listed, it allocates every claim: DeviceFit leaves the pods' own
    shared-GPU claims to it (gpu_claims.py), so one plugin allocates each claim."""
    if not any(getattr(plugin, "name", "") == names.DYNAMIC_RESOURCES for plugin in filters):
        return filters
    return tuple(replace(p, places_claims=False) if isinstance(p, DeviceFit) else p for p in filters)


def load_policy_file(path: str | PathLike[str], registry: Registry | None = None) -> Policy:
    """Read and load a policy file; an unreadable file is a PolicyError naming it."""
    source = str(path)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(MAX_POLICY_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{source}: cannot read the policy file: {exc}") from None
    return load_policy(text, source=source, registry=registry)
