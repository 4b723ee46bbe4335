"""The serving gate: watch events wait for the verb requests in flight (extender.cluster.gate)."""

from __future__ import annotations

import threading

import orjson

from extender.cluster.gate import ServingGate
from extender.cluster.state import ClusterState
from extender.kube.client import api_client_for
from extender.kube.source import KubeSource
from extender.kube.watching import Reflector


def test_an_idle_gate_does_not_wait() -> None:
    gate = ServingGate(max_wait=60)
    assert gate.wait_idle() and not gate.busy


def test_a_waiter_is_released_when_the_last_request_leaves() -> None:
    gate = ServingGate(max_wait=60)
    gate.enter()
    gate.enter()
    released: list[bool] = []
    waiter = threading.Thread(target=lambda: released.append(gate.wait_idle()))
    waiter.start()
    gate.leave()
    waiter.join(0.2)
    assert waiter.is_alive() and not released  # one request is still in flight
    gate.leave()
    waiter.join(10)
    assert released == [True] and not gate.busy


def test_a_gate_that_stays_busy_lets_the_waiter_go_after_max_wait() -> None:
    gate = ServingGate(max_wait=0.01)
    gate.enter()
    assert gate.wait_idle() is False  # never starved: the event is applied anyway


def test_the_reflector_applies_an_event_only_once_the_request_is_answered() -> None:
    gate = ServingGate(max_wait=60)
    seen: list[tuple[str, str]] = []
    reflector = Reflector(None, "/api/v1/pods", resource="pods", on_list=lambda items: None,  # type: ignore[arg-type]
                          on_event=lambda kind, obj: seen.append((kind, obj["metadata"]["name"])), yield_to=gate)
    line = orjson.dumps({"type": "MODIFIED", "object": {"metadata": {"name": "p", "resourceVersion": "7"}}})
    gate.enter()
    applier = threading.Thread(target=reflector._handle_line, args=(line,))
    applier.start()
    applier.join(0.2)
    assert applier.is_alive() and seen == []
    gate.leave()
    applier.join(10)
    assert seen == [("MODIFIED", "p")] and reflector.resource_version == "7"


def test_every_watch_of_the_cluster_state_yields_to_its_verbs() -> None:
    state = ClusterState()
    source = KubeSource(state, api_client_for("http://127.0.0.1:1"))
    reflectors = [source.nodes, source.pods, *source.kinds.values(), *source.storage]
    assert reflectors and all(reflector.yield_to is state.serving for reflector in reflectors)
