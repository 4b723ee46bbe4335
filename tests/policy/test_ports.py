"""NodePorts: host port conflicts by IP and protocol, with sidecars, as kube-scheduler's NodePorts."""

from __future__ import annotations

from typing import Any

import pytest

from extender.model.ports import HostPort, host_ports
from extender.policy.builtin import NodePorts
from extender.policy.builtin.ports import REASON
from extender.policy.cluster_view import EMPTY_CLUSTER
from extender.policy.status import Code

from .builders import cluster_state, incoming, node_dict, placed

PLUGIN = NodePorts()


def ports(*items: dict[str, Any]) -> dict[str, Any]:
    return {"containers": [{"name": "c", "ports": [dict(containerPort=80, **item) for item in items]}]}


@pytest.mark.parametrize(("used", "wanted", "clash"), [
    ({"hostPort": 8080}, {"hostPort": 8080}, True),
    ({"hostPort": 8080}, {"hostPort": 8081}, False),
    ({"hostPort": 8080, "protocol": "UDP"}, {"hostPort": 8080}, False),
    ({"hostPort": 8080, "protocol": "UDP"}, {"hostPort": 8080, "protocol": "UDP"}, True),
    ({"hostPort": 8080, "hostIP": "10.0.0.1"}, {"hostPort": 8080, "hostIP": "10.0.0.2"}, False),
    ({"hostPort": 8080, "hostIP": "10.0.0.1"}, {"hostPort": 8080, "hostIP": "10.0.0.1"}, True),
    ({"hostPort": 8080, "hostIP": "10.0.0.1"}, {"hostPort": 8080}, True),  # 0.0.0.0 clashes with every IP
    ({"hostPort": 8080}, {"hostPort": 8080, "hostIP": "10.0.0.1"}, True),
    ({"hostPort": 8080, "hostIP": "0.0.0.0"}, {"hostPort": 8080, "hostIP": "10.0.0.1"}, True),
])
def test_conflicts_follow_host_port_info(used, wanted, clash) -> None:
    state = cluster_state([node_dict("n")], [placed("holder", "n", spec=ports(used))])
    check = PLUGIN.prefilter(incoming(spec=ports(wanted)), EMPTY_CLUSTER)
    status = check(state.node_info("n"))
    assert (status is not None) == clash
    if clash:
        assert status.reason == REASON and status.code == Code.UNSCHEDULABLE
        assert "in use" in status.detail


def test_pods_without_host_ports_skip_the_plugin() -> None:
    assert PLUGIN.prefilter(incoming(spec=ports({})), EMPTY_CLUSTER) is None


def test_sidecar_init_containers_count_and_plain_init_containers_do_not() -> None:
    spec = {"containers": [{"name": "c"}], "initContainers": [
        {"name": "setup", "ports": [{"containerPort": 1, "hostPort": 9001}]},
        {"name": "proxy", "restartPolicy": "Always", "ports": [{"containerPort": 2, "hostPort": 9002}]}]}
    assert host_ports(spec) == (HostPort("0.0.0.0", "TCP", 9002),)


def test_assumed_pods_hold_their_ports_at_once() -> None:
    state = cluster_state([node_dict("n")])
    first = incoming("first", spec=ports({"hostPort": 8080}))
    state.assume(first.key, "n", uid=first.uid, view=first)
    assert PLUGIN.prefilter(incoming("second", spec=ports({"hostPort": 8080})), EMPTY_CLUSTER)(state.node_info("n")).reason == REASON
    state.forget(first.key)
    assert PLUGIN.prefilter(incoming("second", spec=ports({"hostPort": 8080})), EMPTY_CLUSTER)(state.node_info("n")) is None


def test_a_removed_pod_frees_its_port() -> None:
    state = cluster_state([node_dict("n")], [placed("holder", "n", spec=ports({"hostPort": 8080}))])
    check = PLUGIN.prefilter(incoming(spec=ports({"hostPort": 8080})), EMPTY_CLUSTER)
    assert check(state.node_info("n").without({"default/holder"})) is None
