"""What "survived a fault" means, for the fake and for a real control plane alike.

A `Harness` is a real standalone `Scheduler` (cluster watches, pending-pod watch, binder,
reporter) on some API server, and the pods it was given. After a fault, `finish` waits
until the scheduler's cluster state holds exactly what the server holds (nodes, pods,
assignments, no assumption left over), then checks the invariants: no pod bound twice,
every pending pod of ours bound or reported with FailedScheduling, no node over its CPU.
The figure (how long convergence took, what was injected) goes to the summary.

Counting binds differs: the fake counts accepted Bindings itself; a real server refuses a
second bind anyway (409), so there each pod must have exactly one Scheduled event.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from extender.kube.client import build_api_client
from extender.model.quantities import to_units
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from extender.scheduler.profiles import Profile
from extender.scheduler.standalone import Scheduler
from tests.helpers import FAST_WATCH
from tests.reliability.figures import FIGURES

CONVERGE_TIMEOUT = 20.0
SCHEDULER_NAME = "extender-scheduler"
NODE_CPU = "2"
POD_CPU = "500m"


def bound_more_than_once(kube: Any, fake: Any = None) -> set[str]:
    """Pods bound twice: the fake's count of accepted Bindings, else Scheduled events per pod."""
    if fake is not None:
        return {b["name"] for b in fake.bindings if fake.binding_count(b["namespace"], b["name"]) > 1}
    counts = Counter(e["involvedObject"]["name"] for e in kube.list_events("default", reason="Scheduled"))
    return {name for name, count in counts.items() if count > 1}


@dataclass
class Harness:
    kube: Any
    scheduler: Scheduler
    fake: Any = None  # the FakeApiServer, or None on a real control plane
    server: str = "fake"  # for the summary: "fake" or "real"
    names: Iterator[int] = field(default_factory=itertools.count)
    ours: list[str] = field(default_factory=list)

    def create_pods(self, count: int, cpu: str = POD_CPU) -> list[str]:
        created = []
        for _ in range(count):
            name = f"p{next(self.names)}"
            self.kube.create_pod(name, cpu=cpu, scheduler_name=SCHEDULER_NAME)
            self.ours.append(name)
            created.append(name)
        return created

    def churn(self) -> None:
        """Cluster changes while (or right after) the fault: new pods, one too big, a deletion, a new node."""
        self.create_pods(3)
        self.create_pods(1, cpu="64")  # fits nowhere: must get a FailedScheduling event
        victim = self.ours[0]
        self.kube.delete_pod(victim, grace_period_seconds=0)
        self.ours.remove(victim)
        self.kube.create_node(f"n{next(self.names)}", cpu=NODE_CPU)
        self.kube.create_pod("theirs", cpu="100m")  # another scheduler's pod: ours must leave it alone


@contextlib.contextmanager
def running_harness(kubeconfig: str, kube: Any, *, fake: Any = None, server: str = "fake",
                    watch_options: dict[str, Any] | None = None) -> Iterator[Harness]:
    """Three nodes, a standalone Scheduler built from ``kubeconfig``, and a first batch of
    four pods placed; the scheduler is stopped on exit."""
    for i in range(3):
        kube.create_node(f"node-{i}", cpu=NODE_CPU)
    api_client = build_api_client(kubeconfig=kubeconfig)
    profile = Profile.from_engine(SCHEDULER_NAME, Engine(default_policy("standalone")))
    scheduler = Scheduler(api_client, [profile], watch_options={**FAST_WATCH, **(watch_options or {})})
    scheduler.start()
    try:
        assert scheduler.wait_ready(10), "scheduler caches did not sync"
        h = Harness(kube, scheduler, fake=fake, server=server)
        h.create_pods(4)
        settle(h, "the first batch")
        yield h
    finally:
        scheduler.stop(timeout=10)
        api_client.close()


# ---- what "survived" means ----------------------------------------------------------------


def server_snapshot(kube: Any) -> tuple[set[str], dict[str, str]]:
    nodes = {n["metadata"]["name"] for n in kube.list_nodes()}
    pods = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": (p.get("spec") or {}).get("nodeName") or ""
        for p in kube.list_pods()
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    }
    return nodes, pods


def state_snapshot(scheduler: Scheduler) -> tuple[set[str], dict[str, str]]:
    state = scheduler.state
    nodes = {info.name for info in state.all_node_infos()}
    pods = {key: record.node_name for key, record in list(state._pods.items())}
    return nodes, pods


