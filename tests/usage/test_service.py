"""The usage service in both modes: off without load plugins, following policy reloads, in /readyz."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.cluster.state import ClusterState
from extender.model.usage_samples import EMPTY_USAGE
from extender.policy.defaults import default_policy
from extender.policy.loading import load_policy
from extender.policy.reloading import FixedPolicy, PolicyHolder
from extender.settings import Settings
from extender.usage.service import UsageService
from extender.webhook import create_app
from extender.webhook.runtime import build_runtime
from tests.helpers import wait_for

from .conftest import node, pod

HEADER = "apiVersion: extender/v1alpha1\nkind: Policy\n"
LOAD_POLICY = HEADER + """
scores: [{name: TargetLoadPacking}]
settings:
  usage: {source: annotations, interval: %s}
"""


def usage_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("usage-")]


@pytest.fixture
def state() -> ClusterState:
    state = ClusterState()
    state.replace_nodes([node("idle", annotations={"cpu_usage_avg_5m": "10"}),
                         node("hot", annotations={"cpu_usage_avg_5m": "90"})])
    state.replace_pods([])
    return state


def test_nothing_runs_without_a_load_plugin(state: ClusterState):
    service = UsageService(state, None, [FixedPolicy(default_policy("webhook"))])
    before = usage_threads()
    service.start()
    assert service.store is None and usage_threads() == before
    assert service.status() == {"source": "", "state": "off"}
    assert state.node_usage() is EMPTY_USAGE
    service.stop()


def test_the_loop_follows_policy_reloads(tmp_path: Path, state: ClusterState):
    path = tmp_path / "policy.yaml"
    path.write_text(LOAD_POLICY % "1s")
    holder = PolicyHolder(path)
    service = UsageService(state, None, [holder])
    service.start()
    try:
        wait_for(lambda: state.node_usage().fresh("hot"), 10, "the first annotation sample")
        first = service.store
        assert state.node_usage().fresh("hot").cpu == pytest.approx(3600)
        assert service.status()["state"] == "up" and service.status()["nodes"] == 2
        path.write_text(LOAD_POLICY % "2s")
        assert holder.maybe_reload() == "success"
        assert service.settings is not None and service.settings.interval == 2.0
        assert service.store is not first  # a new loop with the new settings
        path.write_text(HEADER + "scores: [{name: LeastAllocated}]\n")
        assert holder.maybe_reload() == "success"
        assert service.store is None and state.node_usage() is EMPTY_USAGE
        wait_for(lambda: not usage_threads(), 10, "the usage thread to end")
        assert state._pod_hooks == (state.devices.pod_changed,)  # the usage hook is gone; device use stays
        path.write_text(HEADER + "scores: [{name: LoadVariationRiskBalancing}]\nsettings: {usage: {interval: 0}}\n")
        assert holder.maybe_reload() == "failure"  # a bad block never reaches the loop
        assert service.store is None
    finally:
        service.stop()


def test_several_profiles_share_the_first_ones_source(state: ClusterState, caplog: pytest.LogCaptureFixture):
    first = FixedPolicy(load_policy(LOAD_POLICY % "5s", source="first.yaml"))
    second = FixedPolicy(load_policy(LOAD_POLICY % "9s", source="second.yaml"))
    plain = FixedPolicy(default_policy("standalone"))
    service = UsageService(state, None, [plain, first, second])
    with caplog.at_level(logging.WARNING):
        service.start()
    try:
        assert service.settings is not None and service.settings.interval == 5.0
        assert "policy second.yaml has its own settings.usage" in caplog.text
    finally:
        service.stop()


# ---- the webhook ------------------------------------------------------------------------


def write_snapshot(path: Path) -> Path:
    nodes = [node("idle", annotations={"cpu_usage_avg_5m": "10"}), node("hot", annotations={"cpu_usage_avg_5m": "90"})]
    pending = {"kind": "Pod", **pod("burst-0", cpu="1", memory="1Gi")}
    path.write_text(yaml.safe_dump_all([*({"kind": "Node", **n} for n in nodes), pending]))
    return path


def webhook(tmp_path: Path, policy: str) -> tuple[Any, Any]:
    (tmp_path / "policy.yaml").write_text(policy)
    settings = Settings(source="snapshot", snapshot=str(write_snapshot(tmp_path / "cluster.yaml")),
                        policy=str(tmp_path / "policy.yaml"))
    runtime = build_runtime(settings)
    return runtime, create_app(settings, runtime=runtime).test_client()


def test_webhook_scores_by_usage_and_shows_the_source_in_readyz(tmp_path: Path):
    runtime, client = webhook(tmp_path, LOAD_POLICY % "1s")
    try:
        wait_for(lambda: client.get("/readyz").json["usage"].get("nodes") == 2, 10, "two fresh samples")
        usage = client.get("/readyz").json["usage"]
        assert usage["source"] == "annotations" and usage["state"] == "up"
        assert usage["newestSampleAgeSeconds"] >= 0
        body = {"Pod": pod("web", cpu="100m"), "NodeNames": ["hot", "idle"]}
        reply = client.post("/prioritize", json=body)
        assert reply.status_code == 200
        scores = {entry["Host"]: entry["Score"] for entry in reply.json}
        # idle: 10% + pod 150m/4000 -> 13.75% -> 61 -> wire 6; hot: 93.75% -> 4 -> wire 0
        assert scores == {"idle": 6, "hot": 0}
        # a bind through /bind counts on top of the sample at once (kube-scheduler's next pod sees it)
        bind = {"PodName": "burst-0", "PodNamespace": "default", "PodUID": "uid-burst-0", "Node": "idle"}
        assert client.post("/bind", json=bind).json == {"Error": ""}
        sample = runtime.state.node_usage().fresh("idle")
        assert (sample.recent_pods, sample.recent_cpu) == (1, 1000)
        scores = {e["Host"]: e["Score"] for e in client.post("/prioritize", json=body).json}
        assert scores["idle"] == 10  # 10% + 1 core placed + 150m: 38.75% -> 98, closer to the 40% target
    finally:
        runtime.stop()


def test_webhook_without_its_source_stays_ready_and_says_why(tmp_path: Path):
    runtime, client = webhook(tmp_path, HEADER + "filters: [{name: NodeLoad, args: {cpu: 50}}]\n")
    try:
        wait_for(lambda: client.get("/readyz").json["usage"]["state"] == "down", 10, "the source to be down")
        reply = client.get("/readyz")
        assert reply.status_code == 200 and reply.json["ready"] is True
        assert reply.json["usage"]["source"] == "metrics-server"
        assert "needs an API server" in reply.json["usage"]["detail"]
        # no data: NodeLoad refuses nothing, the filter still answers
        body = {"Pod": pod("web", cpu="100m"), "NodeNames": ["hot", "idle"]}
        assert client.post("/filter", json=body).json["NodeNames"] == ["hot", "idle"]
    finally:
        runtime.stop()
