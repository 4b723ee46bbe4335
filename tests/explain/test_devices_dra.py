"""Shared GPUs on the standard API offline: config/snapshot-devices-dra.yaml with config/policy-devices-dra.yaml.

The cluster of config/snapshot-devices.yaml published as ResourceSlices (see the snapshot's
header): simulate records each placed pod's shares as a claim, so later pods (shares pods and
the standard DRA pod ml/dra-share alike) see them taken; explain's GPU notes carry the same
figures as in annotation mode.
"""

from __future__ import annotations

from click.testing import CliRunner

from extender.cli.simulate import simulate as simulate_command
from tests.explain.gpu_examples import SHARED_PLACEMENTS, assert_gpu_notes, explained, simulated
from tests.helpers import ROOT

SNAPSHOT = ROOT / "config" / "snapshot-devices-dra.yaml"
POLICY = ROOT / "config" / "policy-devices-dra.yaml"


def test_simulate_places_share_pods_and_dra_pods_on_one_capacity() -> None:
    placed, reasons = simulated(SNAPSHOT, POLICY)
    # web (CPU only) scores the same on gpu-odd and cpu-only: the seeded tie-break picks one.
    assert placed.pop("ml/web") in {"gpu-odd", "cpu-only"}
    # As with annotations: train takes the free A100 whole, infer-1 and -2 fill GPU-a100-0's cores
    # beside the notebook's claim, no-t4 fits there by memory. infer-3 and -4 (8Gi each on a T4, by its
    # policy), odd-size and the standard claim dra-share go to the T4s.
    assert placed == {**SHARED_PLACEMENTS, "ml/odd-size": "gpu-t4", "ml/dra-share": "gpu-t4"}
    assert reasons["ml/big-model"].startswith(
        "0/4 nodes are available: 1 Insufficient GPU cores, 1 Insufficient GPU memory, "
        "1 node(s) had too few GPUs of the requested type, 2 node(s) had no shared GPUs. preemption: ")
    assert "1 node(s) had too few GPUs whose request policy allows the share" in reasons["ml/too-big"]


def test_the_cli_simulates_and_explains_the_example() -> None:
    result = CliRunner().invoke(simulate_command, [str(SNAPSHOT), "--policy", str(POLICY)])
    assert result.exit_code == 0, result.output
    assert "Placed 9/11 pods, 2 unschedulable." in result.output
    body = explained("ml/big-model", SNAPSHOT, POLICY)
    assert_gpu_notes(body)
    rows = {row["node"]: row for row in body["nodes"]}
    assert "cores capacity 150 is not a percentage from 1 to 100" in rows["gpu-odd"]["detail"]
