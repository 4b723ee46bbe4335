"""Run a scenario (scenarios.py) under one scheduler and read what it did.

For each scheduler in turn: the scenario's nodes already exist; the scheduler is started
(so its first list already holds every node with its status, and no early decision is
made on a half-built cluster); the pods are created in a namespace of that scheduler's
own, with its schedulerName; then we wait until every pod is decided (bound, gated, or
PodScheduled=False/Unschedulable). The cluster does not change afterwards, so a decided
pod stays decided: that is the settled state compared between schedulers. The pods are
then deleted (gracePeriodSeconds 0: nothing runs them) and the scheduler is stopped, so
the next one starts on the same empty nodes.

No pytest here: a benchmark or a script can run scenarios the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from extender.model.quantities import to_units
from tests.e2e import processes
from tests.e2e.controlplane import scheduler_configuration
from tests.e2e.scenarios import Scenario
from tests.fakeapi.client import KubeApiError, KubeTestClient
from tests.storage_controllers import bind, collection_path, create_storage

SETTLE_TIMEOUT = 30.0
GATED = "gated"
DELETED = "deleted"


@dataclass
class Outcome:
    """What one scheduler did with a scenario's pods."""

    scheduler: str
    bound: dict[str, str] = field(default_factory=dict)  # pod -> node
    pending: dict[str, str] = field(default_factory=dict)  # pod -> "gated" or the condition's message
    deleted: set[str] = field(default_factory=set)  # pods gone (preempted)

    def summary(self) -> str:
        bound = ", ".join(f"{p}->{n}" for p, n in sorted(self.bound.items())) or "-"
        pending = "; ".join(f"{p}: {m}" for p, m in sorted(self.pending.items())) or "-"
        deleted = ", ".join(sorted(self.deleted)) or "-"
        return f"{self.scheduler}: bound {bound}; pending {pending}; deleted {deleted}"


@contextlib.contextmanager
def kube_scheduler_running(start: Callable[..., Any], scheduler_name: str, name: str) -> Iterator[Any]:
    """kube-scheduler (the e2e `kube_scheduler` fixture's `start`) with a default profile named
    `scheduler_name`, for one run."""
    process = start(scheduler_configuration(scheduler_name), name=name)
    try:
        yield process
    finally:
        process.stop()


@contextlib.contextmanager
def standalone_running(start: Callable[..., Any], kubeconfig: Any, workdir: Any, scheduler_name: str,
                       name: str) -> Iterator[Any]:
    """`extender schedule` (through the e2e `extender` fixture's `start`) for one run; it must
    stop cleanly on SIGTERM."""
    process = start(processes.schedule(kubeconfig, workdir, scheduler_name=scheduler_name, name=name,
                                       extra=["--no-leader-elect", "--log-level", "INFO"]))
    try:
        yield process
    finally:
        assert process.stop() == 0, "extender schedule did not stop cleanly on SIGTERM"


def create_nodes(kube: KubeTestClient, scenario: Scenario) -> None:
    for spec in scenario.nodes:
        spec = dict(spec)
        kube.create_node(spec.pop("name"), **spec)


def _decision(pod: Mapping[str, Any] | None, transient: Sequence[str] = ()) -> tuple[str, str] | None:
    """("bound", node) | ("pending", why) | ("deleted", "") once the scheduler has decided, else None.
    A pending pod whose message holds one of ``transient`` is not decided yet: the scheduler
    retries it by itself (kube-scheduler, once a controller has created the pod's claim)."""
    if pod is None:
        return DELETED, ""  # created, then gone: a preemption's victim
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("nodeName"):
        return "bound", spec["nodeName"]
    if spec.get("schedulingGates"):
        return "pending", GATED
    if status.get("nominatedNodeName"):
        return None  # a preemption is under way: it will be bound once its victims are gone
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" \
                and condition.get("reason") == "Unschedulable":
            message = condition.get("message") or ""
            return None if any(t in message for t in transient) else ("pending", message)
    return None


def run(
    kube: KubeTestClient,
    scenario: Scenario,
    *,
    scheduler: str,
    scheduler_name: str,
    namespace: str,
    start: Callable[[], AbstractContextManager[Any]],
    timeout: float = SETTLE_TIMEOUT,
    transient: Sequence[str] = (),
    inspect: Callable[[Outcome], None] | None = None,
) -> Outcome:
    """Run ``scenario``'s pods under one scheduler (``start`` is its context manager: the
    scheduler runs inside it); the nodes must exist already. Returns the settled outcome.
    ``transient``: pending messages that are not a decision yet (see ``_decision``);
    ``inspect`` is called with the outcome before the pods are deleted, to read more of the
    settled state (the DRA tests read the claims, which lose their allocation with the pods)."""
    kube.ensure_namespace(namespace)
    for name, value in scenario.priority_classes.items():
        value, policy = value if isinstance(value, tuple) else (value, None)
        kube.ensure_priority_class(name, value, preemption_policy=policy)
    names = [spec["name"] for spec in scenario.pods]
    created = _create_storage(kube, scenario, namespace)
    with start():
        try:
            for spec in scenario.pods:
                spec = dict(spec)
                kube.create_pod(spec.pop("name"), namespace, scheduler_name=scheduler_name, **spec)

            def settled() -> dict[str, tuple[str, str]] | None:
                pods = {p["metadata"]["name"]: p for p in kube.list_pods(namespace)}
                decisions = {name: _decision(pods.get(name), transient) for name in names}
                if all(decisions.values()):
                    return decisions  # type: ignore[return-value]
                return None

            try:
                decisions = kube.wait_for(settled, timeout=timeout, interval=0.2,
                                          message=f"{scheduler} to decide on every pod")
            except AssertionError:
                pods = {p["metadata"]["name"]: _decision(p, transient) for p in kube.list_pods(namespace)}
                raise AssertionError(f"{scheduler} did not settle within {timeout:.0f} s: {pods}") from None
            outcome = Outcome(scheduler)
            for name, (verdict, detail) in decisions.items():
                if verdict == DELETED:
                    outcome.deleted.add(name)
                else:
                    (outcome.bound if verdict == "bound" else outcome.pending)[name] = detail
            check_capacity(kube, namespace, scheduler)
            if inspect is not None:
                inspect(outcome)
            return outcome
        finally:
            for name in names:
                if kube.get_pod(name, namespace) is not None:
                    kube.delete_pod(name, namespace, grace_period_seconds=0)
            _delete_storage(kube, created)


