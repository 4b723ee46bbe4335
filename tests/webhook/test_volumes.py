"""The volume plugins listed in a webhook policy: /filter reasons and /bind's volume reservation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from flask.testing import FlaskClient

from extender.cluster.snapshot import read_snapshot
from extender.settings import Settings
from extender.webhook.runtime import Runtime
from tests.explain.test_volumes import VOLUMES

POLICY = {"apiVersion": "extender/v1alpha1", "kind": "Policy",
          "filters": [{"name": "VolumeRestrictions"}, {"name": "NodeVolumeLimits"}, {"name": "VolumeBinding"},
                      {"name": "VolumeZone"}]}
AFFINITY = "node(s) didn't match PersistentVolume's node affinity"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The volumes snapshot and policy (``runtime`` and ``client`` are tests/conftest.py's)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    return Settings(source="snapshot", snapshot=str(VOLUMES), policy=str(policy))


def pod(name: str) -> dict[str, Any]:
    return next(p for p in read_snapshot(VOLUMES).pods if p["metadata"]["name"] == name)


def test_filter_reports_volume_reasons_as_unresolvable(client: FlaskClient) -> None:
    body = {"Pod": pod("pinned-app"), "NodeNames": ["node-1", "node-2", "node-3"]}
    reply = client.post("/filter", json=body).get_json()
    assert reply["NodeNames"] == ["node-2"]
    assert reply["FailedAndUnresolvableNodes"] == {"node-1": AFFINITY, "node-3": AFFINITY}
    lost = client.post("/filter", json={"Pod": pod("lost"), "NodeNames": ["node-1"]}).get_json()
    assert lost["FailedAndUnresolvableNodes"] == {"node-1": 'persistentvolumeclaim "nope" not found'}


def test_bind_reserves_the_volume_in_the_snapshot_cluster(client: FlaskClient, runtime: Runtime) -> None:
    raw = pod("db-0")
    meta = raw["metadata"]
    args = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": "node-3"}
    assert client.post("/bind", json=args).get_json() == {"Error": ""}
    volume = runtime.state.volumes.volume("pv-3")
    assert (volume.claim_ref.name, volume.phase) == ("data-0", "Bound")
    assert runtime.state.volumes.claim("default", "data-0").volume_name == "pv-3"
    # The next pod's claim cannot have pv-3 any more: node-3 is refused at /filter, and /bind's
    # guard (the policy's filters again) refuses it too.
    second = pod("db-1")
    reply = client.post("/filter", json={"Pod": second, "NodeNames": ["node-1", "node-3"]}).get_json()
    assert reply["NodeNames"] == ["node-1"]
    refused = client.post("/bind", json={**args, "PodName": "db-1", "PodUID": second["metadata"]["uid"]}).get_json()
    assert refused["Error"] == ("node node-3 does not pass the policy for pod default/db-1: "
                                "node(s) didn't find available persistent volumes to bind")
