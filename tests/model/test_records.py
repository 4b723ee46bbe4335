"""Pod records: a workload's replicas share one parse of their containers, and only what is the same is shared."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.model import records
from extender.model.ports import HostPort
from extender.model.records import record_from_dict


def _pod(name: str, cpu: str = "100m", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}],
                 "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}], **spec},
            "status": {"phase": "Running"}}


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often the containers' requests are parsed, from an empty memory of them."""
    monkeypatch.setattr(records, "_spec_parts_seen", {})
    calls: list[int] = []
    parse = records.pod_request_pair

    def counting(spec: Any) -> Any:
        calls.append(1)
        return parse(spec)

    monkeypatch.setattr(records, "pod_request_pair", counting)
    return calls


def test_replicas_share_one_parse_of_their_containers(parses: list[int]) -> None:
    replicas = [record_from_dict(_pod(f"web-{i}")) for i in range(50)]
    assert len(parses) == 1
    assert {r.requests["cpu"] for r in replicas} == {100}
    assert all(r.host_ports == (HostPort("0.0.0.0", "TCP", 8080),) for r in replicas)
    assert all(r.key == f"default/web-{i}" for i, r in enumerate(replicas))


@pytest.mark.parametrize("change", [
    {"cpu": "200m"},
    {"overhead": {"cpu": "50m"}},
    {"resources": {"requests": {"cpu": "1"}}},
    {"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}]},
])
def test_pods_whose_containers_differ_are_parsed_apart(parses: list[int], change: dict[str, Any]) -> None:
    plain = record_from_dict(_pod("a"))
    other = _pod("b", **{k: v for k, v in change.items() if k != "cpu"}, cpu=change.get("cpu", "100m"))
    fresh = copy.deepcopy(other)
    records._spec_parts_seen.clear()
    expected = record_from_dict(fresh)  # parsed on its own, nothing remembered
    records._spec_parts_seen.clear()
    record_from_dict(_pod("a"))
    assert record_from_dict(other).requests == expected.requests != plain.requests
    assert record_from_dict(other).score_requests == expected.score_requests


def test_the_memory_is_bounded(parses: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_SPEC_PARTS_LIMIT", 3)
    for i in range(10):
        record_from_dict(_pod(f"p{i}", cpu=f"{i + 1}m"))
    assert len(records._spec_parts_seen) == 3
    assert record_from_dict(_pod("again", cpu="10m")).requests["cpu"] == 10
