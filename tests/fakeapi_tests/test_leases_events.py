"""Leases (leader election) and Events (one storage behind two APIs)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.fakeapi import KubeApiError

LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
CORE_EVENTS = "/api/v1/namespaces/default/events"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


def _micro(dt: datetime | None = None) -> str:
    return (dt or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _lease(name: str = "extender", holder: str = "a") -> dict:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "acquireTime": _micro(),
            "renewTime": _micro(),
            "leaseTransitions": 0,
        },
    }


def test_lease_crud_and_conflicts(kube) -> None:
    created = kube.call("POST", LEASES, _lease())
    assert created["kind"] == "Lease" and created["metadata"]["uid"]
    with pytest.raises(KubeApiError) as err:
        kube.call("POST", LEASES, _lease(holder="b"))
    assert err.value.code == 409 and err.value.reason == "AlreadyExists"
    assert err.value.status["message"] == 'leases.coordination.k8s.io "extender" already exists'
    assert err.value.status["details"] == {
        "name": "extender",
        "group": "coordination.k8s.io",
        "kind": "leases",
    }

    renewed = dict(created, spec=dict(created["spec"], renewTime=_micro()))
    updated = kube.call("PUT", f"{LEASES}/extender", renewed)
    stale = dict(
        created, spec=dict(created["spec"], holderIdentity="b")
    )  # the other candidate's old copy
    with pytest.raises(KubeApiError) as err:
        kube.call("PUT", f"{LEASES}/extender", stale)
    assert err.value.code == 409 and err.value.reason == "Conflict"
    assert err.value.status["message"].startswith(
        'Operation cannot be fulfilled on leases.coordination.k8s.io "extender": the object has been modified'
    )
    assert (
        kube.get_lease("extender")["metadata"]["resourceVersion"]
        == updated["metadata"]["resourceVersion"]
    )
    reply = kube.call("DELETE", f"{LEASES}/extender")
    assert reply["status"] == "Success" and kube.get_lease("extender") is None


def test_lease_put_creates_when_missing_but_needs_a_version_to_update(kube) -> None:
    created = kube.request("PUT", f"{LEASES}/fresh", _lease("fresh"))
    assert created.status_code == 201
    resp = kube.request("PUT", f"{LEASES}/fresh", _lease("fresh", holder="b"))  # no resourceVersion
    assert resp.status_code == 422
    # kube-apiserver v1.36 names the resource, not the kind, and prints the value as 0.
    assert resp.json()["message"] == (
        'leases.coordination.k8s.io "fresh" is invalid: metadata.resourceVersion: '
        "Invalid value: 0: must be specified for an update"
    )
    assert resp.json()["details"]["kind"] == "leases"


def test_lease_micro_time_needs_six_fractional_digits(kube) -> None:
    """Go parses MicroTime with the layout 2006-01-02T15:04:05.000000Z07:00: python's
    isoformat() of a whole second ("...:05+00:00") is refused."""
    lease = _lease()
    lease["spec"]["renewTime"] = "2025-01-01T00:00:05+00:00"
    resp = kube.request("POST", LEASES, lease)
    assert resp.status_code == 400 and "parsing time" in resp.json()["message"]
    lease["spec"]["renewTime"] = "2025-01-01T00:00:05.000000+00:00"
    assert kube.request("POST", LEASES, lease).status_code == 201


def test_lease_validation(kube) -> None:
    lease = _lease()
    lease["spec"]["leaseDurationSeconds"] = 0
    resp = kube.request("POST", LEASES, lease)
    assert resp.status_code == 422
    assert (
        "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"
        in resp.json()["message"]
    )


def _new_event(name: str, note: str = "0/3 nodes are available") -> dict:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "eventTime": _micro(),
        "reportingController": "example.com/extender",
        "reportingInstance": "extender-0",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "type": "Warning",
        "note": note,
        "regarding": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": "default",
            "name": "p",
            "uid": "u1",
        },
    }


def test_events_written_through_one_api_are_read_through_the_other(kube) -> None:
    kube.call("POST", EVENTS, _new_event("p.1"))
    core = kube.list_events("default")
    assert len(core) == 1
    assert core[0]["message"] == "0/3 nodes are available"
    assert (
        core[0]["involvedObject"]["name"] == "p"
        and core[0]["reportingComponent"] == "example.com/extender"
    )
    new = kube.list_events("default", api="events.k8s.io")
    assert new[0]["note"] == "0/3 nodes are available" and new[0]["regarding"]["uid"] == "u1"
    assert kube.list_events("default", reason="FailedScheduling", involved_name="p") == core
    assert kube.list_events("default", reason="Scheduled") == []


def _core_event(name: str, namespace: str, reason: str, message: str, **fields: object) -> dict:
    """A core/v1 Event about pod ``namespace``/p, with ``fields`` beside the required ones."""
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "p"},
            "reason": reason, "message": message, **fields}


def test_core_event_create_and_patch(kube) -> None:
    body = _core_event("p.2", "default", "Scheduled", "Successfully assigned default/p to n1", type="Normal",
                       count=1, source={"component": "extender"}, firstTimestamp="2025-01-01T00:00:00Z",
                       lastTimestamp="2025-01-01T00:00:00Z")
    kube.call("POST", CORE_EVENTS, body)
    patched = kube.call(
        "PATCH",
        f"{CORE_EVENTS}/p.2",
        {"count": 2, "lastTimestamp": "2025-01-01T00:01:00Z"},
        content_type="application/strategic-merge-patch+json",
    )
    assert patched["count"] == 2
    new = kube.call("GET", f"{EVENTS}/p.2")
    assert new["deprecatedCount"] == 2 and new["note"].startswith("Successfully assigned")


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"eventTime": None}, "eventTime: Required value"),
        ({"reportingController": ""}, "reportingController: Required value"),
        ({"action": ""}, "action: Required value"),
        ({"type": "Error"}, "type: Invalid value"),
        ({"note": "x" * 1025}, 'message: Invalid value: "": can have at most 1024 characters'),
        ({"deprecatedCount": 3}, 'count: Invalid value: "": needs to be unset'),
        ({"deprecatedSource": {"component": "x"}}, 'source: Invalid value: "": needs to be unset'),
    ],
)
def test_events_k8s_io_validation(kube, change: dict, error: str) -> None:
    """Both APIs validate the internal Event: the message says `Event "bad"` (no group) and
    the paths are the core fields' (count, source), as kube-apiserver v1.36 answers."""
    body = {**_new_event("bad"), **change}
    resp = kube.request("POST", EVENTS, body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["message"].startswith('Event "bad" is invalid:')
    assert error in resp.json()["message"]
    assert resp.json()["details"]["kind"] == "Event" and "group" not in resp.json()["details"]


def test_core_event_namespace_must_match_involved_object(kube) -> None:
    resp = kube.request("POST", CORE_EVENTS, _core_event("x", "other", "R", "m"))
    assert resp.status_code == 422 and "involvedObject.namespace" in resp.json()["message"]
