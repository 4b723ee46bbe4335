"""The Coscheduling PodGroup CRD in deploy/ holds every field the code reads and writes.

A structural CRD prunes unknown fields without an error, so a status key the code writes but
the schema lacks would vanish silently: each key `coscheduling_status` can produce is checked
against the schema, and each spec field the parser reads.
"""

from __future__ import annotations

from typing import Any

from extender.model import podgroups as pg

from . import one, render


def crd() -> dict[str, Any]:
    return one(render(""), "CustomResourceDefinition", "podgroups.scheduling.x-k8s.io")


def version() -> dict[str, Any]:
    (served,) = crd()["spec"]["versions"]
    return served


def test_group_names_and_status_subresource() -> None:
    spec = crd()["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["kind"], spec["names"]["plural"]) == (
        "scheduling.x-k8s.io", "Namespaced", "PodGroup", "podgroups")
    assert f"{spec['group']}/{version()['name']}" == pg.API_COSCHEDULING
    assert version()["served"] and version()["storage"] and version()["subresources"] == {"status": {}}


def test_spec_fields_are_the_ones_the_parser_reads() -> None:
    spec = version()["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(spec) == {"minMember", "minResources", "scheduleTimeoutSeconds"}
    assert (spec["minMember"]["type"], spec["minMember"]["minimum"]) == ("integer", 1)
    assert spec["minResources"]["additionalProperties"]["x-kubernetes-int-or-string"] is True
    raw = {"apiVersion": pg.API_COSCHEDULING, "metadata": {"name": "g", "namespace": "ns"},
           "spec": {"minMember": 2, "minResources": {"cpu": "2", "memory": 1024}, "scheduleTimeoutSeconds": 9}}
    group = pg.parse_pod_group(raw)
    assert (group.min_count, group.timeout, group.min_resources) == (2, 9.0, {"cpu": 2000, "memory": 1024})


def test_every_status_key_the_code_writes_survives_pruning() -> None:
    schema = version()["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    raw = {"apiVersion": pg.API_COSCHEDULING, "metadata": {"name": "g", "namespace": "ns"},
           "spec": {"minMember": 2}}
    written: set[str] = set()
    for counts in (pg.MemberCounts(1), pg.MemberCounts(2, running=2, occupied_by="ns/job"),
                   pg.MemberCounts(2, succeeded=2), pg.MemberCounts(2, running=1, failed=1)):
        patch = pg.coscheduling_status(raw, counts)
        assert patch is not None
        written |= set(patch["status"])
    assert written == {"phase", "occupiedBy", "running", "succeeded", "failed"}
    assert written <= set(schema)
