"""simulate and explain with node usage from the snapshot: NodeMetrics or annotations, recent placements."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from extender.cli.explain_command import explain
from extender.cli.simulate import simulate as simulate_command
from extender.cluster.snapshot import read_snapshot
from extender.policy.loading import load_policy, load_policy_file
from extender.simulation import simulating
from extender.usage import offline

from .conftest import FIXTURES

LOAD = FIXTURES / "load.yaml"
LOAD_POLICY = FIXTURES / "load-policy.yaml"


def test_simulate_counts_each_placement_on_top_of_the_snapshot_sample():
    result = simulating.simulate(read_snapshot(LOAD), load_policy_file(LOAD_POLICY))
    # TargetLoadPacking predicts 750m per pod; a at 10%, b at 20% of 4 cores, target 40%:
    # b (38.75% -> 98), then b is past the target and a wins twice, and so on.
    assert [p.node for p in result.placements] == ["b", "a", "a", "b", "a", "b"]
    assert result.notes == ("node usage: 2/2 node(s) with a fresh sample from the snapshot's NodeMetrics "
                            "(dropped: 1 unknown-node)",)
    measured = {n.node: n.measured for n in result.nodes}
    assert measured["a"] == "cpu 48%, memory 34%, incl. 3 pod(s) placed since; 2s old"
    assert all(not n.notes for n in result.nodes)  # notes say why pods may not go there: nothing here
    assert simulating.to_json(result)["nodes"][0]["measured"] == measured[result.nodes[0].node]


def test_without_recent_placements_the_burst_would_pile_onto_one_node(monkeypatch: pytest.MonkeyPatch):
    """The control for the test above: the same run, placements not counted."""
    monkeypatch.setattr(simulating, "snapshot_usage", partial(offline.snapshot_usage, count_placements=False))
    result = simulating.simulate(read_snapshot(LOAD), load_policy_file(LOAD_POLICY))
    assert [p.node for p in result.placements] == ["b"] * 6


def test_simulate_compares_a_load_aware_policy_with_a_request_based_one():
    requests_only = load_policy("apiVersion: extender/v1alpha1\nkind: Policy\nscores: [{name: MostAllocated}]\n")
    comparison = simulating.compare(read_snapshot(LOAD), [load_policy_file(LOAD_POLICY), requests_only])
    assert len({p.node for p in comparison.results[1].placements}) == 1  # packed by requests: one node
    assert comparison.differences
    assert comparison.results[1].notes == ()  # no load plugin: no usage read


def test_explain_shows_usage_age_and_score_parts(tmp_path: Path):
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                                   "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]}}))
    result = CliRunner().invoke(explain, [str(pod), "--snapshot", str(LOAD), "--policy", str(LOAD_POLICY),
                                          "-o", "json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    rows = {row["node"]: row for row in body["nodes"]}
    assert rows["a"]["usage"] == "cpu 10%, memory 25%; 2s old"
    assert rows["b"]["usage"] == "cpu 20%, memory 25%; 0s old"
    assert rows["a"]["scoreParts"]["TargetLoadPacking"] == \
        "cpu (0.40 measured + 1.00 pod) / 4.00 cores = 35.0%, up to target 40% -> 93"
    assert body["best"] == ["a"]
    assert any(note.startswith("node usage: 2/2 node(s)") for note in body["notes"])
    table = CliRunner().invoke(explain, [str(pod), "--snapshot", str(LOAD), "--policy", str(LOAD_POLICY)])
    assert "Usage:" in table.output and "  b: TargetLoadPacking: cpu (0.80 measured" in table.output


def test_annotations_snapshot_with_a_stale_node(tmp_path: Path):
    nodes = []
    for name, value in (("fresh", "95,2025-05-01T10:00:00Z"), ("old", "95,2025-05-01T09:00:00Z"),
                        ("quiet", "20,2025-05-01T09:59:30Z")):
        nodes.append({"kind": "Node", "metadata": {"name": name, "annotations": {"cpu_usage_avg_5m": value}},
                      "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                                 "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                                 "conditions": [{"type": "Ready", "status": "True"}]}})
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(yaml.safe_dump_all(nodes))
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: extender/v1alpha1\nkind: Policy\nfilters: [{name: NodeLoad, args: {cpu: 80}}]\n"
                      "settings: {usage: {source: annotations, interval: 1m}}\n")
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump({"kind": "Pod", "metadata": {"name": "web"}, "spec": {"containers": [{"name": "c"}]}}))
    result = CliRunner().invoke(explain, [str(pod), "--snapshot", str(snapshot), "--policy", str(policy), "-o", "json"])
    assert result.exit_code == 0, result.output
    rows = {row["node"]: row for row in json.loads(result.output)["nodes"]}
    assert rows["fresh"]["verdict"] == "unresolvable"
    assert rows["fresh"]["reason"] == "node(s) had cpu usage above the load threshold"
    assert rows["fresh"]["detail"] == "cpu usage 95% of 4.00 cores (3.80 measured 0s ago), threshold 80%"
    # an hour older than the newest sample, over the 3-minute limit: not refused, and said so
    assert rows["old"]["verdict"] == "feasible"
    assert rows["old"]["usage"] == "cpu 95%; stale: 3600s old, over the 180s limit"
    assert rows["quiet"]["usage"] == "cpu 20%; 30s old"


def test_simulate_cli_prints_the_usage_notes():
    result = CliRunner().invoke(simulate_command, [str(LOAD), "--policy", str(LOAD_POLICY)])
    assert result.exit_code == 0, result.output
    assert "Note: node usage: 2/2 node(s) with a fresh sample from the snapshot's NodeMetrics" in result.output
    assert "MEASURED" in result.output and "cpu 48%, memory 34%, incl. 3 pod(s) placed since" in result.output
