"""The shipped shared-GPU examples offline, read the same way for both device modes:
config/snapshot-devices.yaml (annotations) and config/snapshot-devices-dra.yaml (ResourceSlices),
each with its policy. Both publish the same A100 and T4 nodes, so explain's GPU notes on them must
carry the same figures in either mode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from extender.cli.explain_command import explain
from extender.cluster.snapshot import read_snapshot
from extender.policy.loading import load_policy_file
from extender.simulation.simulating import simulate

#: gpu-a100 as both examples leave it: ml/notebook holds 20480 MiB and 50% of GPU-a100-0.
A100_NOTE = ("GPUs on gpu-a100: GPU-a100-0 (NVIDIA-A100-SXM4-40GB) 20480/40960 MiB, 50/100% cores free, "
             "1 pod(s); GPU-a100-1 (NVIDIA-A100-SXM4-40GB) 40960/40960 MiB, 100/100% cores free, 0 pod(s)")

#: Where both examples place the GPU pods they share (ml/web aside, a tie): train takes the free
#: A100 whole, infer-1 and -2 fill GPU-a100-0's cores beside the notebook, infer-3 and -4 go to
#: the T4s, and no-t4 (memory only, no cores) fits on GPU-a100-0.
SHARED_PLACEMENTS = {"ml/train": "gpu-a100", "ml/infer-1": "gpu-a100", "ml/infer-2": "gpu-a100",
                     "ml/infer-3": "gpu-t4", "ml/infer-4": "gpu-t4", "ml/no-t4": "gpu-a100"}


def simulated(snapshot: Path, policy: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Simulate the example: (pod -> node it was placed on, pod -> why it was not)."""
    result = simulate(read_snapshot(snapshot), load_policy_file(policy))
    return {p.pod: p.node for p in result.placements}, {u.pod: u.reason for u in result.unschedulable}


def explained(pod: str, snapshot: Path, policy: Path) -> dict[str, Any]:
    """`extender explain POD -o json` on the example, which must succeed."""
    result = CliRunner().invoke(explain, [pod, "--snapshot", str(snapshot), "--policy", str(policy), "-o", "json"])
    assert result.exit_code == 0, result.output
    body: dict[str, Any] = json.loads(result.output)
    return body


def assert_gpu_notes(body: dict[str, Any]) -> list[str]:
    """ml/big-model's explanation in either mode: gpu-a100 is best, its note shows each device's
    free share, and the T4s' note ends with the unhealthy GPU-t4-3. Returns the notes."""
    assert body["best"] == ["gpu-a100"]
    notes: list[str] = body["notes"]
    assert A100_NOTE in notes
    assert any(n.startswith("GPUs on gpu-t4: ") and n.endswith("0 pod(s), unhealthy") for n in notes)
    return notes
