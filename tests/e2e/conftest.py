"""End-to-end fixtures: the real control plane of the session, kube-scheduler, our processes.

Every test here needs real binaries; without them (the fake API server) each is skipped,
saying how to get them. The control plane is the session's (tests.fakeapi.fixtures,
loaded by tests/conftest.py, starts it once when KUBEBUILDER_ASSETS is set) and is wiped before each test like for
any other API-server test; kube-scheduler, kube-controller-manager (for the DRA tests'
ResourceClaimTemplates) and the extender processes are started per test and stopped
after it, their logs shown when the test fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.controlplane import (
    KubeControllerManager,
    KubeScheduler,
    find_kube_controller_manager,
    start_kube_controller_manager,
    start_kube_scheduler,
)
from tests.e2e.processes import ExtenderProcess

NO_BINARIES = (
    "end-to-end: needs a real control plane with kube-scheduler; set KUBEBUILDER_ASSETS to a "
    "folder holding etcd, kube-apiserver and kube-scheduler (bash ../shared/tools/k8s-test-binaries.sh "
    "builds them and prints the export line)"
)
NO_CONTROLLER_MANAGER = (
    "needs kube-controller-manager (its resourceclaim-controller creates the ResourceClaims of "
    "ResourceClaimTemplates), which is missing: no executable {path} "
    "(bash ../shared/tools/k8s-test-binaries.sh builds it after kube-scheduler)"
)
FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[FAILED] = report.failed
    return report


@pytest.fixture
def cluster(apiserver: Any) -> Any:
    """The session's real API server, clean; skips (saying why) without the binaries."""
    if apiserver.fake is not None or apiserver.plane is None:
        pytest.skip(NO_BINARIES)
    if apiserver.plane.assets.kube_scheduler is None:
        pytest.skip(NO_BINARIES + " (kube-scheduler is missing there)")
    return apiserver


@pytest.fixture
def logs(request: pytest.FixtureRequest) -> Iterator[list[Callable[[], tuple[str, str]]]]:
    """Register log readers (name, text); their tails are printed when the test fails."""
    readers: list[Callable[[], tuple[str, str]]] = []
    yield readers
    if request.node.stash.get(FAILED, False):
        for read in readers:
            name, text = read()
            print(f"\n----- {name} (last 60 lines) -----\n" + "\n".join(text.splitlines()[-60:]))


@pytest.fixture
def extender(logs: list[Callable[[], tuple[str, str]]]) -> Iterator[Callable[[ExtenderProcess], ExtenderProcess]]:
    """Start ``extender serve``/``schedule`` processes (built by tests.e2e.processes); at the
    end each must stop on SIGTERM with exit code 0, as it would in a pod."""
    started: list[ExtenderProcess] = []

    def start(process: ExtenderProcess, timeout: float = 30.0) -> ExtenderProcess:
        started.append(process)
        logs.append(lambda: (" ".join(process.args[:1]), process.log()))
        return process.start(timeout)

    yield start
    codes = {" ".join(p.args[:1]): p.stop() for p in reversed(started)}
    assert all(code == 0 for code in codes.values()), f"exit codes after SIGTERM: {codes}"


@pytest.fixture
def kube_scheduler(
    cluster: Any, tmp_path: Path, logs: list[Callable[[], tuple[str, str]]], extender: Any
) -> Iterator[Callable[..., KubeScheduler]]:
    """Start kube-scheduler processes (as system:kube-scheduler) for this test. They stop
    before the extender processes (this fixture depends on ``extender``): a webhook whose
    caller is gone stops at once, while one with a caller holding an idle spare connection
    waits for gunicorn's graceful timeout (docs/reliability.md, "Known failures")."""
    started: list[KubeScheduler] = []

    def start(config: Mapping[str, Any], name: str = "kube-scheduler") -> KubeScheduler:
        scheduler = start_kube_scheduler(cluster.plane, config, name=name, workdir=tmp_path / "schedulers")
        started.append(scheduler)
        logs.append(lambda: (name, scheduler.log()))
        return scheduler

    yield start
    for scheduler in reversed(started):
        scheduler.stop()


@pytest.fixture
def kube_controller_manager(
    cluster: Any, tmp_path: Path, logs: list[Callable[[], tuple[str, str]]]
) -> Iterator[KubeControllerManager]:
    """kube-controller-manager with the resourceclaim-controller only, for this test; skips,
    naming the missing binary, when KUBEBUILDER_ASSETS has none."""
    binary = find_kube_controller_manager()
    if binary is None:
        path = os.environ.get("TEST_ASSET_KUBE_CONTROLLER_MANAGER") or \
            os.path.join(os.environ.get("KUBEBUILDER_ASSETS", "$KUBEBUILDER_ASSETS"), "kube-controller-manager")
        pytest.skip(NO_CONTROLLER_MANAGER.format(path=path))
    manager = start_kube_controller_manager(cluster.plane, binary=binary, workdir=tmp_path / "controller-manager")
    logs.append(lambda: (manager.name, manager.log()))
    yield manager
    manager.stop()


# ----------------------------------------------------------------------------- a real node
NO_NODE = "node: needs {lacks}"


@pytest.fixture(scope="session")
def node_cluster() -> Iterator[Any]:
    """A control plane with kube-controller-manager and one Ready node (tests.e2e.nodecluster),
    shared by the session's node tests; skips in one line naming what this machine lacks."""
    from tests.e2e.node import missing
    from tests.e2e.nodecluster import NodeCluster

    assets = os.environ.get("KUBEBUILDER_ASSETS")
    lacks = missing(Path(assets) if assets else None)
    if lacks:
        pytest.skip(NO_NODE.format(lacks="; ".join(lacks)))
    from tests.e2e.node import NodeBusy

    try:
        cluster = NodeCluster().start()
    except NodeBusy as exc:
        pytest.skip(f"node: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def node(node_cluster: Any, logs: list[Callable[[], tuple[str, str]]]) -> Any:
    """The session's node cluster, with its daemons' logs shown when the test fails."""
    for name in ("kubelet", "containerd", "kube-proxy", "kube-controller-manager", "kube-scheduler", "kube-apiserver"):
        logs.append(lambda name=name: (name, node_cluster.logs().get(name, "")))
    return node_cluster


@pytest.fixture(scope="module")
def chart_release(request: pytest.FixtureRequest, node_cluster: Any, product_image: Any) -> Iterator[Any]:
    """The chart installed on the node for one module, with the module's `CHART_VALUES` (extra
    helm arguments), uninstalled and its pods deleted at the end; skips without helm."""
    from tests.deploy.charts import helm_path
    from tests.e2e import chartnode

    if helm_path() is None:
        pytest.skip("node: needs helm (bash deploy/helm/install-helm.sh)")
    with chartnode.installed(node_cluster, *getattr(request.module, "CHART_VALUES", ())) as seconds:
        print(f"\nhelm install to every pod Ready: {seconds:.1f}s")
        yield node_cluster


@pytest.fixture(scope="session")
def product_image(node_cluster: Any) -> Any:
    """The product image (``make image``, cached by its sources) imported into the node."""
    from tests.e2e import images

    if shutil.which("buildah") is None:
        pytest.skip("node: needs buildah to build the product image (apt-get install buildah)")
    archive = images.product_image()
    node_cluster.import_images([archive])
    return archive
