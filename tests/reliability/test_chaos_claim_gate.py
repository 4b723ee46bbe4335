"""The chaos run's claim gate (bench/chaos/claimgate.py), the admission webhook through which
claim faults refuse or hold writes to resourceclaims/status: over HTTPS as kube-apiserver
calls it, unarmed it allows everything; armed, it refuses exactly N writes with the code
chosen, and the PreBind kill matches only the standalone pool's allocating write."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from bench.chaos.claimgate import ClaimGate
from tests.fakeapi.pki import CertificateAuthority


@pytest.fixture
def gate(tmp_path: Path) -> Any:
    ca = CertificateAuthority()
    serving = ca.serving(common_name="gate").write(tmp_path / "gate.crt", tmp_path / "gate.key")
    started = ClaimGate(serving, ca.write_cert(tmp_path / "ca.crt"), "chaos", "sa-").start()
    yield started
    started.stop()


def review(pod: str = "sa-dra-template-1", allocated: bool = True, before: tuple[str, ...] = ()) -> dict[str, Any]:
    def claim(reserved: tuple[str, ...], with_allocation: bool) -> dict[str, Any]:
        status: dict[str, Any] = {"reservedFor": [{"resource": "pods", "name": p, "uid": p} for p in reserved]}
        if with_allocation:
            status["allocation"] = {"devices": {"results": []}}
        return {"metadata": {"name": "c"}, "status": status}

    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "r1", "namespace": "chaos", "name": "c",
                        "object": claim((*before, pod), allocated), "oldObject": claim(before, False)}}


def post(gate: ClaimGate, body: dict[str, Any]) -> dict[str, Any]:
    reply = requests.post(f"https://127.0.0.1:{gate.port}/claims", json=body, verify=str(gate.ca_file), timeout=10)
    reply.raise_for_status()
    return reply.json()["response"]


def test_unarmed_it_allows_over_https_and_its_configuration_points_at_it(gate: ClaimGate) -> None:
    assert post(gate, review()) == {"uid": "r1", "allowed": True}
    (hook,) = gate.configuration()["webhooks"]
    assert hook["clientConfig"]["url"] == f"https://127.0.0.1:{gate.port}/claims"
    assert hook["failurePolicy"] == "Fail" and hook["rules"][0]["resources"] == ["resourceclaims/status"]


def test_refuse_answers_exactly_the_next_n_writes(gate: ClaimGate) -> None:
    rng = random.Random(0)
    while True:  # a seed whose draw is a 409 (the draw is the gate's, seeded by the run)
        state = rng.getstate()
        if rng.choice(("conflict", "error", "timeout")) == "conflict":
            rng.setstate(state)
            break
    outcome: dict[str, str] = {}
    thread = threading.Thread(target=lambda: outcome.update(detail=gate.refuse(rng, timeout=10)))
    thread.start()
    deadline = time.monotonic() + 5
    while gate._armed is None and time.monotonic() < deadline:  # noqa: SLF001 - armed yet?
        time.sleep(0.01)
    answers = [post(gate, review()) for _ in range(4)]
    thread.join(10)
    refused = [a for a in answers if not a["allowed"]]
    assert 1 <= len(refused) <= 3 and all(a["allowed"] for a in answers[len(refused):])
    assert all(a["status"]["code"] == 409 for a in refused)
    assert outcome["detail"].startswith(f"conflict: {len(refused)} of {len(refused)} writes")
    assert gate.refused == len(refused)


def seed_where(land: bool) -> random.Random:
    """A generator whose first draw lets the held write through (or refuses it)."""
    seed = next(s for s in range(100) if (random.Random(s).random() < 0.5) is land)
    return random.Random(seed)


@pytest.mark.parametrize("land", [True, False])
def test_the_prebind_kill_waits_for_the_standalone_pools_allocating_write(gate: ClaimGate, land: bool) -> None:
    killed: list[str] = []
    outcome: dict[str, str] = {}
    thread = threading.Thread(target=lambda: outcome.update(
        detail=gate.kill_in_prebind(lambda: killed.append("leader") or "replica-0 killed", seed_where(land),
                                    timeout=10)))
    thread.start()
    while gate._armed is None:  # noqa: SLF001
        time.sleep(0.01)
    # kube-scheduler's pod, a write that allocates nothing, a reservation already there: let through.
    assert post(gate, review(pod="wh-dra-template-2"))["allowed"]
    assert post(gate, review(allocated=False))["allowed"]
    assert post(gate, review(pod="sa-x", before=("sa-x",)))["allowed"] is True
    assert killed == []
    answer = post(gate, review())
    thread.join(10)
    assert killed == ["leader"] and answer["allowed"] is land
    if land:  # let through, the leader killed as the answer went back: PreBind done, no binding
        assert outcome["detail"] == "chaos/c let through, then replica-0 killed; let through"
    else:  # killed while the write waited, then refused
        assert outcome["detail"] == "chaos/c held, replica-0 killed; refused 500"
