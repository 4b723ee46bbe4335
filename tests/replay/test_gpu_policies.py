"""The six published GPU-sharing policies, checked against values worked out by hand from the
rules in docs/replay.md, and their GPU choice inside a node."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from extender.cluster.state import ClusterState
from extender.model.devices import Device, Inventory, Use
from extender.model.gpushare import (
    GpuNode,
    PodShape,
    Workload,
    fed_fragmentation,
    fragmentation,
    gpu_node,
    model_pressure,
    sigmoid_score,
)
from extender.model.pods import PodView
from extender.policy.builtin.gpu_choice import Fragmentation
from extender.policy.builtin.gpu_share import (
    GpuBestFit,
    GpuDotProduct,
    GpuFragmentation,
    GpuPacking,
    GpuRandom,
    PressureGauge,
)
from extender.policy.loading import load_policy
from extender.replay.traces import read_trace
from tests.policy.builders import make_node, make_pod
from tests.replay.traces import write_nodes, write_pods


def test_a_gpus_free_share_is_the_smaller_of_its_free_memory_and_compute():
    devices = tuple(Device(f"d{i}", "Tesla-T4", 1000, 100, index=i) for i in range(3))
    used = {"d0": Use(460, 46, 1), "d1": Use(200, 50, 1)}
    node = gpu_node(Inventory(devices), used, 12000)
    assert node == GpuNode(12000, (540, 500, 1000), "tesla-t4")


def test_fragmentation_counts_what_each_target_shape_cannot_use():
    node = GpuNode(10_000, (1000, 300), "t4")
    share = PodShape(2000, 500, 1)
    cpu_only = PodShape(1000, 0, 0)
    # the share fits (one GPU holds 500, CPU is enough): only the 300 left on the other GPU is stranded;
    # a shape with no GPU strands everything free
    assert fragmentation(node, Workload(((0.5, share), (0.5, cpu_only)))) == 0.5 * 300 + 0.5 * 1300
    assert fragmentation(node, Workload(((1.0, PodShape(2000, 500, 1, ("v100",))),))) == 1300  # wrong model
    assert fragmentation(node, Workload(((1.0, PodShape(20_000, 500, 1)),))) == 1300  # too little CPU
    assert fragmentation(node, Workload(((1.0, PodShape(0, 1000, 2)),))) == 1300  # too few whole GPUs


def test_the_cpu_fed_measure_counts_the_free_gpus_the_cpu_cannot_feed():
    # 8 free GPUs, 22 free cores: two pods of 11 cores and one GPU each, so 6 GPUs wait for CPU.
    # FGD calls the node unfragmented for that shape; the CPU-fed measure counts those 6 GPUs.
    node = GpuNode(22_000, (1000,) * 8, "g2")
    whole = Workload(((1.0, PodShape(11_000, 1000, 1)),))
    assert fragmentation(node, whole) == 0
    assert fed_fragmentation(node, whole) == 6000
    # shares: one GPU per pod the CPU allows, the fullest-free first (900 and 700 of 900, 700, 600, 200)
    node = GpuNode(8_000, (600, 900, 200, 700), "t4")
    share = Workload(((1.0, PodShape(4_000, 500, 1)),))
    assert fragmentation(node, share) == 200
    assert fed_fragmentation(node, share) == 2400 - 1600
    # k whole GPUs per pod: 3 free GPUs serve one 2-GPU pod; the third is a fragment for it
    pair = Workload(((1.0, PodShape(0, 1000, 2)),))
    assert fragmentation(GpuNode(64_000, (1000, 1000, 1000), "t4"), pair) == 0
    assert fed_fragmentation(GpuNode(64_000, (1000, 1000, 1000), "t4"), pair) == 1000
    # where the CPU is not short, both measures agree (the checks of the test above)
    for workload in (Workload(((0.5, PodShape(2000, 500, 1)), (0.5, PodShape(1000, 0, 0)))),
                     Workload(((1.0, PodShape(20_000, 500, 1)),)), Workload(((1.0, PodShape(0, 1000, 2)),))):
        node = GpuNode(10_000, (1000, 300), "t4")
        assert fed_fragmentation(node, workload) == fragmentation(node, workload)


def test_a_cpu_fed_choice_keeps_cpu_for_the_gpus():
    # target: whole GPUs with 11 cores. A CPU-only pod of 32 cores on the 8-GPU node of 96 cores
    # leaves 64 (5 pods: 3 GPUs unfed); on the 2-GPU node of 104 cores it leaves 72 (both fed).
    frag = Fragmentation(((1.0, PodShape(11_000, 1000, 1)),), measure="cpuFed")
    cpu_only = PodShape(32_000, 0, 0)
    big, small = GpuNode(96_000, (1000,) * 8, "g2"), GpuNode(104_000, (1000,) * 2, "t4")
    assert frag.best(cpu_only, small)[0] == 50 > frag.best(cpu_only, big)[0]
    fgd = Fragmentation(((1.0, PodShape(11_000, 1000, 1)),))
    assert fgd.best(cpu_only, small)[0] == fgd.best(cpu_only, big)[0] == 50  # FGD cannot tell them apart


def test_model_pressure_is_the_pinned_demand_share_over_the_free_share():
    # half the GPU demand may run anywhere, a quarter asks for a T4, a quarter for a T4 or a V100;
    # the free GPUs: 2 on T4s, 2 on V100s, 6 on G2s. The T4-or-V100 quarter splits by free GPUs.
    anywhere, t4, t4_or_v100 = PodShape(4000, 1000, 1), PodShape(4000, 1000, 1, ("t4",)), \
        PodShape(4000, 500, 2, ("t4", "v100"))
    workload = Workload(((0.5, anywhere), (0.25, t4), (0.25, t4_or_v100)))
    pressure = model_pressure({"t4": 2000, "v100": 2000, "g2": 6000}, workload)
    # demand 1000; pinned to t4: 250 + 125, to v100: 125; free shares 0.2, 0.2, 0.6
    assert pressure.rho == pytest.approx({"t4": 0.375 / 0.2, "v100": 0.125 / 0.2})
    # a pod that runs anywhere pays on a T4 its GPU milli times (1.875 - the free-weighted mean 0.5)
    # (on a V100, 0.625 - 0.5); nothing on the G2s, where no pinned demand is
    assert pressure.costs(anywhere) == pytest.approx({"t4": 1000 * (1.875 - 0.5), "v100": 1000 * (0.625 - 0.5)})
    assert pressure.costs(PodShape(1000, 400, 1)) == pytest.approx({"t4": 400 * 1.375, "v100": 400 * 0.125})
    assert pressure.costs(t4) == {}  # the pinned pod itself: nowhere else to go
    # T4 or V100: the mean over those two (1.25): a T4 costs 1000 (0.625), a V100 nothing
    assert pressure.costs(t4_or_v100) == pytest.approx({"t4": 1000 * 0.625})
    assert pressure.costs(PodShape(4000, 0, 0)) == {}  # a CPU-only pod takes no GPU
    # nothing pinned: no pressure anywhere
    assert model_pressure({"t4": 2000, "g2": 6000}, Workload(((1.0, anywhere),))).rho == {}


def _t4_and_g2(tmp_path: Path) -> tuple[ClusterState, list[PodView]]:
    """Two nodes alike but for the GPU model, and two pods: one runs anywhere, one asks for a T4."""
    nodes = write_nodes(tmp_path / "nodes.csv", ["t4-node,64000,262144,2,T4", "g2-node,64000,262144,2,G2"])
    pods = write_pods(tmp_path / "pods.csv", ["anywhere,4000,8192,1,1000,", "pinned,4000,8192,1,1000,T4"])
    trace = read_trace(nodes=str(nodes), pods=str(pods))
    state = ClusterState()
    state.replace_nodes(list(trace.nodes))
    return state, [PodView.from_dict(dict(pod.raw)) for pod in trace.pods]


def test_the_pressure_is_read_again_every_few_pods(tmp_path):
    state, _ = _t4_and_g2(tmp_path)
    workload = Workload(((0.5, PodShape(4000, 1000, 1)), (0.5, PodShape(4000, 1000, 1, ("t4",)))))
    gauge = PressureGauge(1.0, every=2)
    first, second, third = (gauge.read(workload, state) for _ in range(3))
    assert first[1].rho == pytest.approx({"t4": 1.0})  # half the demand on half the free GPUs
    assert first[0] == second[0] == 1 and second[1] is first[1]
    assert third[0] == 2  # a new reading, under a new epoch: the engine's memo keys change with it
    state.replace_nodes([n.node.raw for n in state.all_node_infos() if n.name != "t4-node"])
    assert gauge.read(workload, state) == third  # the fourth pod still scores under the third's reading
    epoch, pressure = gauge.read(workload, state)
    assert epoch == 3 and pressure.free == {"g2": 2000} and pressure.rho == {}  # no T4 left to press


def test_a_pod_that_runs_anywhere_leaves_the_pinned_model_alone(tmp_path):
    # the workload: half may run anywhere, half asks for a T4.
    state, (anywhere, pinned) = _t4_and_g2(tmp_path)
    workload = [{"cpu": 4000, "gpuMilli": 1000, "gpus": 1, "weight": 0.5},
                {"cpu": 4000, "gpuMilli": 1000, "gpus": 1, "types": ["T4"], "weight": 0.5}]
    fgd = GpuFragmentation.from_args({"workload": workload})
    pressed = GpuFragmentation.from_args({"workload": workload, "modelPressure": 1})

    def cluster_scores(plugin: GpuFragmentation, pod: PodView, state: ClusterState) -> dict[str, float]:
        infos = state.all_node_infos()
        fn = plugin.prescore(pod, state, infos)
        assert fn is not None
        return {info.name: fn(info) for info in infos}

    # FGD: on the G2 the pod removes 500 of the pinned half's unusable 1000 (sigmoid(0.5): 62); on the
    # T4 nothing changes (50). Pressure: rho(t4) = 0.5 / 0.5 = 1, the mean over both models 0.5, so
    # the T4 also costs 1000 * 0.5: sigmoid(-0.5) = 37.
    assert cluster_scores(fgd, anywhere, state) == {"t4-node": 50, "g2-node": 62}
    assert cluster_scores(pressed, anywhere, state) == {"t4-node": 37, "g2-node": 62}
    # the pinned pod pays nothing on its own model
    assert cluster_scores(pressed, pinned, state) == cluster_scores(fgd, pinned, state)


def test_a_learn_only_workload_is_never_primed():
    shapes = [PodShape(1000, 500, 1)] * 3
    primed, learning = Fragmentation(), Fragmentation(learn_only=True)
    primed.prime(shapes)
    learning.prime(shapes)
    assert primed.workload.shapes == ((1.0, PodShape(1000, 500, 1)),)
    assert learning.workload.shapes == () and learning.learner is not None
    learning.observe(PodShape(2000, 1000, 1))
    assert learning.workload.shapes == ((1.0, PodShape(2000, 1000, 1)),)


def test_fgd_score_is_the_sigmoid_of_the_fragmentation_removed():
    assert sigmoid_score(0) == 50
    assert sigmoid_score(-200) == 45  # 100 / (1 + e^0.2) = 45.02
    assert sigmoid_score(10_000_000) == 100 and sigmoid_score(-10_000_000) == 0


def test_fgd_takes_the_gpu_that_strands_least_where_best_fit_takes_the_fullest():
    # target: shares of 600. A 400 share on GPU 0 leaves (600, 600): nothing stranded (score 50);
    # on GPU 1 (the best fit) it leaves 200 that no 600 share can use (score 45).
    frag = Fragmentation(((1.0, PodShape(1000, 600, 1)),))
    assert frag.best(PodShape(1000, 400, 1), GpuNode(8000, (1000, 600), "t4")) == (50, (0,))
    # whole GPUs: the lowest-indexed free ones
    assert frag.best(PodShape(1000, 1000, 2), GpuNode(8000, (500, 1000, 1000, 1000), "t4"))[1] == (1, 2)


def test_dot_product_prefers_the_smallest_product_of_free_and_demand():
    # (64000/128000)(8000/128000) + (4000/8000)(1000/8000) = 0.03125 + 0.0625; 100 (1 - 0.09375 / 2) = 95.3
    assert GpuDotProduct().rule(PodShape(8000, 1000, 1), GpuNode(64_000, (1000,) * 4, "t4")) == 95


def test_packing_scores_idle_machines_low_and_tops_up_busy_gpus():
    packing = GpuPacking()
    assert [packing.rule(PodShape(1000, 300, 1), GpuNode(8000, (1000,) * n, "t4")) for n in (1, 2, 4, 8)] == \
        [32, 31, 29, 25]
    busy = GpuNode(8000, (1000, 400), "t4")
    assert packing.rule(PodShape(1000, 300, 1), busy) == 96  # onto the 400 left: 100 - 40 // 10
    assert packing.rule(PodShape(1000, 1000, 1), busy) == 49  # one idle GPU used: 50 - 1
    assert packing.rule(PodShape(1000, 0, 0), busy) == 0


def test_clustering_keeps_pods_of_one_kind_together():
    from extender.policy.builtin.gpu_share import _clustering

    state = GpuNode(8000, (1000, 1000, 500, 1000), "t4")  # 3500 used of 8 GPU-widths: base 25 * 4500 // 8000 = 14
    assert _clustering("share-gpu", state, frozenset({"share-gpu"})) == 14 + 75
    assert _clustering("share-gpu", state, frozenset({"share-gpu", "1-gpu"})) == 14 + 50
    assert _clustering("share-gpu", state, frozenset()) == 14 + 25
    assert _clustering("share-gpu", state, frozenset({"2-gpu"})) == 14


def test_best_fit_is_min_max_normalised_over_the_feasible_nodes():
    plugin = GpuBestFit()
    assert plugin.normalize_scores([90, 95, 100]) == [0.0, 50.0, 100.0]
    assert plugin.normalize_scores([70, 70]) == [0.0, 0.0]
    # 0.5 (64000 - 8000) / 128000 + 0.5 (4000 - 1000) / 8000 = 0.40625: int(59.375)
    assert plugin.rule(PodShape(8000, 1000, 1), GpuNode(64_000, (1000,) * 4, "t4")) == 59


def test_random_draws_one_feasible_node_per_pod_reproducibly():
    nodes = [make_node(f"n{i}") for i in range(20)]
    pods = [make_pod(f"p{i}") for i in range(30)]

    def chosen(seed: int) -> list[str]:
        plugin = GpuRandom(seed)
        picks = []
        for pod in pods:
            fn = plugin.prescore(pod, None, nodes)  # type: ignore[arg-type]
            scores = [fn(n) for n in nodes]
            assert sorted(scores) == [0] * 19 + [100]
            picks.append(nodes[scores.index(100)].name)
        return picks

    assert chosen(1) == chosen(1)
    assert chosen(1) != chosen(2)
    assert len(set(chosen(1))) > 5


@pytest.mark.parametrize("name", ["random", "dotprod", "clustering", "packing", "bestfit", "fgd", "recommended"])
def test_every_shipped_replay_policy_loads(name):
    with open(f"config/replay/{name}.yaml", encoding="utf-8") as handle:
        policy = load_policy(handle.read(), name)
    assert policy.settings["tieBreak"] == "nodeName"
    assert [s.name for s in policy.scorers][0].startswith("Gpu")


@pytest.mark.parametrize(("args", "problem"), [
    ({"workload": "guess"}, 'expected "learned" or a non-empty list'),
    ({"workload": [{"cpu": 1, "gpuMilli": 2000, "gpus": 1}]}, "gpuMilli: expected an integer from 0 to 1000"),
    ({"workload": [{"cpu": 1, "gpuMilli": 500, "gpus": 0}]}, "both 0 (a CPU-only shape) or both set"),
    ({"workload": [{"cpu": 1, "gpuMilli": 500, "gpus": 1, "color": 1}]}, "color: unknown field"),
    ({"measure": "fast"}, "measure: 'fast' is not one of fgd, cpuFed"),
    ({"learnOnly": "yes"}, "learnOnly: expected true or false"),
    ({"modelPressure": -1}, "modelPressure: must be at least 0"),
])
def test_a_bad_pinned_workload_is_named(args, problem):
    from extender.errors import PolicyError

    text = ("apiVersion: extender/v1alpha1\nkind: Policy\nscores:\n  - name: GpuFragmentation\n    weight: 1\n"
            f"    args: {json.dumps(args)}\n")
    with pytest.raises(PolicyError, match=re.escape(problem)):
        load_policy(text, "p.yaml")


def test_tie_break_must_be_known():
    from extender.errors import PolicyError

    with pytest.raises(PolicyError, match="settings.tieBreak: 'first' is not one of random, nodeName"):
        load_policy("apiVersion: extender/v1alpha1\nkind: Policy\nsettings: {tieBreak: first}\n", "p.yaml")


def test_the_learned_workload_decays_and_is_published_in_epochs():
    from extender.model.gpushare import WorkloadLearner

    decaying = WorkloadLearner(half_life=10, epoch=5, coverage=1.0)
    counting = WorkloadLearner(half_life=0, epoch=5, coverage=1.0)  # no decay: plain counts
    old, new = PodShape(1000, 500, 1), PodShape(2000, 1000, 1)
    for learner in (decaying, counting):
        learner.observe(old)  # the first shape seen is published at once
        assert learner.workload.shapes == ((1.0, old),) and learner.version == 1
        for _ in range(3):
            learner.observe(old)
        assert learner.version == 1  # not yet an epoch
        for _ in range(20):
            learner.observe(new)
        assert learner.version == 5  # then every 5 pods: at the 6th, 11th, 16th and 21st
    weights = {shape: weight for weight, shape in decaying.workload.shapes}
    counts = {shape: weight for weight, shape in counting.workload.shapes}
    assert counts[new] == 17 / 21  # the last published at the 21st pod: 4 old, 17 new
    # the old pods were seen 17 to 20 pods before it: with a half-life of 10 pods they weigh
    # 2^-1.7 .. 2^-2 each, the new ones 2^0 .. 2^-1.6
    old_weight = sum(0.5 ** (k / 10) for k in range(17, 21))
    new_weight = sum(0.5 ** (k / 10) for k in range(17))
    assert abs(weights[new] - new_weight / (new_weight + old_weight)) < 1e-9
    assert abs(sum(weights.values()) - 1) < 1e-9


def test_the_top_shapes_cover_the_share_asked():
    from extender.model.gpushare import top_shapes

    a, b, c = PodShape(1, 100, 1), PodShape(2, 200, 1), PodShape(3, 0, 0)
    workload = top_shapes({a: 60, b: 30, c: 10}, 0.9)
    assert workload.shapes == ((60 / 90, a), (30 / 90, b))
