"""Fixtures for the API-server adapters: KubeSources started on the shared ``api_client``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from extender.cluster.state import ClusterState
from extender.kube.source import KubeSource
from tests.helpers import FAST_WATCH


@pytest.fixture
def make_source(api_client: Any) -> Iterator[Callable[..., KubeSource]]:
    """Build (and at teardown stop) KubeSources on `api_client`; options override FAST_WATCH."""
    sources: list[KubeSource] = []

    def make(state: ClusterState | None = None, *, start: bool = True, client: Any = None,
             **options: Any) -> KubeSource:
        source = KubeSource(state or ClusterState(), client or api_client,
                            housekeeping_interval=options.pop("housekeeping_interval", 0.05),
                            **{**FAST_WATCH, **options})
        sources.append(source)
        if start:
            source.start()
        return source

    yield make
    for source in sources:
        source.stop()