def differences(h: Harness) -> list[str]:
    """Why the scheduler has not converged on the server's truth yet (empty: it has)."""
    problems = []
    server_nodes, server_pods = server_snapshot(h.kube)
    nodes, pods = state_snapshot(h.scheduler)
    if nodes != server_nodes:
        problems.append(f"nodes: state {sorted(nodes)} != server {sorted(server_nodes)}")
    if set(pods) != set(server_pods):
        problems.append(f"pod keys: missing {sorted(set(server_pods) - set(pods))}, "
                        f"extra {sorted(set(pods) - set(server_pods))}")
    wrong = {k: (pods[k], v) for k, v in server_pods.items() if k in pods and pods[k] != v}
    if wrong:
        problems.append(f"assignments (state, server): {wrong}")
    if h.scheduler.state.assumed_keys():
        problems.append(f"assumed pods left: {h.scheduler.state.assumed_keys()}")
    for name in h.ours:
        node = server_pods.get(f"default/{name}", "")
        if not node and not h.kube.list_events("default", reason="FailedScheduling", involved_name=name):
            problems.append(f"pod {name} neither bound nor reported FailedScheduling")
    return problems


def settle(h: Harness, what: str, timeout: float = CONVERGE_TIMEOUT) -> float:
    """Wait until the scheduler agrees with the server; returns how long it took."""
    started = time.monotonic()
    deadline = started + timeout
    problems = differences(h)
    while problems and time.monotonic() < deadline:
        time.sleep(0.2)
        problems = differences(h)
    if problems:
        versions = ", ".join(f"{r.resource} at {r.resource_version or '-'} (lists {r.lists}, restarts {r.restarts})"
                             for r in reflectors(h.scheduler))
        server_rv = h.kube.call("GET", "/api/v1/namespaces")["metadata"]["resourceVersion"]
        problems.append(f"reflectors: {versions}; server at resourceVersion {server_rv}")
    assert not problems, f"no convergence after {what} within {timeout:.0f} s:\n" + "\n".join(problems)
    return time.monotonic() - started


def invariants(h: Harness) -> None:
    """No pod bound twice; no node over its CPU."""
    twice = bound_more_than_once(h.kube, h.fake)
    assert not twice, f"bound more than once: {sorted(twice)}"
    allocatable = {n["metadata"]["name"]: to_units("cpu", n["status"]["allocatable"]["cpu"])
                   for n in h.kube.list_nodes()}
    used: dict[str, int] = {}
    for pod in h.kube.list_pods():
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            for container in pod["spec"]["containers"]:
                cpu = ((container.get("resources") or {}).get("requests") or {}).get("cpu", "0")
                used[node] = used.get(node, 0) + to_units("cpu", cpu)
    over = {n: (u, allocatable.get(n)) for n, u in used.items() if n in allocatable and u > allocatable[n]}
    assert not over, f"overcommitted nodes (used, allocatable millicores): {over}"


def finish(h: Harness, name: str, injected: int | Callable[[], int], detail: Callable[[], str] = lambda: "",
           timeout: float = CONVERGE_TIMEOUT) -> None:
    """Converge, check the invariants, record the figure (a failure is recorded before it is raised).

    `injected` and `detail` may be callables, read once the scenario has settled.
    """
    count = injected if isinstance(injected, int) else None
    try:
        took = settle(h, name, timeout)
        invariants(h)
    except AssertionError as exc:
        FIGURES.fault(name, count if count is not None else injected(), False,  # type: ignore[operator]
                      " ".join(str(exc).split("\n")[:2])[:300], server=h.server)
        raise
    extra = detail()
    FIGURES.fault(name, count if count is not None else injected(), True,  # type: ignore[operator]
                  f"converged {took:.1f} s after the fault" + (f"; {extra}" if extra else ""), server=h.server)


def reflectors(scheduler: Scheduler) -> list[Any]:
    """The scheduler's list+watch loops: cluster nodes, cluster pods, and each profile's pending pods."""
    return [scheduler.source.nodes, scheduler.source.pods] + [w.reflector for w in scheduler.pending]


def restarts(scheduler: Scheduler, cause: str) -> int:
    return sum(r.restarts.get(cause, 0) for r in reflectors(scheduler))


def lists(scheduler: Scheduler) -> int:
    return scheduler.source.nodes.lists + scheduler.source.pods.lists
