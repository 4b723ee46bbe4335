"""A faithful local fake of kube-apiserver for tests, and a switch to a real one (envtest).

Start with :class:`FakeApiServer` directly or through the pytest fixtures in
:mod:`tests.fakeapi.fixtures`; drive it with :class:`KubeTestClient` so the same test
runs against envtest when ``KUBEBUILDER_ASSETS`` is set.
"""

from .authz import Attributes
from .client import KubeApiError, KubeTestClient
from .fixtures import ApiServerHandle, fake_only, requires_fake, skip_unless_fake
from .server import FAKE_TOKEN, FakeApiServer

__all__ = [
    "FAKE_TOKEN",
    "ApiServerHandle",
    "Attributes",
    "FakeApiServer",
    "KubeApiError",
    "KubeTestClient",
    "fake_only",
    "requires_fake",
    "skip_unless_fake",
]
