"""Volumes in simulate and explain, on tests/explain/fixtures/volumes.yaml (see its header)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from extender.cli.explain_command import explain
from extender.cli.simulate import simulate as simulate_command
from extender.cluster.snapshot import read_snapshot
from extender.policy.defaults import default_policy
from extender.simulation.simulating import simulate
from tests.explain.conftest import FIXTURES
from tests.storage_controllers import create_storage
from tests.storage_objects import claim, local_class, persistent_volume

VOLUMES = FIXTURES / "volumes.yaml"
# A claim's refusal found before any node is looked at (PreFilter) is said once, without a count.
NO_VOLUME = "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
LOST = '0/3 nodes are available: persistentvolumeclaim "nope" not found.'
NOT_HELPFUL = " preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."


@pytest.mark.parametrize("seed", range(5))
def test_simulate_honours_volumes_and_its_binds_are_seen_by_the_next_pod(seed: int) -> None:
    result = simulate(read_snapshot(VOLUMES), default_policy("standalone"), seed=seed)
    placed = {p.pod.split("/")[1]: p.node for p in result.placements}
    # Two free local volumes for three claims: the third pod finds both taken by the first two.
    assert {placed["db-0"], placed["db-1"]} == {"node-1", "node-3"}
    assert placed["pinned-app"] == "node-2"  # its claim is bound to pv-2 on node-2
    assert placed["writer-a"] in ("node-2", "node-3")  # class fast provisions in zone b only
    assert placed["writer-b"] == placed["writer-a"]  # the claim now names writer-a's node
    assert {(u.pod, u.reason) for u in result.unschedulable} == {("default/db-2", NO_VOLUME + NOT_HELPFUL),
                                                                 ("default/lost", LOST + NOT_HELPFUL)}


def explain_json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(explain, [*args, "--snapshot", str(VOLUMES), "-o", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_explain_names_the_volume_behind_each_refusal() -> None:
    body = explain_json("default/pinned-app")
    assert body["best"] == ["node-2"]
    refused = {n["node"]: (n["verdict"], n["plugin"], n["reason"], n["detail"]) for n in body["nodes"]
               if n["verdict"] != "feasible"}
    detail = ("claim default/pinned is bound to PV pv-2, whose node affinity "
              "(kubernetes.io/hostname In ['node-2']) does not match")
    assert refused == {node: ("unresolvable", "VolumeBinding", "node(s) didn't match PersistentVolume's node "
                              "affinity", detail) for node in ("node-1", "node-3")}
    zones = {n["node"]: n.get("detail") for n in explain_json("default/writer-a")["nodes"]}
    assert zones["node-1"] == ("no available PV of class fast fits claim default/shared (1Gi, ReadWriteMany) "
                               "here, and this node is outside class fast's allowedTopologies")
    missing = explain_json("default/lost")
    assert missing["summary"] == LOST
    assert {(n["plugin"], n["reason"]) for n in missing["nodes"]} == {
        ("VolumeRestrictions", 'persistentvolumeclaim "nope" not found')}


def test_simulate_command_reports_volume_reasons() -> None:
    result = CliRunner().invoke(simulate_command, [str(VOLUMES), "-o", "json", "--seed", "3"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert {u["pod"]: u["reason"] for u in body["unschedulable"]} == {"default/db-2": NO_VOLUME + NOT_HELPFUL,
                                                                      "default/lost": LOST + NOT_HELPFUL}


@pytest.mark.apiserver
def test_explain_reads_storage_from_a_live_cluster(apiserver: Any, kube: Any) -> None:
    kube.create_node("node-1")
    kube.create_node("node-2")
    create_storage(kube, local_class(), persistent_volume("pv", node="node-2"), claim("data"))
    kube.create_pod("db", spec={"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]})
    try:
        result = CliRunner().invoke(explain, ["default/db", "--kubeconfig", str(apiserver.kubeconfig), "-o", "json"])
        assert result.exit_code == 0, result.output
        body = json.loads(result.output)
        assert body["best"] == ["node-2"]
        assert {n["node"]: n.get("reason") for n in body["nodes"]}["node-1"] == \
            "node(s) didn't find available persistent volumes to bind"
    finally:
        from tests.storage_controllers import delete_storage

        delete_storage(kube)
