"""Offline checks of the files an operator hands to kube-scheduler and to us.

kube-scheduler decodes its KubeSchedulerConfiguration strictly: an unknown or
misspelt field (`urlprefix`, `nodeCacheable`) stops it from starting, and a
field of the wrong type (`httpTimeout: 5`) too. Some mistakes it accepts but
that break the extender at run time: a verb that is not one of our routes (every
pod fails with "code 404"), an https extender without a CA (kube-scheduler then
silently skips certificate checks). `extender check` catches both kinds before a
rollout, with messages that name the field: `extenders[0].weight: must be > 0
when prioritizeVerb is set`.

The schema below models `kubescheduler.config.k8s.io/v1` as of kube-scheduler
v1.36 (k8s.io/kube-scheduler/config/v1/types.go and the component-base types
it embeds); plugin `args` are left to kube-scheduler.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import yaml
from marshmallow import Schema, ValidationError, fields

from extender.errors import PolicyError
from extender.model.devices import PREFIX, RESOURCES
from extender.policy import schemas

__all__ = [
    "API_VERSION",
    "KIND",
    "SERVED_VERBS",
    "check_policy",
    "check_scheduler_config",
    "check_scheduler_config_text",
    "parse_go_duration",
    "validate_scheduler_config",
]

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"

#: Extender config field -> the route our webhook serves for it (under --url-prefix).
SERVED_VERBS: dict[str, str] = {
    "filterVerb": "filter",
    "prioritizeVerb": "prioritize",
    "preemptVerb": "preempt",
    "bindVerb": "bind",
}

Problems = list[str]


# --- Go-compatible scalars ---------------------------------------------------------

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,
    "\u03bcs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """Seconds in a Go `time.ParseDuration` string ("5s", "1m30s", "250ms").

    metav1.Duration decodes with exactly that function, so a bare number, a space
    or a unit such as "sec" is an error for kube-scheduler and must be one here.
    """
    rest = text
    sign = 1.0
    if rest[:1] in ("+", "-"):
        sign = -1.0 if rest[0] == "-" else 1.0
        rest = rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(f"invalid duration {text!r}")
    total, pos = 0.0, 0
    while pos < len(rest):
        match = _DURATION_PART.match(rest, pos)
        if match is None:
            raise ValueError(f"invalid duration {text!r}")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return sign * total


if TYPE_CHECKING:  # marshmallow 4 makes fields generic; 3 (still allowed) does not subscript at run time
    _Field = fields.Field[Any]
    _ListField = fields.List[Any]
else:
    _Field = fields.Field
    _ListField = fields.List


class _Go(_Field):
    """A Go scalar decoded strictly: only JSON values of its kind (never a bool for a number); null is
    the zero value, as in Go."""

    def __init__(self, kinds: type | UnionType, what: str, check: Callable[[Any], str] | None = None) -> None:
        super().__init__(allow_none=True)
        self.kinds, self.what, self.check = kinds, what, check

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if not isinstance(value, self.kinds) or isinstance(value, bool) != (self.kinds is bool):
            raise ValidationError(f"must be {self.what}, not {schemas.type_name(value)}")
        problem = self.check(value) if self.check else ""
        if problem:
            raise ValidationError(problem)
        return value


def _in(low: int, high: int) -> Callable[[int], str]:
    return lambda value: "" if low <= value <= high else f"{value} is out of range"


def _go_duration(value: str) -> str:
    try:
        parse_go_duration(value)
    except ValueError:
        return f'{value!r} is not a duration (use Go syntax: "5s", "1m30s")'
    return ""


def _base64(value: str) -> str:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return "is not valid base64 (it holds PEM bytes, base64-encoded)"
    return ""


_string = partial(_Go, str, "a string")
_boolean = partial(_Go, bool, "true or false")
_int32 = partial(_Go, int, "an integer", _in(-(2**31), 2**31 - 1))
_int64 = partial(_Go, int, "an integer", _in(-(2**63), 2**63 - 1))
_duration = partial(_Go, str, 'a duration string such as "5s"', _go_duration)
_bytes = partial(_Go, str, "a base64 string", _base64)


# --- Structures --------------------------------------------------------------------


class _Struct(schemas.Strict):
    """A Go struct decoded strictly: every key must be a known, case-exact field."""

    not_a_mapping = "must be a mapping, not {type}"

    def unknown_key(self, key: Any) -> str:
        exact = [name for name in self.keys if name.lower() == str(key).lower()]
        close = exact or difflib.get_close_matches(str(key), self.keys, n=1, cutoff=0.75)
        return "unknown field" + (f" (did you mean {close[0]!r}? field names are case-sensitive)" if close else "")


class _List(_ListField):
    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if not isinstance(value, list):
            raise ValidationError(f"must be a list, not {schemas.type_name(value)}")
        return super()._deserialize(value, attr, data, **kwargs)


def _one(struct: type[Schema]) -> _Field:
    return fields.Nested(struct, allow_none=True)


def _many(struct: type[Schema]) -> _Field:
    return _List(fields.Nested(struct, allow_none=True), allow_none=True)


_LEADER_ELECTION = _Struct.from_dict({
    "leaderElect": _boolean(),
    "leaseDuration": _duration(),
    "renewDeadline": _duration(),
    "retryPeriod": _duration(),
    "resourceLock": _string(),
    "resourceName": _string(),
    "resourceNamespace": _string(),
})

_CLIENT_CONNECTION = _Struct.from_dict({
    "kubeconfig": _string(),
    "acceptContentTypes": _string(),
    "contentType": _string(),
    "qps": _Go(int | float, "a number"),
    "burst": _int32(),
})

_PLUGIN = _Struct.from_dict({"name": _string(), "weight": _int32()})
_PLUGIN_SET = _Struct.from_dict({"enabled": _many(_PLUGIN), "disabled": _many(_PLUGIN)})
_EXTENSION_POINTS = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
    "multiPoint",
    "placementGenerate",
    "placementScore",
    "placementFeasible",
    "podGroupPostFilter",
)
_PLUGINS = _Struct.from_dict({point: _one(_PLUGIN_SET) for point in _EXTENSION_POINTS})
# Plugin args: kube-scheduler decodes them per plugin; not modelled here.
_PLUGIN_CONFIG = _Struct.from_dict({"name": _string(), "args": fields.Raw(allow_none=True)})

_PROFILE = _Struct.from_dict({
    "schedulerName": _string(),
    "percentageOfNodesToScore": _int32(),
    "percentageOfPlacementsToScore": _int32(),
    "plugins": _one(_PLUGINS),
    "pluginConfig": _many(_PLUGIN_CONFIG),
})

_TLS_CONFIG = _Struct.from_dict({
    "insecure": _boolean(),
    "serverName": _string(),
    "certFile": _string(),
    "keyFile": _string(),
    "caFile": _string(),
    "certData": _bytes(),
    "keyData": _bytes(),
    "caData": _bytes(),
})

_MANAGED_RESOURCE = _Struct.from_dict({"name": _string(), "ignoredByScheduler": _boolean()})

_EXTENDER = _Struct.from_dict({
    "urlPrefix": _string(),
    "filterVerb": _string(),
    "preemptVerb": _string(),
    "prioritizeVerb": _string(),
    "weight": _int64(),
    "bindVerb": _string(),
    "enableHTTPS": _boolean(),
    "tlsConfig": _one(_TLS_CONFIG),
    "httpTimeout": _duration(),
    "nodeCacheCapable": _boolean(),
    "managedResources": _many(_MANAGED_RESOURCE),
    "ignorable": _boolean(),
})

_CONFIGURATION = _Struct.from_dict({
    "apiVersion": _string(),
    "kind": _string(),
    "parallelism": _int32(),
    "leaderElection": _one(_LEADER_ELECTION),
    "clientConnection": _one(_CLIENT_CONNECTION),
    "enableProfiling": _boolean(),
    "enableContentionProfiling": _boolean(),
    "percentageOfNodesToScore": _int32(),
    "percentageOfPlacementsToScore": _int32(),
    "podInitialBackoffSeconds": _int64(),
    "podMaxBackoffSeconds": _int64(),
    "profiles": _many(_PROFILE),
    "extenders": _many(_EXTENDER),
    "delayCacheUntilActive": _boolean(),
})()


# --- Loading -----------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that records duplicate keys, which Kubernetes' strict decoding refuses."""

    duplicates: list[str]


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue  # complex keys are reported as unknown fields later
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            loader.duplicates.append(
                f"line {key_node.start_mark.line + 1}: duplicate field {key!r}"
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _load_yaml(text: str) -> tuple[Any, Problems]:
    loader = _StrictLoader(text)
    loader.duplicates = []
    try:
        if not loader.check_node():
            return None, ["(top level): the file is empty"]
        document = loader.get_data()
        if loader.check_node():
            return None, ["(top level): more than one YAML document; kube-scheduler reads one"]
    except yaml.YAMLError as exc:
        return None, [f"not valid YAML: {exc}"]
    finally:
        loader.dispose()
    return document, list(loader.duplicates)


# --- Public API --------------------------------------------------------------------


def check_scheduler_config(
    path: str | Path, *, url_prefix: str = "", check_routes: bool = True
) -> Problems:
    """Problems in the KubeSchedulerConfiguration file at `path` (empty list: fine).

    `url_prefix` is the webhook's `--url-prefix`; with `check_routes` every
    extender's verbs must land on one of our routes under it.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [f"{path}: cannot read: {exc}"]
    return check_scheduler_config_text(text, url_prefix=url_prefix, check_routes=check_routes)


def check_scheduler_config_text(
    text: str, *, url_prefix: str = "", check_routes: bool = True
) -> Problems:
    """Like `check_scheduler_config`, for the file's content (e.g. from a ConfigMap)."""
    document, problems = _load_yaml(text)
    if document is None and problems:
        return problems
    return problems + validate_scheduler_config(
        document, url_prefix=url_prefix, check_routes=check_routes
    )


def validate_scheduler_config(
    document: Any, *, url_prefix: str = "", check_routes: bool = True
) -> Problems:
    """Problems in an already-parsed KubeSchedulerConfiguration mapping.

    Unknown fields and wrong types come first and alone: the rules about values
    (weights, verbs, TLS) assume the types are right, as kube-scheduler's own
    validation runs only after a successful decode.
    """
    try:
        _CONFIGURATION.load(document)
    except ValidationError as exc:
        # Semantic checks below assume the types are right; fix those first.
        return schemas.problems(exc, top="(top level)")
    problems: Problems = []
    if document.get("apiVersion") != API_VERSION:
        problems.append(f"apiVersion: must be {API_VERSION!r}, not {document.get('apiVersion')!r}")
    if document.get("kind") != KIND:
        problems.append(f"kind: must be {KIND!r}, not {document.get('kind')!r}")
    _check_top_level(document, problems)
    _check_leader_election(document.get("leaderElection") or {}, problems)
    _check_profiles([profile or {} for profile in document.get("profiles") or []], problems)
    _check_extenders(
        document.get("extenders") or [], problems, url_prefix=url_prefix, check_routes=check_routes
    )
    return problems


def check_policy(path: str | Path, mode: str | None = None) -> Problems:
    """Problems in one of our policy files: whatever `load_policy_file` refuses, and, for a
    `mode` ("webhook" or "standalone"; None: either), what that mode cannot run."""
    # late: the policy loader brings the engine and every built-in plugin (~0.3 s), which checking a
    # kube-scheduler configuration alone (`extender check --scheduler-config`) never needs
    from extender.policy.loading import load_policy_file

    try:
        policy = load_policy_file(path)
    except PolicyError as exc:
        return [str(exc)]  # already starts with the file name
    except (OSError, UnicodeDecodeError) as exc:
        return [f"{path}: cannot read: {exc}"]
    problems = _device_policy_problems(path, policy.filters)
    if mode == "webhook":
        problems += webhook_policy_problems(path, policy.filters)
    return problems


def webhook_policy_problems(path: str | Path, filters: tuple[object, ...]) -> Problems:
    """What a webhook policy cannot do: DeviceFit with a deviceClass records GPU shares as DRA
    allocations, but in webhook mode kube-scheduler allocates DRA itself, before it calls the
    webhook, and would never see the shares the webhook holds in flight (docs/devices.md)."""
    # late: the built-in plugins cost ~0.3 s to import (see check_policy)
    from extender.policy.builtin import DeviceFit

    return [f"{path}: filters[{index}] (DeviceFit) has deviceClass {plugin.device_class!r}: shared GPUs on DRA "
            "need the standalone scheduler (`extender schedule`); in webhook mode kube-scheduler allocates DRA "
            "and would not see the shares in flight: drop deviceClass to use the annotation inventory"
            for index, plugin in enumerate(filters) if isinstance(plugin, DeviceFit) and plugin.device_class]


def _device_policy_problems(path: str | Path, filters: tuple[object, ...]) -> Problems:
    """DeviceFit shares devices out; a ResourceFit counting the same resources as whole units
    against the node's allocatable would refuse every shared GPU pod."""
    # late: the built-in plugins cost ~0.3 s to import (see check_policy)
    from extender.policy.builtin import DeviceFit, ResourceFit

    if not any(isinstance(f, DeviceFit) for f in filters):
        return []
    problems = []
    for index, plugin in enumerate(filters):
        if not isinstance(plugin, ResourceFit):
            continue
        counted = [r for r in RESOURCES if r not in plugin.ignored_resources
                   and r.split("/", 1)[0] not in plugin.ignored_resource_groups]
        if counted:
            problems.append(f"{path}: filters[{index}] (ResourceFit) counts {', '.join(counted)}, which DeviceFit "
                            f"shares out; add args: {{ignoredResourceGroups: [{PREFIX}]}}")
    return problems


# --- Semantic checks (as kube-scheduler's validation, plus our own routes) ---------


def _percentage(path: str, value: Any, problems: Problems) -> None:
    if value is not None and not 0 <= value <= 100:
        problems.append(f"{path}: {value} is not in the range 0-100")


def _check_top_level(doc: dict[str, Any], problems: Problems) -> None:
    if doc.get("parallelism") is not None and doc["parallelism"] <= 0:
        problems.append("parallelism: must be > 0")
    _percentage("percentageOfNodesToScore", doc.get("percentageOfNodesToScore"), problems)
    _percentage("percentageOfPlacementsToScore", doc.get("percentageOfPlacementsToScore"), problems)
    initial = doc.get("podInitialBackoffSeconds")
    initial = 1 if initial is None else initial
    maximum = doc.get("podMaxBackoffSeconds")
    maximum = 10 if maximum is None else maximum
    if initial <= 0:
        problems.append("podInitialBackoffSeconds: must be > 0")
    if maximum < initial:
        problems.append("podMaxBackoffSeconds: must be >= podInitialBackoffSeconds")
    burst = (doc.get("clientConnection") or {}).get("burst")
    if burst is not None and burst < 0:
        problems.append("clientConnection.burst: must be >= 0")


def _check_leader_election(le: dict[str, Any], problems: Problems) -> None:
    # Defaults from kube-scheduler: leader election on, 15s/10s/2s, lock "leases".
    if le.get("leaderElect") is False:
        return
    lock = le.get("resourceLock") or "leases"
    if lock != "leases":
        problems.append(f'leaderElection.resourceLock: must be "leases", not {lock!r}')
    durations: dict[str, float] = {}
    for name, default in (("leaseDuration", 15.0), ("renewDeadline", 10.0), ("retryPeriod", 2.0)):
        # Go's defaulting treats a zero duration as unset, so "0s" takes the default too.
        seconds = parse_go_duration(le[name]) if le.get(name) else 0.0
        durations[name] = seconds or default
        if seconds < 0:
            problems.append(f"leaderElection.{name}: must be > 0")
    if durations["leaseDuration"] <= durations["renewDeadline"]:
        problems.append("leaderElection.leaseDuration: must be greater than renewDeadline")


def _check_profiles(profiles: list[dict[str, Any]], problems: Problems) -> None:
    if not profiles:
        return  # kube-scheduler adds "default-scheduler"
    names: dict[str, int] = {}
    for index, profile in enumerate(profiles):
        path = f"profiles[{index}]"
        name = profile.get("schedulerName")
        if not name and len(profiles) > 1:
            problems.append(f"{path}.schedulerName: required when there are several profiles")
        elif name:
            if name in names:
                problems.append(
                    f"{path}.schedulerName: {name!r} duplicates profiles[{names[name]}]"
                )
            names.setdefault(name, index)
        _percentage(
            f"{path}.percentageOfNodesToScore", profile.get("percentageOfNodesToScore"), problems
        )
        _percentage(
            f"{path}.percentageOfPlacementsToScore",
            profile.get("percentageOfPlacementsToScore"),
            problems,
        )
        seen: set[str] = set()
        for j, entry in enumerate(profile.get("pluginConfig") or []):
            if entry is None:
                continue
            plugin = entry.get("name")
            if not plugin:
                problems.append(f"{path}.pluginConfig[{j}].name: required")
            elif plugin in seen:
                problems.append(f"{path}.pluginConfig[{j}].name: duplicate {plugin!r}")
            seen.add(plugin or "")
        for point in _EXTENSION_POINTS:
            plugin_set = (profile.get("plugins") or {}).get(point) or {}
            for kind in ("enabled", "disabled"):
                for j, plugin in enumerate(plugin_set.get(kind) or []):
                    if plugin is not None and not plugin.get("name"):
                        problems.append(f"{path}.plugins.{point}.{kind}[{j}].name: required")
    queue_sorts = [((p.get("plugins") or {}).get("queueSort") or {}) for p in profiles]
    for index, queue_sort in enumerate(queue_sorts[1:], start=1):
        if queue_sort != queue_sorts[0]:
            problems.append(
                f"profiles[{index}].plugins.queueSort: must be the same for all profiles"
            )


def _check_extenders(
    extenders: list[dict[str, Any]], problems: Problems, *, url_prefix: str, check_routes: bool
) -> None:
    binders: list[int] = []
    managed: dict[str, str] = {}
    for index, extender in enumerate(extenders):
        if extender is None:
            continue
        path = f"extenders[{index}]"
        _check_url_and_tls(path, extender, problems)
        if extender.get("prioritizeVerb") and (extender.get("weight") or 0) <= 0:
            problems.append(f"{path}.weight: must be > 0 when prioritizeVerb is set")
        if extender.get("bindVerb"):
            binders.append(index)
        if not any(extender.get(verb) for verb in SERVED_VERBS):
            problems.append(
                f"{path}: sets none of {', '.join(SERVED_VERBS)}; kube-scheduler would never call it"
            )
        timeout = extender.get("httpTimeout")
        if timeout and parse_go_duration(timeout) < 0:
            problems.append(f"{path}.httpTimeout: must not be negative")
        for j, resource in enumerate(extender.get("managedResources") or []):
            if resource is None:
                continue
            rpath = f"{path}.managedResources[{j}].name"
            name = resource.get("name") or ""
            for message in _extended_resource_problems(name):
                problems.append(f"{rpath}: {message}")
            if name in managed:
                problems.append(f"{rpath}: {name!r} is already managed by {managed[name]}")
            managed.setdefault(name, rpath)
            if resource.get("ignoredByScheduler") and extender.get("ignorable"):
                problems.append(
                    f"{path}.managedResources[{j}].ignoredByScheduler: with ignorable: true, "
                    f"nobody checks {name!r} while the extender is down (pods are placed "
                    "without it); set ignorable: false or ignoredByScheduler: false"
                )
        _check_device_resources(path, extender, problems)
        if check_routes:
            _check_routes(path, extender, problems, url_prefix)
    if len(binders) > 1:
        which = ", ".join(f"extenders[{i}]" for i in binders)
        problems.append(f"extenders: only one extender may set bindVerb ({which} do)")


def _check_device_resources(path: str, extender: dict[str, Any], problems: Problems) -> None:
    """Shared GPUs (docs/devices.md) work only with all three resources managed, ignored by
    kube-scheduler (it would count them as whole units), and bound by the extender."""
    entries = {r.get("name"): r for r in extender.get("managedResources") or [] if isinstance(r, dict)}
    managed = [name for name in RESOURCES if name in entries]
    if not managed:
        return
    missing = [name for name in RESOURCES if name not in entries]
    if missing:
        problems.append(f"{path}.managedResources: shared GPUs need all of {', '.join(RESOURCES)}; "
                        f"missing {', '.join(missing)}")
    counted = [name for name in managed if not entries[name].get("ignoredByScheduler")]
    if counted:
        problems.append(f"{path}.managedResources: set ignoredByScheduler: true for {', '.join(counted)} "
                        "(kube-scheduler would count the shares as whole units against node allocatable)")
    if not extender.get("bindVerb"):
        problems.append(f"{path}.bindVerb: required with shared GPUs: the extender writes the device "
                        "assignment at bind time; without it kube-scheduler binds GPU pods with none")


def _check_url_and_tls(path: str, extender: dict[str, Any], problems: Problems) -> None:
    url = extender.get("urlPrefix") or ""
    https = bool(extender.get("enableHTTPS"))
    tls = extender.get("tlsConfig") or {}
    if not url:
        problems.append(f"{path}.urlPrefix: required")
        return
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a bad port
    except ValueError as exc:
        problems.append(f"{path}.urlPrefix: {url!r} is not a URL ({exc})")
        return
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(
            f"{path}.urlPrefix: {url!r} must be http://HOST[:PORT][/PATH] or https://..."
        )
        return
    if parts.query or parts.fragment:
        problems.append(f"{path}.urlPrefix: must not have a query or fragment (verbs are appended)")
    del port
    if https and parts.scheme == "http":
        problems.append(
            f"{path}.enableHTTPS: true, but urlPrefix is http://; kube-scheduler would send plain HTTP"
        )
    if parts.scheme == "http" and tls:
        problems.append(f"{path}.tlsConfig: ignored for an http:// urlPrefix; use https://")
    has_ca = bool(tls.get("caFile") or tls.get("caData"))
    if tls.get("insecure") and has_ca:
        problems.append(
            f"{path}.tlsConfig.insecure: cannot be combined with caFile/caData (client-go refuses it)"
        )
    if https and not has_ca and not tls.get("insecure"):
        problems.append(
            f"{path}.tlsConfig.caFile: required with enableHTTPS; without caFile/caData "
            "kube-scheduler silently skips server certificate verification "
            "(set tlsConfig.insecure: true to accept that knowingly)"
        )
    has_cert = bool(tls.get("certFile") or tls.get("certData"))
    has_key = bool(tls.get("keyFile") or tls.get("keyData"))
    if has_cert != has_key:
        problems.append(f"{path}.tlsConfig: a client certificate and its key must be set together")


def _check_routes(path: str, extender: dict[str, Any], problems: Problems, url_prefix: str) -> None:
    """Each verb must reach one of our routes: kube-scheduler POSTs urlPrefix + "/" + verb."""
    try:
        base = urlsplit(extender.get("urlPrefix") or "").path.rstrip("/")
    except ValueError:
        return
    ours = "/" + url_prefix.strip("/") if url_prefix.strip("/") else ""
    for field, route in SERVED_VERBS.items():
        verb = extender.get(field)
        if not verb:
            continue
        sent = f"{base}/{verb}"
        expected = f"{ours}/{route}"
        if sent != expected:
            problems.append(
                f"{path}.{field}: {verb!r} makes kube-scheduler POST {sent}, "
                f"but the extender serves {route} at {expected}"
            )


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def _extended_resource_problems(name: str) -> list[str]:
    """Why `name` is not an extended resource name (IsQualifiedName + IsExtendedResourceName)."""
    if not name:
        return ["required"]
    prefix, _, short = name.rpartition("/")
    if name.count("/") > 1 or (prefix == "" and "/" in name):
        return [f"{name!r} is not a qualified name (DOMAIN/NAME)"]
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return [f"{name!r}: prefix {prefix!r} must be a DNS subdomain"]
    if len(short) > 63 or not _QUALIFIED_NAME.match(short):
        return [f"{name!r}: name part must be 1-63 alphanumerics, '-', '_' or '.'"]
    if not prefix or "kubernetes.io/" in name or name.startswith("requests."):
        return [
            f"{name!r} is not an extended resource name (use DOMAIN/NAME outside kubernetes.io)"
        ]
    return []
