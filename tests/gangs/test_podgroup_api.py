"""Pod groups as kube-apiserver v1.36.3 serves them with the gang gates on, and as the fake does.

Every test runs twice: against the fake API server, and against a real etcd + kube-apiserver
started with `--feature-gates=GenericWorkload=true,GangScheduling=true,
TopologyAwareWorkloadScheduling=true --runtime-config=scheduling.k8s.io/v1alpha2=true`, which is
skipped, saying so, without the envtest binaries (KUBEBUILDER_ASSETS; CI builds none). Checked:
the objects the server accepts and returns parse into the internal notion, what it refuses the
parser refuses, the status patches we build are kept as written (nothing pruned), and the
deploy/ CRD serves Coscheduling's PodGroup. The same expectations on both servers keep the fake
honest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from extender.model import podgroups as pg
from tests.fakeapi.client import KubeTestClient
from tests.gangs.servers import COSCHEDULING, SERVERS, gang_apiserver

V1ALPHA2 = "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups"
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture(scope="module", params=SERVERS)
def client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeTestClient]:
    with gang_apiserver(request.param, tmp_path_factory.mktemp("fakeapi")) as handle:
        yield handle.client


def gang(name: str, min_count: Any = 3, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": pg.API_V1ALPHA2, "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, **spec}}


def cosched(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": pg.API_COSCHEDULING, "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


def pod(name: str, group: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulingGroup": group, "containers": [{"name": "c", "image": "x"}]}}


def test_discovery(client: KubeTestClient) -> None:
    group = client.call("GET", "/apis/scheduling.k8s.io")
    assert [v["version"] for v in group["versions"]] == ["v1", "v1alpha2"]
    assert group["preferredVersion"]["version"] == "v1"
    listed = {r["name"]: r for r in client.call("GET", "/apis/scheduling.k8s.io/v1alpha2")["resources"]}
    assert {"podgroups", "podgroups/status", "workloads"} <= set(listed)
    assert sorted(listed["podgroups/status"]["verbs"]) == ["get", "patch", "update"]
    crd = {r["name"]: r for r in client.call("GET", "/apis/scheduling.x-k8s.io/v1alpha1")["resources"]}
    assert crd["podgroups"]["shortNames"] == ["pg", "pgs"] and "podgroups/status" in crd


def test_a_group_and_a_member_as_the_server_returns_them(client: KubeTestClient) -> None:
    returned = client.call("POST", V1ALPHA2, gang("pg1", schedulingConstraints={"topology": [{"key": "zone"}]},
                                                 unknownField=1))
    assert returned["spec"] == {"podGroupTemplateRef": None, "schedulingPolicy": {"gang": {"minCount": 3}},
                                "schedulingConstraints": {"topology": [{"key": "zone"}]}, "disruptionMode": "Pod"}
    assert returned["metadata"]["finalizers"] == ["scheduling.k8s.io/podgroup-protection"]
    assert "generation" not in returned["metadata"] and returned["status"] == {}
    group = pg.parse_pod_group(returned)
    assert (group.key, group.policy, group.min_count, group.topology_keys, group.uid) == (
        pg.GroupKey(pg.API_V1ALPHA2, "default", "pg1"), pg.GANG, 3, ("zone",), returned["metadata"]["uid"])
    member = client.call("POST", PODS, pod("p1", {"podGroupName": "pg1"}))
    assert pg.group_key_of(member) == group.key
    items = client.call("GET", V1ALPHA2)["items"]
    assert [pg.parse_pod_group(item, pg.API_V1ALPHA2).key for item in items] == [group.key]


REFUSED = [
    (V1ALPHA2, gang("a", 0), 422, "spec.schedulingPolicy.gang.minCount: Required value"),
    (V1ALPHA2, gang("b", -1), 422,
     "spec.schedulingPolicy.gang.minCount: Invalid value: -1: must be greater than or equal to 1"),
    (V1ALPHA2, {**gang("c"), "spec": {"schedulingPolicy": {}}}, 422,
     'spec.schedulingPolicy: Invalid value: "": must specify one of: `basic`, `gang`'),
    (V1ALPHA2, {**gang("d"), "spec": {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}}}, 422,
     'spec.schedulingPolicy: Invalid value: "{basic, gang}": must specify exactly one of: `basic`, `gang`'),
    (V1ALPHA2, gang("e", schedulingConstraints={"topology": [{"key": "a"}, {"key": "b"}]}), 422,
     "spec.schedulingConstraints.topology: Too many: 2: must have at most 1 item"),
    (V1ALPHA2, gang("f", schedulingConstraints={"topology": [{"key": ""}]}), 422,
     "spec.schedulingConstraints.topology[0].key: Required value"),
    (V1ALPHA2, gang("g", podGroupTemplateRef={"workload": {"workloadName": "w", "podGroupTemplateName": "t"}}),
     403, 'is forbidden: PodGroup rejected: Workload "w" not found'),
    (COSCHEDULING, cosched("h", minMember=0), 422,
     "spec.minMember: Invalid value: 0: spec.minMember in body should be greater than or equal to 1"),
    (COSCHEDULING, cosched("i", minMember="2"), 422,
     'spec.minMember: Invalid value: "string": spec.minMember in body must be of type integer: "string"'),
    (COSCHEDULING, cosched("j", minResources={"cpu": "lots"}), 422,
     'spec.minResources.cpu: Invalid value: "lots": spec.minResources.cpu in body should match'),
    (PODS, pod("k", {}), 422, "spec.schedulingGroup.podGroupName: Invalid value: null: must specify one of: "
                              "`podGroupName`"),
    (PODS, pod("l", {"podGroupName": "Bad_Name"}), 422,
     'spec.schedulingGroup.podGroupName: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain'),
]


@pytest.mark.parametrize(("path", "body", "code", "message"), REFUSED, ids=[b["metadata"]["name"] for _, b, _, _ in REFUSED])
def test_what_the_server_refuses(client: KubeTestClient, path: str, body: dict[str, Any], code: int,
                                 message: str) -> None:
    response = client.request("POST", path, body)
    assert response.status_code == code and message in response.json()["message"], response.json()["message"]
    if path != PODS and code == 422:  # and so does the parser
        with pytest.raises(pg.InvalidObject):
            pg.parse_pod_group({**body, "metadata": {"name": "x", "namespace": "default"}})


def test_the_spec_is_immutable_and_a_member_stays_in_its_group(client: KubeTestClient) -> None:
    client.call("POST", V1ALPHA2, gang("frozen"))
    response = client.request("PATCH", f"{V1ALPHA2}/frozen", {"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}},
                              content_type="application/merge-patch+json")
    assert response.status_code == 422
    assert "spec.schedulingPolicy: Invalid value: null: field is immutable" in response.json()["message"]
    client.call("POST", PODS, pod("moved", {"podGroupName": "frozen"}))
    response = client.request("PATCH", f"{PODS}/moved", {"spec": {"schedulingGroup": {"podGroupName": "other"}}},
                              content_type="application/merge-patch+json")
    assert response.status_code == 422


def test_deleting_a_group_leaves_it_being_deleted(client: KubeTestClient) -> None:
    client.call("POST", V1ALPHA2, gang("gone"))
    client.call("DELETE", f"{V1ALPHA2}/gone")
    kept = client.call("GET", f"{V1ALPHA2}/gone")
    assert kept["metadata"]["deletionTimestamp"]  # until a controller drops the protection finalizer
    client.call("PATCH", f"{V1ALPHA2}/gone", {"metadata": {"finalizers": None}},
                content_type="application/merge-patch+json")
    assert client.request("GET", f"{V1ALPHA2}/gone").status_code == 404


@pytest.mark.parametrize("content_type", ["application/strategic-merge-patch+json", "application/merge-patch+json"])
def test_the_scheduled_condition_patch_is_kept_as_written(client: KubeTestClient, content_type: str) -> None:
    name = "cond-" + content_type.split("/")[1].split("-")[0]
    current = client.call("POST", V1ALPHA2, gang(name))
    for reason in (pg.REASON_UNSCHEDULABLE, pg.REASON_SCHEDULED):
        patch = pg.scheduled_condition_patch(current, reason, f"outcome {reason}", "2026-12-01T15:00:00Z")
        assert patch is not None
        current = client.call("PATCH", f"{V1ALPHA2}/{name}/status", patch, content_type=content_type)
        assert current["status"] == patch["status"]
    assert pg.scheduled_condition_patch(current, pg.REASON_UNSCHEDULABLE, "later", "2026-12-01T16:00:00Z") is None


def test_coscheduling_groups_and_their_status(client: KubeTestClient) -> None:
    created = client.call("POST", COSCHEDULING, cosched("job", minMember=2, scheduleTimeoutSeconds=30, extra=1,
                                                        minResources={"cpu": "2", "memory": "1Gi"}))
    assert created["spec"] == {"minMember": 2, "scheduleTimeoutSeconds": 30,
                               "minResources": {"cpu": "2", "memory": "1Gi"}}  # `extra` pruned
    assert created["metadata"]["generation"] == 1 and "status" not in created
    group = pg.parse_pod_group(created)
    assert (group.min_count, group.timeout, group.min_resources) == (2, 30.0, {"cpu": 2000, "memory": 2**30})
    patch = pg.coscheduling_status(created, pg.MemberCounts(2, running=2, occupied_by="default/job"))
    assert patch is not None
    kept = client.call("PATCH", f"{COSCHEDULING}/job/status", patch, content_type="application/merge-patch+json")
    assert kept["status"] == patch["status"] == {"phase": "Running", "occupiedBy": "default/job",
                                                 "running": 2, "succeeded": 0, "failed": 0}
    # The `scheduled` count upstream removed is pruned; custom resources take no strategic merge patch.
    kept = client.call("PATCH", f"{COSCHEDULING}/job/status", {"status": {"scheduled": 2}},
                       content_type="application/merge-patch+json")
    assert "scheduled" not in kept["status"]
    response = client.request("PATCH", f"{COSCHEDULING}/job/status", {"status": {"phase": "Pending"}},
                              content_type="application/strategic-merge-patch+json")
    assert response.status_code == 415
