"""Fixtures for the usage package: node and pod dicts, a settable clock."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", allocatable_cpu: str | None = None,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A Ready node as the watch delivers it: capacity and allocatable (allocatable_cpu to differ)."""
    capacity = {"cpu": cpu, "memory": memory, "pods": "110"}
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {},
            "status": {"capacity": capacity, "allocatable": {**capacity, "cpu": allocatable_cpu or cpu},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, *, cpu: str | None = "500m", memory: str | None = "1Gi", node_name: str = "",
        phase: str = "Pending", uid: str | None = None) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"}, "spec": spec,
            "status": {"phase": phase}}
