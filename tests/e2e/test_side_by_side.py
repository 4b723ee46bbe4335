"""kube-scheduler and our standalone scheduler on the same scenarios (scenarios.py).

Each scenario's nodes are created once; kube-scheduler (default profile, its own
schedulerName) and then `extender schedule` (the built-in standalone policy, its own
schedulerName) each place their own copy of the pods, in a namespace of their own; both
must reach the outcome the scenario states: the same pods bound, the same pods pending,
bound pods only on the nodes allowed, no node over its allocatable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import processes, sidebyside
from tests.e2e.controlplane import scheduler_configuration
from tests.e2e.scenarios import SCENARIOS, Scenario

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

KUBE_SCHEDULER = "e2e-kube-scheduler"
STANDALONE = "e2e-standalone"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_same_pods_bound_and_pending(cluster: Any, kube_scheduler: Any, extender: Any,
                                     tmp_path: Path, scenario: Scenario) -> None:
    kube = cluster.client
    sidebyside.create_nodes(kube, scenario)

    @contextlib.contextmanager
    def kube_scheduler_running() -> Iterator[Any]:
        process = kube_scheduler(scheduler_configuration(KUBE_SCHEDULER), name=f"kube-scheduler-{scenario.name}")
        try:
            yield process
        finally:
            process.stop()

    @contextlib.contextmanager
    def standalone_running() -> Iterator[Any]:
        process = extender(processes.schedule(
            cluster.kubeconfig, tmp_path, scheduler_name=STANDALONE, name=f"schedule-{scenario.name}",
            extra=["--no-leader-elect", "--log-level", "INFO"],
        ))
        try:
            yield process
        finally:
            assert process.stop() == 0, "extender schedule did not stop cleanly on SIGTERM"

    outcomes = [
        sidebyside.run(kube, scenario, scheduler="kube-scheduler", scheduler_name=KUBE_SCHEDULER,
                       namespace="e2e-kube-scheduler", start=kube_scheduler_running),
        sidebyside.run(kube, scenario, scheduler="standalone", scheduler_name=STANDALONE,
                       namespace="e2e-standalone", start=standalone_running),
    ]
    labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in kube.list_nodes()}
    problems = sidebyside.compare(scenario, outcomes, labels)
    assert not problems, "\n".join([scenario.why, *problems, *(o.summary() for o in outcomes)])
