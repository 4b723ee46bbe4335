"""Fixtures for the standalone scheduler: schedulers started on the shared ``api_client``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from extender.cluster.state import ClusterState
from extender.kube.binder import KubeBinder
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from extender.scheduler.profiles import Profile
from extender.scheduler.standalone import Scheduler
from tests.helpers import FAST_WATCH

SCHEDULER_NAME = "extender-scheduler"


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
