"""Fixtures for the cluster adapters: an ApiClient on the shared `apiserver` and started sources.

``pytest_plugins`` is only allowed in the top-level conftest, which may already load
``tests.fakeapi.fixtures``; here the plugin is registered only when it is not loaded yet,
so this directory also runs on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from extender.cluster.state import ClusterState
from extender.kube.client import build_api_client
from extender.kube.source import KubeSource

PLUGIN = "tests.fakeapi.fixtures"

# Reflector settings that keep fault tests fast: backoff 50 ms doubling to 0.5 s.
FAST = {"initial_backoff": 0.05, "max_backoff": 0.5, "min_healthy_stream": 0.2}


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin(PLUGIN):
        config.pluginmanager.import_plugin(PLUGIN)


@pytest.fixture
def api_client(apiserver: Any) -> Iterator[Any]:
    """An ApiClient built the production way: from the server's kubeconfig file."""
    client = build_api_client(kubeconfig=str(apiserver.kubeconfig))
    yield client
    client.close()


@pytest.fixture
def make_source(api_client: Any) -> Iterator[Callable[..., KubeSource]]:
    """Build (and at teardown stop) KubeSources on `api_client`; options override FAST."""
    sources: list[KubeSource] = []

    def make(state: ClusterState | None = None, *, start: bool = True, client: Any = None,
             **options: Any) -> KubeSource:
        source = KubeSource(state or ClusterState(), client or api_client,
                            housekeeping_interval=options.pop("housekeeping_interval", 0.05),
                            **{**FAST, **options})
        sources.append(source)
        if start:
            source.start()
        return source

    yield make
    for source in sources:
        source.stop()
