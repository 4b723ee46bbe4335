"""Fixtures for the usage package: an ApiClient on the shared `apiserver`, node dicts, a settable clock.

``pytest_plugins`` is only allowed in the top-level conftest; the fake API server plugin is
registered here only when it is not loaded yet, so this directory also runs on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from extender.kube.client import build_api_client

PLUGIN = "tests.fakeapi.fixtures"


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin(PLUGIN):
        config.pluginmanager.import_plugin(PLUGIN)


class Clock:
    """Wall-clock seconds that only move when a test says so."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def api_client(apiserver: Any) -> Iterator[Any]:
    """An ApiClient built the production way: from the server's kubeconfig file."""
    client = build_api_client(kubeconfig=str(apiserver.kubeconfig))
    yield client
    client.close()


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
