"""Per-node GPU gauges: allocated and free memory and cores of the healthy devices, devices by state."""

from __future__ import annotations

from prometheus_client import REGISTRY

from extender.cluster.state import ClusterState
from extender.kube.devicemetrics import DeviceGauges
from tests.devicebuilders import gpu, gpu_node_dict, gpu_pod_dict
from tests.policy.builders import node_dict


def value(name: str, node: str, state: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"node": node, "state": state})


def test_gauges_follow_the_cluster_state() -> None:
    state = ClusterState()
    state.replace_nodes([
        gpu_node_dict("metrics-gpu", [gpu("GPU-0", 16000), gpu("GPU-1", 16000), gpu("GPU-2", 8000, healthy=False)]),
        node_dict("metrics-cpu"),
    ])
    state.replace_pods([gpu_pod_dict("a", memory=6000, cores=30, node="metrics-gpu",
                                     assignment={"main": [("GPU-0", 6000, 30)]})])
    gauges = DeviceGauges()
    gauges.publish(state)
    assert value("extender_device_memory_mebibytes", "metrics-gpu", "allocated") == 6000
    assert value("extender_device_memory_mebibytes", "metrics-gpu", "free") == 26000  # unhealthy GPU-2 left out
    assert value("extender_device_cores_percent", "metrics-gpu", "allocated") == 30
    assert value("extender_device_cores_percent", "metrics-gpu", "free") == 170
    assert [value("extender_devices", "metrics-gpu", s) for s in ("healthy", "unhealthy", "in-use")] == [2, 1, 1]
    assert value("extender_device_memory_mebibytes", "metrics-cpu", "free") is None  # no inventory, no series

    gauges.publish(state)  # nothing changed: the same figures
    assert value("extender_device_memory_mebibytes", "metrics-gpu", "allocated") == 6000
    state.upsert_pod(gpu_pod_dict("b", memory=1000, node="metrics-gpu", assignment={"main": [("GPU-1", 1000, 0)]}))
    gauges.publish(state)
    assert value("extender_device_memory_mebibytes", "metrics-gpu", "allocated") == 7000

    state.delete_node("metrics-gpu")
    gauges.publish(state)
    assert value("extender_device_memory_mebibytes", "metrics-gpu", "free") is None


def test_a_node_that_starts_or_stops_publishing_an_inventory_is_followed() -> None:
    state = ClusterState()
    state.replace_nodes([node_dict("later-gpu")])
    gauges = DeviceGauges()
    gauges.publish(state)
    gauges.publish(state)  # the view without an inventory, remembered
    assert value("extender_device_memory_mebibytes", "later-gpu", "free") is None
    state.upsert_node(gpu_node_dict("later-gpu", [gpu("GPU-0", 4000)]))
    gauges.publish(state)
    assert value("extender_device_memory_mebibytes", "later-gpu", "free") == 4000
    state.upsert_node(node_dict("later-gpu"))
    gauges.publish(state)
    assert value("extender_device_memory_mebibytes", "later-gpu", "free") is None  # its series dropped
    assert value("extender_devices", "later-gpu", "healthy") is None
