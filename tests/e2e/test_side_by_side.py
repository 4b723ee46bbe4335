"""kube-scheduler and our standalone scheduler on the same scenarios (scenarios.py).

Each scenario's nodes are created once; kube-scheduler (default profile, its own
schedulerName) and then `extender schedule` (the built-in standalone policy, its own
schedulerName) each place their own copy of the pods, in a namespace of their own; both
must reach the outcome the scenario states: the same pods bound, the same pods pending,
bound pods only on the nodes allowed, no node over its allocatable.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import sidebyside
from tests.e2e.scenarios import SCENARIOS, Scenario

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

KUBE_SCHEDULER = "e2e-kube-scheduler"
STANDALONE = "e2e-standalone"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_same_pods_bound_and_pending(cluster: Any, kube_scheduler: Any, extender: Any,
                                     tmp_path: Path, scenario: Scenario) -> None:
    kube = cluster.client
    sidebyside.create_nodes(kube, scenario)

    kube_run = partial(sidebyside.kube_scheduler_running, kube_scheduler, KUBE_SCHEDULER,
                       f"kube-scheduler-{scenario.name}")
    standalone_run = partial(sidebyside.standalone_running, extender, cluster.kubeconfig, tmp_path, STANDALONE,
                             f"schedule-{scenario.name}")

    outcomes = [
        sidebyside.run(kube, scenario, scheduler="kube-scheduler", scheduler_name=KUBE_SCHEDULER,
                       namespace="e2e-kube-scheduler", start=kube_run),
        sidebyside.run(kube, scenario, scheduler="standalone", scheduler_name=STANDALONE,
                       namespace="e2e-standalone", start=standalone_run),
    ]
    labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in kube.list_nodes()}
    problems = sidebyside.compare(scenario, outcomes, labels)
    assert not problems, "\n".join([scenario.why, *problems, *(o.summary() for o in outcomes)])
