"""The small per-pod record the cluster state keeps, instead of whole pod objects.

A 150,000-pod cluster must fit in a few hundred MB, so the state keeps only what
accounting and /bind checks read. Request dicts are interned (see model.resources).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.model.fields import as_object, object_name
from extender.model.pods import TERMINAL_PHASES, PodView
from extender.model.resources import Resources, pod_requests


@dataclass(frozen=True, slots=True)
class PodRecord:
    key: str  # namespace/name
    uid: str
    node_name: str
    scheduler_name: str
    phase: str
    deleting: bool
    gated: bool
    requests: Resources
    score_requests: Resources
    assumed: bool = False
    # The full view, kept only while the pod waits for a node: /bind re-runs the filters with it.
    view: PodView | None = None

    @property
    def namespace(self) -> str:
        return self.key.partition("/")[0]

    @property
    def name(self) -> str:
        return self.key.partition("/")[2]

    @property
    def counts(self) -> bool:
        """Whether the pod occupies resources on its node (bound or assumed, not finished)."""
        return bool(self.node_name) and self.phase not in TERMINAL_PHASES


def record_from_dict(raw: Mapping[str, Any]) -> PodRecord:
    """Build a record from a v1.Pod dict; raises InvalidObject/QuantityError on bad fields."""
    meta = as_object(raw.get("metadata"), "metadata")
    spec = as_object(raw.get("spec"), "spec")
    status = as_object(raw.get("status"), "status")
    name = object_name(meta)
    phase = str(status.get("phase") or "Pending")
    view = None
    if not spec.get("nodeName") and phase not in TERMINAL_PHASES:
        view = PodView.from_dict(raw)
        requests, score_requests = view.requests, view.score_requests
    else:
        requests, score_requests = pod_requests(spec), pod_requests(spec, nonzero_defaults=True)
    return PodRecord(
        key=f"{meta.get('namespace') or 'default'}/{name}",
        uid=str(meta.get("uid") or ""),
        # Interned: 150,000 pods share a few thousand node names, a few scheduler names and phases.
        node_name=sys.intern(str(spec.get("nodeName") or "")),
        scheduler_name=sys.intern(str(spec.get("schedulerName") or "default-scheduler")),
        phase=sys.intern(phase),
        deleting=bool(meta.get("deletionTimestamp")),
        gated=bool(spec.get("schedulingGates")),
        requests=requests,
        score_requests=score_requests,
        view=view,
    )
