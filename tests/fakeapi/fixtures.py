"""pytest fixtures: one ``apiserver`` for every test, fake by default, real under envtest.

Load with ``pytest_plugins = ["tests.fakeapi.fixtures"]`` in a conftest. The server is
started once per session and wiped before each test (``reset``), which keeps the suite
fast while no test sees another's objects, faults or permission rules. Tests that need
the fake's controls (faults, restarts, history) say why with ``@fake_only(why)``,
``@pytest.mark.requires_fake(why)`` or ``skip_unless_fake(server, why)``, and are skipped
with that reason when running against a real kube-apiserver.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .client import KubeTestClient
from .envtest import EnvtestControlPlane, find_assets
from .server import FAKE_TOKEN, FakeApiServer


def fake_only(why: str) -> pytest.MarkDecorator:
    """Skip under envtest, saying why this test cannot run on a real kube-apiserver (what it
    injects that a real server does not produce on demand, and where the real-server
    counterpart is tested, if anywhere). A plain skipif: the choice of server is fixed by
    the environment."""
    return pytest.mark.skipif(find_assets() is not None, reason=f"real kube-apiserver: {why}")


@dataclass
class ApiServerHandle:
    """What a test gets: where the server is and how to talk to it."""

    url: str
    kubeconfig: Path
    client: KubeTestClient
    is_fake: bool
    fake: FakeApiServer | None
    token: str
    #: The CA to verify the server with (None for the fake, which serves plain HTTP).
    ca_file: Path | None = None
    #: The real control plane (None on the fake): its processes, etcd, user kubeconfigs.
    plane: EnvtestControlPlane | None = None

    @property
    def verify(self) -> bool | str:
        """What to pass as ``requests``' ``verify=`` for this server."""
        return str(self.ca_file) if self.ca_file else True

    def reset(self) -> None:
        """Remove everything the previous test created."""
        if self.fake is not None:
            self.fake.reset()
        else:
            self.client.delete_all()


def skip_unless_fake(server: ApiServerHandle, why: str) -> FakeApiServer:
    """The fake behind ``server``, or skip the test saying ``why`` it needs the fake."""
    if server.fake is None:
        pytest.skip(f"real kube-apiserver: {why}")
    return server.fake


def pytest_configure(config: pytest.Config) -> None:
    # The marker form, ``@pytest.mark.requires_fake("why")``, is honoured by the ``apiserver``
    # fixture; the reason is shown when the test is skipped under envtest.
    config.addinivalue_line(
        "markers", "requires_fake(why): needs the fake API server (skipped under envtest, saying why)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that uses the switchable server is an ``apiserver`` test, marked or not, so
    ``pytest -m apiserver`` selects exactly what runs against envtest."""
    for item in items:
        if "apiserver_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.apiserver)


@contextmanager
def running_fake(directory: Path, **options: Any) -> Iterator[ApiServerHandle]:
    """A started FakeApiServer (``options`` as its constructor's) with a kubeconfig in
    ``directory``; closed, with its test client, on the way out."""
    fake = FakeApiServer(**options).start()
    kubeconfig = fake.write_kubeconfig(directory / "kubeconfig")
    client = KubeTestClient(fake.url, token=FAKE_TOKEN)
    try:
        yield ApiServerHandle(fake.url, kubeconfig, client, True, fake, FAKE_TOKEN)
    finally:
        client.close()
        fake.close()


@pytest.fixture(scope="session")
def apiserver_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerHandle]:
    """The session's server: envtest when KUBEBUILDER_ASSETS has the binaries, else the fake."""
    assets = find_assets()
    if assets is None:
        with running_fake(tmp_path_factory.mktemp("fakeapi")) as handle:
            yield handle
        return
    with running_envtest(assets) as handle:
        yield handle


@contextmanager
def running_envtest(assets: Any, extra_apiserver_args: tuple[str, ...] = ()) -> Iterator[ApiServerHandle]:
    """A real etcd + kube-apiserver of its own (with these extra flags), stopped after."""
    plane = EnvtestControlPlane(assets, extra_apiserver_args=extra_apiserver_args).start()
    try:
        handle = start_envtest_handle(plane)
        yield handle
        handle.client.close()
    finally:
        plane.stop()


def start_envtest_handle(plane: EnvtestControlPlane) -> ApiServerHandle:
    """The handle of a started real control plane: its kubeconfig and a client trusting its CA."""
    client = KubeTestClient(plane.url, token=plane.token, verify=str(plane.ca_file))
    return ApiServerHandle(
        plane.url, plane.kubeconfig, client, False, None, plane.token, plane.ca_file, plane
    )


@pytest.fixture
def apiserver(
    apiserver_session: ApiServerHandle, request: pytest.FixtureRequest
) -> ApiServerHandle:
    """A clean server for this test (objects, faults and rules of earlier tests removed)."""
    marker = request.node.get_closest_marker("requires_fake")
    if marker and not marker.args:
        pytest.fail("@pytest.mark.requires_fake needs the reason as its argument", pytrace=False)
    if marker and not apiserver_session.is_fake:
        pytest.skip(f"real kube-apiserver: {marker.args[0]}")
    apiserver_session.reset()
    return apiserver_session


@pytest.fixture
def fake_apiserver(tmp_path: Path) -> Iterator[ApiServerHandle]:
    """A private fake for this test only, even under envtest (for stop/restart scenarios that
    would disturb the shared server)."""
    with running_fake(tmp_path) as handle:
        yield handle


@pytest.fixture
def kube(apiserver: ApiServerHandle) -> KubeTestClient:
    """The test client of the clean ``apiserver``."""
    return apiserver.client
