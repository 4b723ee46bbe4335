"""A workload's own scheduler configuration (``schedulerConfigPath``), for both schedulers.

Some workloads run kube-scheduler with a KubeSchedulerConfiguration of their own (the
ExtendedResourceScoring one scores `example.com/gpu` beside cpu and memory). kube-scheduler
gets that profile's ``pluginConfig`` as written; ours gets the built-in standalone policy
(config/policy.yaml) with the same change made in our plugins' terms. Only what has such a
translation is accepted: NodeResourcesFit's ``scoringStrategy`` of type LeastAllocated or
MostAllocated with its ``resources`` (our LeastAllocated or MostAllocated scorer with those
weights). Anything else makes the workload "skipped" with the reason, never run half-translated.

A workload may also run kube-scheduler with a feature gate that adds a plugin to its default
profile (NodeDeclaredFeatures); ours then gets the same filter added (:func:`with_filters`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

POLICY = Path(__file__).resolve().parents[2] / "config" / "policy.yaml"
STRATEGIES = {"LeastAllocated": "LeastAllocated", "MostAllocated": "MostAllocated"}
ALLOCATION_SCORERS = frozenset(STRATEGIES.values())


class Untranslatable(ValueError):
    """The configuration asks for something our policy cannot say the same way."""


def _profile(config: Mapping[str, Any]) -> Mapping[str, Any]:
    profiles = config.get("profiles") or []
    if len(profiles) != 1:
        raise Untranslatable(f"{len(profiles)} profiles (one is translated)")
    profile = profiles[0]
    extra = sorted(set(profile) - {"schedulerName", "pluginConfig"})
    if extra:
        raise Untranslatable(f"profile fields {', '.join(extra)} have no translation")
    return profile


def _scoring(plugin_config: Any) -> tuple[str, dict[str, int]]:
    """(our scorer, its resource weights) from NodeResourcesFit's args."""
    if plugin_config.get("name") != "NodeResourcesFit":
        raise Untranslatable(f"pluginConfig of {plugin_config.get('name')} has no translation")
    args = plugin_config.get("args") or {}
    extra = sorted(set(args) - {"scoringStrategy"})
    if extra:
        raise Untranslatable(f"NodeResourcesFit args {', '.join(extra)} have no translation")
    strategy = args.get("scoringStrategy") or {}
    kind = strategy.get("type", "LeastAllocated")
    if kind not in STRATEGIES or set(strategy) - {"type", "resources"}:
        raise Untranslatable(f"NodeResourcesFit scoringStrategy {kind} has no translation")
    weights = {r["name"]: int(r.get("weight", 1)) for r in strategy.get("resources") or []}
    return STRATEGIES[kind], weights or {"cpu": 1, "memory": 1}


def translate(config: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(kube-scheduler's pluginConfig, our policy) for ``config``; Untranslatable says why not."""
    profile = _profile(config)
    plugin_config = [dict(entry) for entry in profile.get("pluginConfig") or []]
    policy = yaml.safe_load(POLICY.read_text())
    for entry in plugin_config:
        scorer, weights = _scoring(entry)
        kept = [s for s in policy["scores"] if s["name"] not in ALLOCATION_SCORERS]
        at = next(i for i, s in enumerate(policy["scores"]) if s["name"] in ALLOCATION_SCORERS)
        kept.insert(at, {"name": scorer, "weight": 1, "args": {"resources": weights}})
        policy["scores"] = kept
    return plugin_config, policy


def load(path: Path) -> dict[str, Any]:
    """A workload's scheduler configuration file."""
    loaded = yaml.safe_load(path.read_text())
    if not isinstance(loaded, dict):
        raise Untranslatable(f"{path.name} is not a KubeSchedulerConfiguration")
    return loaded


def standalone() -> dict[str, Any]:
    """Our built-in standalone policy as a document (config/policy.yaml, which loads to it)."""
    loaded: dict[str, Any] = yaml.safe_load(POLICY.read_text())
    return loaded


def with_filters(policy: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """``policy`` with the filters ``names`` added (those it lacks) where a gate puts them in
    kube-scheduler's profile: its applyFeatureGates appends them to the default plugins and
    DynamicResources is inserted before DefaultPreemption, so they filter after DynamicResources
    (before NodeLabels, which kube-scheduler does not have). Order changes only which refusal a
    node reports first, not whether it passes."""
    filters = [dict(f) for f in policy.get("filters") or []]
    present = {f["name"] for f in filters}
    at = next((i + 1 for i, f in enumerate(filters) if f["name"] == "DynamicResources"), len(filters))
    added = [{"name": name} for name in names if name not in present]
    return {**policy, "filters": [*filters[:at], *added, *filters[at:]]}
