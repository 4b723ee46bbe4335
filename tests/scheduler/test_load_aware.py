"""The standalone scheduler with load-aware plugins, against the API server's metrics.k8s.io.

Values need the fake's NodeMetrics (a real kube-apiserver has no metrics-server: those
tests skip there, saying so); the "no metrics-server" test runs on both and checks the
scheduler keeps placing pods on requests alone.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from extender.policy.engine import Engine
from extender.policy.loading import load_policy
from extender.scheduler.profiles import Profile
from tests.fakeapi import skip_unless_fake
from tests.scheduler.conftest import SCHEDULER_NAME
from tests.scheduler.test_scheduling import events_for, node_of, wait_bound

NODE_METRICS = (
    "serves NodeMetrics from the fake's metrics.k8s.io; a real control plane here has no "
    "metrics-server (the scheduler without one runs on both)"
)

pytestmark = pytest.mark.apiserver

POLICY = """
apiVersion: extender/v1alpha1
kind: Policy
filters: [{name: ResourceFit}, {name: NodeLoad, args: {cpu: 80}}]
scores: [{name: TargetLoadPacking, args: {targetUtilization: 40}}]
"""


def load_profile() -> Profile:
    return Profile.from_engine(SCHEDULER_NAME, Engine(load_policy(POLICY, source="load.yaml")))


def test_hot_node_refused_and_a_burst_split_by_recent_placements(apiserver: Any, kube: Any, make_scheduler: Any):
    fake = skip_unless_fake(apiserver, NODE_METRICS)
    for name in ("a", "b", "hot"):
        kube.create_node(name, cpu="4", memory="8Gi")
    fake.serve_node_metrics()
    fake.set_node_metrics("a", cpu="400m", memory="1Gi")  # 10%
    fake.set_node_metrics("b", cpu="800m", memory="1Gi")  # 20%
    fake.set_node_metrics("hot", cpu="3600m", memory="1Gi")  # 90%: over NodeLoad's 80%
    scheduler = make_scheduler([load_profile()])
    kube.wait_for(lambda: scheduler.usage.store is not None and scheduler.usage.store.fresh_count() == 3,
                  timeout=10, message="three usage samples")
    ok, detail = scheduler.readiness()
    assert ok and "usage metrics-server up, 3 node(s) fresh" in detail
    for i in range(6):
        kube.create_pod(f"p{i}", cpu="500m", scheduler_name=SCHEDULER_NAME)
    placed = Counter(wait_bound(kube, f"p{i}") for i in range(6))
    # TargetLoadPacking predicts each pod at 750m (500m request x 1.5). Without counting the pods
    # placed since the sample, all six would land on b (38.75% -> 98 every time); with them, b goes
    # over the 40% target after one pod and the burst alternates: b, a, a, b, a, b.
    assert placed == {"a": 3, "b": 3}, placed


def test_without_metrics_server_pods_are_placed_on_requests_alone(apiserver: Any, kube: Any,
                                                                  make_scheduler: Any):
    """Runs on envtest too: a real API server without metrics-server answers 404."""
    kube.create_node("only", cpu="4", memory="8Gi")
    if apiserver.fake is not None:
        apiserver.fake.serve_node_metrics("absent")
    scheduler = make_scheduler([load_profile()])
    kube.wait_for(lambda: scheduler.usage.store is not None and scheduler.usage.store.state == "down",
                  timeout=10, message="the usage source to be reported down")
    ok, detail = scheduler.readiness()
    assert ok and "usage metrics-server down" in detail and "is metrics-server installed?" in detail
    kube.create_pod("web", cpu="500m", scheduler_name=SCHEDULER_NAME)
    assert wait_bound(kube, "web") == "only"


def test_a_hot_node_is_reported_with_its_figure(apiserver: Any, kube: Any, make_scheduler: Any):
    fake = skip_unless_fake(apiserver, NODE_METRICS)
    kube.create_node("hot", cpu="2", memory="8Gi")
    fake.serve_node_metrics()
    fake.set_node_metrics("hot", cpu="1900m", memory="1Gi")
    scheduler = make_scheduler([load_profile()])
    kube.wait_for(lambda: scheduler.usage.store is not None and scheduler.usage.store.fresh_count() == 1,
                  timeout=10, message="a usage sample")
    kube.create_pod("web", cpu="100m", scheduler_name=SCHEDULER_NAME)
    failed = kube.wait_for(lambda: events_for(kube, "web", "FailedScheduling"), timeout=10,
                           message="FailedScheduling event")
    assert "0/1 nodes are available: 1 node(s) had cpu usage above the load threshold." in failed[0]["message"]
    assert node_of(kube, "web") == ""
