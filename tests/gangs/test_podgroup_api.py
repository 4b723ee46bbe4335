"""Pod groups as a real kube-apiserver v1.36.3 serves them, with the gang gates on.

Skipped, saying so, without the envtest binaries (KUBEBUILDER_ASSETS); CI never builds them.
What is checked: the objects the server accepts and returns parse into the internal notion,
the status patches we build are accepted and kept as written (nothing pruned), and the
deploy/ CRD serves Coscheduling's PodGroup.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.model import podgroups as pg
from tests.fakeapi.client import KubeTestClient
from tests.fakeapi.envtest import EnvtestControlPlane, find_assets

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "deploy" / "components" / "podgroup-crd" / "scheduling.x-k8s.io_podgroups.yaml"
GATES = ("--feature-gates=GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true",
         "--runtime-config=scheduling.k8s.io/v1alpha2=true")
V1ALPHA2 = "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups"
COSCHEDULING = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"

pytestmark = pytest.mark.skipif(find_assets() is None,
                                reason="needs etcd and kube-apiserver v1.36 (KUBEBUILDER_ASSETS); CI builds none")


@pytest.fixture(scope="module")
def client() -> Iterator[KubeTestClient]:
    assets = find_assets()
    assert assets is not None
    plane = EnvtestControlPlane(assets, extra_apiserver_args=GATES).start()
    try:
        api = KubeTestClient(plane.url, token=plane.token, verify=str(plane.ca_file))
        yield api
        api.close()
    finally:
        plane.stop()


def create(client: KubeTestClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    return client.call("POST", path, body)


def gang(name: str, min_count: int = 3, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": pg.API_V1ALPHA2, "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, **spec}}


def test_a_group_and_a_member_as_the_server_returns_them(client: KubeTestClient) -> None:
    returned = create(client, V1ALPHA2, gang("pg1", schedulingConstraints={"topology": [{"key": "zone"}]}))
    group = pg.parse_pod_group(returned)
    assert (group.key, group.policy, group.min_count, group.topology_keys) == (
        pg.GroupKey(pg.API_V1ALPHA2, "default", "pg1"), pg.GANG, 3, ("zone",))
    assert group.uid == returned["metadata"]["uid"]
    pod = create(client, "/api/v1/namespaces/default/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
        "spec": {"schedulingGroup": {"podGroupName": "pg1"}, "containers": [{"name": "c", "image": "x"}]}})
    assert pg.group_key_of(pod) == group.key
    items = client.call("GET", V1ALPHA2)["items"]
    assert [pg.parse_pod_group(item, pg.API_V1ALPHA2).key for item in items] == [group.key]


def test_what_the_server_refuses_the_parser_refuses(client: KubeTestClient) -> None:
    for policy in ({"gang": {"minCount": 0}}, {}, {"basic": {}, "gang": {"minCount": 2}}):
        body = gang("bad")
        body["spec"]["schedulingPolicy"] = policy
        assert client.request("POST", V1ALPHA2, body).status_code == 422, policy
        with pytest.raises(pg.InvalidObject):
            pg.parse_pod_group({**body, "metadata": {"name": "bad", "namespace": "default"}})


@pytest.mark.parametrize("content_type", ["application/strategic-merge-patch+json", "application/merge-patch+json"])
def test_the_scheduled_condition_patch_is_kept_as_written(client: KubeTestClient, content_type: str) -> None:
    name = "cond-" + content_type.split("/")[1].split("-")[0]
    current = create(client, V1ALPHA2, gang(name))
    for reason in (pg.REASON_UNSCHEDULABLE, pg.REASON_SCHEDULED):
        patch = pg.scheduled_condition_patch(current, reason, f"outcome {reason}", "2026-12-01T15:00:00Z")
        assert patch is not None
        current = client.call("PATCH", f"{V1ALPHA2}/{name}/status", patch, content_type=content_type)
        assert current["status"] == patch["status"]
    assert pg.scheduled_condition_patch(current, pg.REASON_UNSCHEDULABLE, "later", "2026-12-01T16:00:00Z") is None


def wait_served(client: KubeTestClient, path: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while client.request("GET", path).status_code != 200:
        assert time.monotonic() < deadline, f"{path} not served after {timeout}s"
        time.sleep(0.2)


def test_the_deployed_crd_serves_coscheduling_groups_and_keeps_their_status(client: KubeTestClient) -> None:
    create(client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(CRD_FILE.read_text()))
    wait_served(client, COSCHEDULING)
    body = {"apiVersion": pg.API_COSCHEDULING, "kind": "PodGroup", "metadata": {"name": "job"},
            "spec": {"minMember": 2, "minResources": {"cpu": "2", "memory": "1Gi"}, "scheduleTimeoutSeconds": 30}}
    created = create(client, COSCHEDULING, body)
    group = pg.parse_pod_group(created)
    assert (group.min_count, group.timeout, group.min_resources) == (2, 30.0, {"cpu": 2000, "memory": 2**30})
    refused = client.request("POST", COSCHEDULING, {**body, "metadata": {"name": "zero"}, "spec": {"minMember": 0}})
    assert refused.status_code == 422
    patch = pg.coscheduling_status(created, pg.MemberCounts(2, running=2, occupied_by="default/job"))
    assert patch is not None
    kept = client.call("PATCH", f"{COSCHEDULING}/job/status", patch, content_type="application/merge-patch+json")
    assert kept["status"] == patch["status"] == {"phase": "Running", "occupiedBy": "default/job",
                                                 "running": 2, "succeeded": 0, "failed": 0}
