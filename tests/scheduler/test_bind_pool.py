"""The bind pool without an API server: what each kind of bind failure does to the pod."""

from __future__ import annotations

from typing import Any

import pytest

from extender import metrics
from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.state import ClusterState
from extender.errors import ClusterError, ConflictError, NotFoundError
from extender.model.pods import PodView
from extender.scheduler.bind_pool import BindPool, conflict_reason
from extender.scheduler.queueing import ACTIVE, BACKOFF, SchedulingQueue
from extender.scheduler.reporting import Reporter

PROFILE = "extender-scheduler"


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"schedulerName": PROFILE,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


class RaisingBinder:
    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    def bind(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1
        raise self.error


class Setup:
    def __init__(self, binder: Any = None, may_bind: bool = True) -> None:
        self.state = ClusterState()
        self.state.replace_nodes([node("n1")])
        self.state.replace_pods([pod("p"), pod("waiting")])
        self.queue = SchedulingQueue(publish_metrics=False)
        self.binder = binder or MemoryBinder(self.state)
        self.pool = BindPool(self.binder, self.state, self.queue, Reporter(None), workers=2,
                             may_bind=lambda: may_bind)
        view = PodView.from_dict(pod("p"))
        self.queue.add(view, PROFILE)
        self.entry = self.queue.pop(timeout=0)
        assert self.entry is not None
        # Another pod waits for space: a forgotten assumption should wake it.
        self.queue.add(PodView.from_dict(pod("waiting")), PROFILE)
        waiting = self.queue.pop(timeout=0)
        assert waiting is not None
        self.queue.requeue_unschedulable(waiting)
        self.state.assume("default/p", "n1", uid="uid-p", view=view)

    def bind(self) -> None:
        self.pool.submit(self.entry, "n1", 0.0)
        assert self.pool.drain(5)
        self.pool.shutdown(1)


def errors(reason: str) -> float:
    return metrics.BIND_ERRORS.labels(reason=reason)._value.get()  # type: ignore[no-any-return]


def test_successful_bind_leaves_the_queue() -> None:
    setup = Setup()
    setup.bind()
    assert setup.binder.bindings == [("default/p", "n1")]
    assert "default/p" not in setup.queue
    record = setup.state.pod("default/p")
    assert record is not None and record.node_name == "n1" and not record.assumed
    assert setup.queue.where("default/waiting") == "unschedulable"  # nothing was freed


def test_vanished_node_is_not_bound_to() -> None:
    setup = Setup()
    before = errors("node-unavailable")
    setup.state.delete_node("n1")
    setup.bind()
    assert setup.binder.bindings == []
    assert setup.queue.where("default/p") == BACKOFF
    assert setup.state.assumed_keys() == []
    assert errors("node-unavailable") == before + 1


def test_a_pod_bound_already_stays_counted_where_it_is_bound() -> None:
    """Another process bound it (a previous leader's bind taken late): until the watch shows it,
    its room on that node must stay taken, or the next pod is bound over it."""
    for where in ("n1", "n2"):
        setup = Setup(RaisingBinder(ConflictError(f"pod default/p is already assigned to node {where}", status=409)))
        setup.state.replace_nodes([node("n1"), node("n2")])
        setup.bind()
        assert "default/p" not in setup.queue
        record = setup.state.pod("default/p")
        assert record is not None and record.node_name == where and record.assumed
        assert setup.queue.where("default/waiting") == "unschedulable"  # nothing was freed
        # The watch shows it bound there: counted for good.
        setup.state.upsert_pod({**pod("p"), "spec": {**pod("p")["spec"], "nodeName": where}})
        assert setup.state.assumed_keys() == []
        record = setup.state.pod("default/p")
        assert record is not None and record.node_name == where and not record.assumed


@pytest.mark.parametrize(("error", "reason", "dropped"), [
    (ConflictError("pod default/p is already bound", status=409), "already-bound", True),
    (ConflictError("pod default/p was recreated (UID mismatch)", status=409), "recreated", True),
    (ConflictError("pod default/p is being deleted", status=409), "deleting", True),
    (ConflictError("pod default/p still has scheduling gates", status=409), "gated", True),
    (NotFoundError("pod default/p not found", status=404), "not-found", True),
    (ConflictError("pod default/p cannot be bound: something new", status=409), "conflict", False),
    (ClusterError("binding failed: 500 InternalError", status=500), "500", False),
    (ClusterError("binding failed: 429 TooManyRequests", status=429), "429", False),
    (ClusterError("cannot reach the API server"), "unreachable", False),
])
def test_bind_failures(error: ClusterError, reason: str, dropped: bool) -> None:
    setup = Setup(RaisingBinder(error))
    before = errors(reason)
    setup.bind()
    assert setup.binder.calls == 1
    assert errors(reason) == before + 1
    assert setup.state.assumed_keys() == []
    record = setup.state.pod("default/p")
    assert record is not None and record.node_name == ""
    if dropped:
        assert "default/p" not in setup.queue
    else:
        assert setup.queue.where("default/p") == BACKOFF
    # The space the assumption held is free again: the waiting pod gets another try.
    assert setup.queue.where("default/waiting") in (ACTIVE, BACKOFF)


def test_conflict_reasons_match_the_memory_binder_too() -> None:
    state = ClusterState()
    state.replace_nodes([node("n1")])
    state.replace_pods([pod("p")])
    binder = MemoryBinder(state)
    binder.bind("default", "p", "uid-p", "n1")
    with pytest.raises(ConflictError) as again:
        binder.bind("default", "p", "uid-p", "n1")
    assert conflict_reason(again.value) == "already-bound"
    with pytest.raises(ConflictError) as recreated:
        binder.bind("default", "p", "other-uid", "n1")
    assert conflict_reason(recreated.value) == "recreated"


def test_no_bind_without_leadership() -> None:
    setup = Setup(may_bind=False)
    setup.bind()
    assert setup.binder.bindings == []
    assert setup.queue.where("default/p") == ACTIVE
    assert setup.entry.attempts == 0  # handed back untried
    assert setup.state.assumed_keys() == []
