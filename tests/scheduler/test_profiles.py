"""Profiles: two schedulerNames with different policies in one scheduler process."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from extender.errors import PolicyError
from extender.scheduler.profiles import build_profiles, parse_profile_option

pytestmark = pytest.mark.apiserver

POLICY = """\
apiVersion: extender/v1alpha1
kind: Policy
filters:
  - name: NodeReady
  - name: ResourceFit
  - name: NodeLabels
    args:
      rules:
        - require: [{{label: pool, values: [{pool}]}}]
scores:
  - name: {scorer}
"""


def write_policy(directory: Path, name: str, pool: str, scorer: str) -> str:
    path = directory / f"{name}.yaml"
    path.write_text(POLICY.format(pool=pool, scorer=scorer))
    return str(path)


def node_of(kube: Any, name: str) -> str:
    return ((kube.get_pod(name) or {}).get("spec") or {}).get("nodeName") or ""


def test_two_scheduler_names_two_policies(tmp_path: Path, kube: Any, make_scheduler: Any) -> None:
    spread = write_policy(tmp_path, "spread", "spread", "LeastAllocated")
    pack = write_policy(tmp_path, "pack", "pack", "MostAllocated")
    profiles = build_profiles("spreader", spread, [("packer", pack)])
    assert [p.name for p in profiles] == ["spreader", "packer"]
    for i in range(3):
        kube.create_node(f"spread-{i}", cpu="4", labels={"pool": "spread"})
        kube.create_node(f"pack-{i}", cpu="4", labels={"pool": "pack"})
    scheduler = make_scheduler(profiles)
    assert len(scheduler.pending) == 2
    for i in range(3):
        kube.create_pod(f"s{i}", cpu="500m", scheduler_name="spreader")
        kube.create_pod(f"k{i}", cpu="500m", scheduler_name="packer")
    kube.create_pod("nobody", scheduler_name="someone-else")
    names = [f"s{i}" for i in range(3)] + [f"k{i}" for i in range(3)]
    kube.wait_for(lambda: all(node_of(kube, n) for n in names), timeout=10, message="pods bound")
    spread_nodes = Counter(node_of(kube, f"s{i}") for i in range(3))
    pack_nodes = Counter(node_of(kube, f"k{i}") for i in range(3))
    assert set(spread_nodes) == {"spread-0", "spread-1", "spread-2"}  # one each
    assert len(pack_nodes) == 1 and next(iter(pack_nodes)).startswith("pack-")  # all together
    assert node_of(kube, "nobody") == ""
    events = kube.list_events("default", api="events", reason="Scheduled")
    controllers = {e["regarding"]["name"]: e["reportingController"] for e in events}
    assert controllers["s0"] == "spreader" and controllers["k0"] == "packer"


def test_profile_options() -> None:
    assert parse_profile_option("gpu=/etc/policy/gpu.yaml") == ("gpu", "/etc/policy/gpu.yaml")
    assert parse_profile_option("plain=") == ("plain", "")
    for bad in ("no-equals", "=file.yaml", "Upper=x.yaml", "-dash=x.yaml"):
        with pytest.raises(ValueError):
            parse_profile_option(bad)


def test_duplicate_names_are_refused(tmp_path: Path) -> None:
    policy = write_policy(tmp_path, "p", "x", "LeastAllocated")
    with pytest.raises(PolicyError, match="more than once"):
        build_profiles("main", None, [("other", ""), ("other", policy)])
    with pytest.raises(PolicyError, match="both --policy and --profile"):
        build_profiles("main", policy, [("main", policy)])
    # --profile may give the main name its policy when --policy does not.
    assert [p.name for p in build_profiles("main", None, [("main", policy)])] == ["main"]


def test_bad_policy_file_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: extender/v1alpha1\nkind: Policy\nfilters: [{name: NoSuchPlugin}]\n")
    with pytest.raises(PolicyError, match="NoSuchPlugin"):
        build_profiles("main", str(bad))
