"""A faithful local fake of kube-apiserver for tests, and a switch to a real one (envtest).

Start with :class:`FakeApiServer` directly or through the pytest fixtures in
:mod:`tests.fakeapi.fixtures`; drive it with :class:`KubeTestClient` so the same test
runs against envtest when ``KUBEBUILDER_ASSETS`` is set. The fixture helpers are imported
lazily, so that tools using only the servers and the client (tests/e2e/controlplane.py,
benchmarks) do not import pytest.
"""

from typing import Any

from .authz import Attributes
from .client import KubeApiError, KubeTestClient
from .server import FAKE_TOKEN, FakeApiServer

_FROM_FIXTURES = ("ApiServerHandle", "fake_only", "skip_unless_fake")

__all__ = [
    "FAKE_TOKEN",
    "ApiServerHandle",
    "Attributes",
    "FakeApiServer",
    "KubeApiError",
    "KubeTestClient",
    "fake_only",
    "skip_unless_fake",
]


def __getattr__(name: str) -> Any:
    if name in _FROM_FIXTURES:
        from . import fixtures

        return getattr(fixtures, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
