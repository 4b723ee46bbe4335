"""`extender schedule` on a real control plane against `extender replay` on the same slice of
an openb-format trace (issue 42, item 5; bench/replay_live.py is the driver, its docstring the
protocol): the same allocation ratio within 0.5 points, no GPU over its capacity, every pod's
assignment what it asked for and summing to its node's use.

The trace is made here (12 of 16 nodes of two models, 1 to 8 GPUs each; shares, whole GPUs,
2-GPU pods, CPU-only pods and pods pinned to a model), small enough for a couple of minutes.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from bench.replay_live import Slice, live_check, make_slice
from extender.replay.traces import read_trace
from tests.e2e import configs
from tests.replay.traces import write_nodes, write_pods

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

REPLAY = configs.CONFIG / "replay"
# The policies checked live: FGD and, once it is shipped, the recommended one.
LIVE_POLICIES = [name for name in ("fgd.yaml", "recommended.yaml") if (REPLAY / name).exists()]


def _slice(tmp_path: Path, seed: int = 42) -> Slice:
    rng = random.Random(5)
    nodes = [f"m{i:02d},{gpus * 16000},{gpus * 65536},{gpus},{rng.choice(['T4', 'V100'])}"
             for i, gpus in enumerate(rng.choice([1, 2, 4, 8]) for _ in range(16))]
    pods = []
    for i in range(300):
        kind = rng.random()
        cpu = rng.choice([2000, 4000, 8000])
        if kind < 0.55:
            pods.append(f"p{i:03d},{cpu},8192,1,{rng.choice([250, 300, 500, 700, 810])},")
        elif kind < 0.75:
            pods.append(f"p{i:03d},{cpu},16384,1,1000,")
        elif kind < 0.85:
            pods.append(f"p{i:03d},{cpu * 2},32768,2,1000,")
        elif kind < 0.93:
            pods.append(f"p{i:03d},{cpu},8192,1,500,T4")
        else:
            pods.append(f"p{i:03d},{cpu},4096,0,0,")
    trace = read_trace(nodes=str(write_nodes(tmp_path / "nodes.csv", nodes)),
                       pods=str(write_pods(tmp_path / "pods.csv", pods)))
    return make_slice(trace, seed, 12)


@pytest.mark.parametrize("policy", LIVE_POLICIES)
def test_live_reaches_the_replay_ratio_on_a_slice(cluster: Any, logs: Any, tmp_path: Path, policy: str) -> None:
    piece = _slice(tmp_path)
    assert len(piece.trace.nodes) == 12 and len(piece.order.pods) > 30
    logs.append(lambda: ("extender schedule", _read(tmp_path / "live.log")))
    result = live_check(cluster.client, cluster.kubeconfig, tmp_path, piece, REPLAY / policy, log_name="live")
    print(result.to_json())
    assert result.problems == []
    assert result.difference <= 0.5, result.to_json()
    assert 80 < result.live_ratio <= 100
    assert result.live_placed < result.pods  # the slice is full enough that some pods are dropped
    if policy == "fgd.yaml":
        assert result.pinned == 2  # DeviceFit's GPU choice and GpuFragmentation read the slice's workload
        # Deterministic on both sides (a pinned workload, ties to the smallest node name):
        # the same pods land on the same nodes.
        assert result.same_node == result.pods, result.to_json()


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
