"""Fixtures for the standalone scheduler: an ApiClient on the shared `apiserver` and started schedulers.

``pytest_plugins`` is only allowed in the top-level conftest, which may already load
``tests.fakeapi.fixtures``; here the plugin is registered only when it is not loaded yet,
so this directory also runs on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from extender.cluster.state import ClusterState
from extender.kube.binding import KubeBinder
from extender.kube.client import build_api_client
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from extender.scheduler.profiles import Profile
from extender.scheduler.scheduler import Scheduler

PLUGIN = "tests.fakeapi.fixtures"

# Reflector settings that keep tests fast: reconnect backoff 50 ms doubling to 0.5 s.
FAST_WATCH = {"initial_backoff": 0.05, "max_backoff": 0.5, "min_healthy_stream": 0.2}
SCHEDULER_NAME = "extender-scheduler"


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin(PLUGIN):
        config.pluginmanager.import_plugin(PLUGIN)


class RecordingBinder(KubeBinder):
    """The production binder, recording what the scheduler sent, so that tests can count bind
    attempts on either server (the fake's request log exists only on the fake).

    ``hold`` names pods whose bind waits until :meth:`release` (or 10 s): the test can then
    change the pod meanwhile and produce a real conflict, with no server-side fault needed.
    """

    def __init__(self, api_client: Any, state: ClusterState, hold: Iterable[str] = ()) -> None:
        super().__init__(api_client, state)
        self.attempts: list[str] = []
        self.bound: list[str] = []
        self.held = {name: threading.Event() for name in hold}
        self.waiting = {name: threading.Event() for name in hold}
        self._lock = threading.Lock()

    def bind(self, namespace: str, name: str, uid: str, node: str, **kwargs: Any) -> None:
        with self._lock:
            self.attempts.append(f"{namespace}/{name}")
        if name in self.held:
            self.waiting[name].set()
            self.held[name].wait(10)
        super().bind(namespace, name, uid, node, **kwargs)
        with self._lock:
            self.bound.append(f"{namespace}/{name}")

    def release(self, name: str) -> None:
        self.held[name].set()

    def attempts_for(self, name: str, namespace: str = "default") -> int:
        with self._lock:
            return self.attempts.count(f"{namespace}/{name}")


def standalone_profile(name: str = SCHEDULER_NAME) -> Profile:
    return Profile.from_engine(name, Engine(default_policy("standalone")))


@pytest.fixture
def api_client(apiserver: Any) -> Iterator[Any]:
    """An ApiClient built the production way: from the server's kubeconfig file."""
    client = build_api_client(kubeconfig=str(apiserver.kubeconfig))
    yield client
    client.close()


@pytest.fixture
def make_scheduler(api_client: Any) -> Iterator[Callable[..., Scheduler]]:
    """Build, start and (at teardown) stop Schedulers; waits until each has its caches."""
    made: list[Scheduler] = []

    def make(profiles: list[Profile] | None = None, *, client: Any = None, start: bool = True,
             **options: Any) -> Scheduler:
        options.setdefault("watch_options", FAST_WATCH)
        state = options.setdefault("state", ClusterState())
        options.setdefault("binder", RecordingBinder(client or api_client, state))
        scheduler = Scheduler(client or api_client, profiles or [standalone_profile()], **options)
        made.append(scheduler)
        if start:
            scheduler.start()
            assert scheduler.wait_ready(10), "scheduler caches did not sync"
        return scheduler

    yield make
    for scheduler in made:
        scheduler.stop(timeout=5)