# ---- storage ----------------------------------------------------------------------------------


def _create_storage(kube: KubeTestClient, scenario: Scenario, namespace: str) -> list[dict[str, Any]]:
    """The scenario's storage for this run; objects that exist already are left alone, and
    what this run created is deleted afterwards (the server is shared with other tests)."""
    if scenario.storage is None:
        return []
    objects, bindings = scenario.storage(namespace)
    created = []
    for obj in objects:
        try:
            created += create_storage(kube, obj)
        except KubeApiError as err:
            if err.reason != "AlreadyExists":
                raise
    for claim_name, volume in bindings:
        bind(kube, claim_name, volume, namespace)
    return created


def _delete_storage(kube: KubeTestClient, created: list[dict[str, Any]]) -> None:
    for obj in reversed(created):
        meta = obj["metadata"]
        path = f"{collection_path(obj)}/{meta['name']}"
        kube.request("PATCH", path, {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")
        kube.request("DELETE", path)


# ---- invariants -------------------------------------------------------------------------------


def effective_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """kube-scheduler's pod request (units of extender.model.quantities): the larger of the
    containers' sum and each init container's need, sidecars (restartable init containers)
    counted with both; plus one pod."""
    spec = pod.get("spec") or {}

    def requests(container: Mapping[str, Any]) -> dict[str, int]:
        wanted = (container.get("resources") or {}).get("requests") or {}
        return {name: to_units(name, value) for name, value in wanted.items()}

    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for init in spec.get("initContainers") or []:
        need = requests(init)
        if init.get("restartPolicy") == "Always":
            _add(sidecars, need)
        else:
            for name, value in need.items():
                init_peak[name] = max(init_peak.get(name, 0), sidecars.get(name, 0) + value)
    total = dict(sidecars)
    for main in spec.get("containers") or []:
        _add(total, requests(main))
    for name, value in init_peak.items():
        total[name] = max(total.get(name, 0), value)
    total["pods"] = 1
    return total


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def check_capacity(kube: KubeTestClient, namespace: str, scheduler: str) -> None:
    """No node holds more than its allocatable of any resource (pods included)."""
    allocatable = {
        n["metadata"]["name"]: {k: to_units(k, v) for k, v in (n["status"].get("allocatable") or {}).items()}
        for n in kube.list_nodes()
    }
    used: dict[str, dict[str, int]] = {}
    for pod in kube.list_pods(namespace):
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            # Extended resources served through DRA (pod.status.extendedResourceClaimStatus) come
            # from the pod's claim, not from the node's allocatable.
            mappings = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("requestMappings")
            by_claim = {m.get("resourceName") for m in mappings or ()}
            _add(used.setdefault(node, {}), {r: v for r, v in effective_requests(pod).items() if r not in by_claim})
    over = {
        node: {r: (v, allocatable.get(node, {}).get(r, 0)) for r, v in usage.items()
               if v > allocatable.get(node, {}).get(r, 0)}
        for node, usage in used.items()
    }
    over = {node: found for node, found in over.items() if found}
    assert not over, f"{scheduler} overcommitted (used, allocatable): {over}"


def compare(scenario: Scenario, outcomes: Iterable[Outcome],
            node_labels: Mapping[str, Mapping[str, str]] | None = None) -> list[str]:
    """Every way the outcomes miss the scenario's expectation (so also differ from each
    other); empty when all schedulers did what the scenario says."""
    problems = []
    expected_pending = {p["name"] for p in scenario.pods} - scenario.bound - scenario.deleted
    for outcome in outcomes:
        if outcome.deleted != set(scenario.deleted):
            problems.append(f"{outcome.scheduler} deleted {sorted(outcome.deleted)}, "
                            f"expected {sorted(scenario.deleted)}")
        for check in scenario.checks:
            problems += [f"{outcome.scheduler}: {p}" for p in check(outcome.bound, node_labels or {})]
        if set(outcome.bound) != scenario.bound:
            problems.append(
                f"{outcome.scheduler} bound {sorted(outcome.bound)}, expected {sorted(scenario.bound)}"
            )
        if set(outcome.pending) != expected_pending:
            problems.append(
                f"{outcome.scheduler} left {sorted(outcome.pending)} pending, expected {sorted(expected_pending)}"
            )
        for name, allowed in scenario.placements.items():
            if name in outcome.bound and outcome.bound[name] not in allowed:
                problems.append(f"{outcome.scheduler} put {name} on {outcome.bound[name]}, "
                                f"allowed {sorted(allowed)}")
    return problems
