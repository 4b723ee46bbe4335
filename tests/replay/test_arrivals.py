"""The arrival order: shuffled originals first, clones after, tuned to the target; node names."""

from __future__ import annotations

from extender.replay.arrivals import arrivals, renamed_nodes
from extender.replay.curves import Curve, percent_x, table_columns
from extender.replay.traces import read_trace
from tests.replay.traces import small_cluster, write_nodes, write_pods


def test_tuning_up_appends_clones_after_the_shuffled_originals_until_the_target(tmp_path):
    nodes, pods = small_cluster(tmp_path)
    trace = read_trace(nodes=str(nodes), pods=str(pods))
    order = arrivals(trace, 42, 1.3)
    originals = order.pods[:30]
    assert sorted(p.name for p in originals) == sorted(p.name for p in trace.pods)
    assert [p.name for p in originals] != sorted(p.name for p in trace.pods)  # shuffled
    clones = order.pods[30:]
    assert clones and all("-tuned-" in p.name for p in clones)
    target = 1.3 * trace.gpu_capacity
    total = sum(p.gpu for p in order.pods)
    assert total <= target + 1000  # a multi-GPU clone may pass it by its other GPUs
    assert target - total < 1000  # the next draw would have passed it


def test_tuning_down_drops_pods_until_the_demand_is_under_the_target(tmp_path):
    nodes = write_nodes(tmp_path / "nodes.csv", ["n0,32000,131072,2,T4"])
    pods = write_pods(tmp_path / "pods.csv", [f"p{i},1000,100,1,1000," for i in range(10)])
    trace = read_trace(nodes=str(nodes), pods=str(pods))
    order = arrivals(trace, 7, 1.5)
    assert len(order.pods) == 3 and sum(p.gpu for p in order.pods) == 3000


def test_a_seed_gives_one_order_and_one_node_naming(tmp_path):
    nodes, pods = small_cluster(tmp_path)
    trace = read_trace(nodes=str(nodes), pods=str(pods))
    first, again, other = arrivals(trace, 42, 1.3), arrivals(trace, 42, 1.3), arrivals(trace, 43, 1.3)
    assert [p.name for p in first.pods] == [p.name for p in again.pods]
    assert first.node_names == again.node_names
    assert [p.name for p in first.pods] != [p.name for p in other.pods]
    assert sorted(v[:4] for v in first.node_names.values()) == [f"{i:04d}" for i in range(6)]
    assert all(new.endswith("-" + old) for old, new in first.node_names.items())
    renamed = renamed_nodes(trace.nodes, first.node_names)
    assert {n["metadata"]["name"] for n in renamed} == set(first.node_names.values())
    assert trace.nodes[0]["metadata"]["name"] == "n0"  # the trace is not changed


def test_the_curve_averages_each_bin_and_falls_back_to_its_neighbours():
    curve = Curve()
    for x, y in ((0, 0.0), (1, 1.0), (1, 2.0), (3, 3.0), (5, 5.0)):
        curve.add(x, y)
    assert curve.at(1) == 1.5
    assert curve.at(2) == 2.0  # none at 2: the mean of bins 1..3
    assert curve.at(4) == 4.0
    assert curve.at(10) is None
    assert curve.points(6) == {"0": 0.0, "1": 1.5, "2": 2.0, "3": 3.0, "4": 4.0, "5": 5.0}  # 5 is the last reached
    curve.add(9, 9.0)
    assert curve.points()["7"] == 5.0  # nothing near 7: the y when the demand passed it
    assert percent_x(1005, 2000) == 50 and percent_x(1015, 2000) == 51  # halves to even
    assert table_columns([{"50": 49.0, "100": 90.0}, {"50": 51.0, "100": 92.0}])[100] == (91.0, 90.0, 92.0)
