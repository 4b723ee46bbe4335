"""`extender explain` and `extender simulate` through click, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from extender.cli.explain_command import explain
from extender.cli.simulate import simulate
from tests.explain.conftest import EXTRA, LEAST, MOST, SMALL
from tests.helpers import SNAPSHOT


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_explain_a_snapshot_pod_as_json(runner: CliRunner) -> None:
    result = runner.invoke(explain, ["default/huge", "-o", "json"])  # the embedded snapshot by default
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["pod"] == "default/huge" and body["best"] == []
    assert [(n["node"], n["plugin"], n["reason"]) for n in body["nodes"]][:3] == [
        ("node-1", "ResourceFit", "Insufficient cpu"), ("node-2", "ResourceFit", "Insufficient cpu"),
        ("node-3", "ResourceFit", "Insufficient cpu"),
    ]


def test_explain_table_by_bare_name(runner: CliRunner) -> None:
    result = runner.invoke(explain, ["huge", "--snapshot", str(SNAPSHOT)])  # namespace default
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Pod default/huge")
    assert "node-1: ResourceFit: Insufficient cpu (requested 12, free 2400m)" in result.output


def test_explain_a_bound_pod_leaves_its_own_requests_out(runner: CliRunner) -> None:
    result = runner.invoke(explain, ["default/web-6d4b9c7f5-abcde", "-o", "json"])
    body = json.loads(result.output)
    assert body["notes"] == ["default/web-6d4b9c7f5-abcde is on node-1 now; explained as if it were pending "
                             "(its own requests are not counted there)"]
    # Without itself node-1 holds only coredns (100m): it now beats node-2 (1500m used);
    # node-3, empty, still comes first.
    assert [n["node"] for n in body["nodes"][:3]] == ["node-3", "node-1", "node-2"]


def test_explain_pods_from_a_file_with_a_policy(runner: CliRunner, tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "one"},
         "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two", "namespace": "x"},
         "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]}},
    ]))
    result = runner.invoke(explain, [str(pods), "--snapshot", str(SMALL), "--policy", str(MOST), "-o", "json"])
    assert result.exit_code == 0, result.output
    items = json.loads(result.output)["items"]
    assert [i["pod"] for i in items] == ["default/one", "x/two"]
    # one (1 cpu, 1Gi) bin-packs onto a: (3000/4000 -> 75, 5/8 -> 62) = 68.
    assert items[0]["best"] == ["a"] and items[0]["nodes"][0]["total"] == 68
    assert items[1]["best"] == ["b"]  # only b has 3 cpu free
    assert items[0]["scorers"] == [{"plugin": "MostAllocated", "weight": 1}]


def test_explain_with_the_webhook_default(runner: CliRunner) -> None:
    body = json.loads(runner.invoke(explain, ["default/huge", "--mode", "webhook", "-o", "json"]).output)
    # The webhook policy leaves resources to kube-scheduler: only NodeReady refuses (node-4, node-5).
    assert body["scorers"] == [] and sorted(body["best"]) == ["gpu-1", "node-1", "node-2", "node-3"]


@pytest.mark.parametrize(("args", "message"), [
    (["nope/missing"], "pod nope/missing is not in the snapshot"),
    (["a/b/c"], "is neither a pod file nor NAMESPACE/NAME"),
    (["default/huge", "--snapshot", str(SNAPSHOT), "--context", "x"], "--snapshot and --kubeconfig/--context"),
])
def test_explain_usage_errors(runner: CliRunner, args: list[str], message: str) -> None:
    result = runner.invoke(explain, args)
    assert result.exit_code in (1, 2) and message in result.output


def test_explain_against_a_live_cluster(runner: CliRunner, fake_apiserver) -> None:
    kube = fake_apiserver.client
    kube.create_node("n1", cpu="2", memory="4Gi")
    kube.create_node("n2", cpu="2", memory="4Gi", ready=False)
    kube.create_node("n3", cpu="4", memory="8Gi")
    kube.create_pod("busy", cpu="3", memory="1Gi", node_name="n3")
    kube.create_pod("web", cpu="1500m", memory="1Gi")
    result = runner.invoke(explain, ["default/web", "--kubeconfig", str(fake_apiserver.kubeconfig), "-o", "json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    # n3 has 1 cpu free of 4: too little; n2 is NotReady; n1 is empty.
    assert [(n["node"], n["verdict"], n.get("plugin", "")) for n in body["nodes"]] == [
        ("n1", "feasible", ""), ("n2", "unresolvable", "NodeReady"), ("n3", "refused", "ResourceFit"),
    ]
    assert body["nodes"][2]["detail"] == "Insufficient cpu (requested 1500m, free 1)"
    missing = runner.invoke(explain, ["default/ghost", "--kubeconfig", str(fake_apiserver.kubeconfig)])
    assert missing.exit_code == 1 and "not in the cluster" in missing.output


def test_simulate_json(runner: CliRunner) -> None:
    result = runner.invoke(simulate, [str(SMALL), "--policy", str(LEAST), "-o", "json", "--pods", str(EXTRA)])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert [(p["pod"], p["node"]) for p in body["placements"]] == [
        ("default/p1", "b"), ("default/p2", "c"), ("default/p3", "b"), ("default/extra-1", "c"),
    ]


def test_simulate_compare_with_html(runner: CliRunner, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    result = runner.invoke(simulate, [str(SMALL), "--policy", str(LEAST), "--policy", str(MOST),
                                      "--html", str(report), "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "4 pod(s) placed differently:" in result.output
    html = report.read_text()
    assert html.count("<svg") == 2 and "Placed differently" in html


def test_simulate_default_policy_table(runner: CliRunner) -> None:
    result = runner.invoke(simulate, [str(SNAPSHOT)])
    assert result.exit_code == 0, result.output
    assert "Policy <built-in standalone>   seed 0" in result.output
    assert "default/huge   0/6 nodes are available" in result.output


def test_simulate_refuses_three_policies_and_bad_files(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(simulate, [str(SMALL)] + ["--policy", str(LEAST)] * 3)
    assert result.exit_code == 2 and "at most twice" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: extender/v1alpha1\nkind: Policy\nscores: [{name: Nope}]\n")
    result = runner.invoke(simulate, [str(SMALL), "--policy", str(bad)])
    assert result.exit_code == 1 and "unknown scorer plugin 'Nope'" in result.output
    pods = tmp_path / "pods.yaml"
    pods.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec: {containers: [{name: c}]}\n")
    result = runner.invoke(simulate, [str(SMALL), "--pods", str(pods)])
    assert result.exit_code == 1 and "default/p1 is already in the snapshot" in result.output


def test_explain_says_what_a_pod_group_member_waits_for(runner: CliRunner, fake_apiserver) -> None:
    kube = fake_apiserver.client
    kube.create_node("n1", cpu="4")
    group = {"schedulingGroup": {"podGroupName": "pg1"}}
    kube.create_pod("p1", cpu="1", spec=group)
    args = ["default/p1", "--kubeconfig", str(fake_apiserver.kubeconfig), "-o", "json"]
    head = "member of pod group default/pg1 (scheduling.k8s.io/v1alpha2)"
    notes = json.loads(runner.invoke(explain, args).output)["notes"]
    assert f"{head}; waits for: the pod group to exist" in notes
    kube.call("POST", "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups",
              {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "pg1"},
               "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}})
    kube.create_pod("p2", cpu="1", spec=group, node_name="n1")
    notes = json.loads(runner.invoke(explain, args).output)["notes"]
    assert (f"{head}; policy: gang, minCount 3; members 2, bound 1, held 0, allowed 0; waits for: pod group "
            "default/pg1 has 2 of 3 members (minCount 3); 1 missing") in notes
    kube.create_pod("p3", cpu="1", spec=group)
    notes = json.loads(runner.invoke(explain, args).output)["notes"]
    assert (f"{head}; policy: gang, minCount 3; members 3, bound 1, held 0, allowed 0; waits for: 2 more "
            "member(s) placed (held members wait up to 300 s)") in notes


def test_explain_reads_a_member_s_group_from_the_snapshot(runner: CliRunner) -> None:
    """Offline, the snapshot's PodGroup objects answer what a live cluster would."""
    gangs = str(SNAPSHOT.parent / "snapshot-gangs.yaml")
    notes = json.loads(runner.invoke(explain, ["ml/spark-exec-0", "--snapshot", gangs, "-o", "json"]).output)["notes"]
    assert ("member of pod group ml/spark (scheduling.x-k8s.io/v1alpha1); policy: gang, minCount 3; members 4, "
            "bound 0, held 0, allowed 0; waits for: 3 more member(s) placed (held members wait up to 60 s)") in notes
    notes = json.loads(runner.invoke(explain, ["ml/late-0", "--snapshot", gangs, "-o", "json"]).output)["notes"]
    assert "member of pod group ml/late (scheduling.k8s.io/v1alpha2); waits for: the pod group to exist" in notes
