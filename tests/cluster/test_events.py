"""Events (events.k8s.io with a core fallback) and the PodScheduled condition: posted, never raising."""

from __future__ import annotations

import re

import pytest

from extender.cluster import events
from extender.cluster.kube_client import api_client_for
from tests.fakeapi.fixtures import requires_fake
from tests.helpers import free_port


@pytest.fixture
def pod(apiserver) -> dict:
    return apiserver.client.create_pod("p", cpu="100m")


def _events(apiserver, reason: str) -> list[dict]:
    return apiserver.client.list_events("default", reason=reason)


def test_event_posted_through_events_k8s_io(apiserver, api_client, pod) -> None:
    assert events.post_event(api_client, pod, reason="FailedScheduling", type="Warning",
                             message="0/3 nodes are available: 3 Insufficient cpu.",
                             reporting_controller="example.com/extender", reporting_instance="extender-0")
    (event,) = apiserver.client.list_events("default", api="events.k8s.io", reason="FailedScheduling")
    assert event["regarding"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "p",
                                  "uid": pod["metadata"]["uid"]}
    assert event["note"] == "0/3 nodes are available: 3 Insufficient cpu."
    assert event["type"] == "Warning" and event["action"] == "Scheduling"
    assert event["reportingController"] == "example.com/extender"
    assert event["reportingInstance"] == "extender-0"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event["eventTime"])
    assert event["metadata"]["name"].startswith("p.")
    if apiserver.fake is not None:
        assert apiserver.fake.requests_matching("POST", r"^/apis/events\.k8s\.io/v1/namespaces/default/events$")
        assert not apiserver.fake.requests_matching("POST", r"^/api/v1/namespaces/default/events$")


def test_pod_reference_may_be_a_plain_mapping(apiserver, api_client, pod) -> None:
    ref = {"namespace": "default", "name": "p", "uid": pod["metadata"]["uid"]}
    assert events.post_event(api_client, ref, reason="Scheduled", message="Successfully assigned default/p to n1")
    (event,) = _events(apiserver, "Scheduled")
    assert event["involvedObject"]["uid"] == pod["metadata"]["uid"] and event["type"] == "Normal"


def test_long_note_is_truncated_not_refused(apiserver, api_client, pod) -> None:
    assert events.post_event(api_client, pod, reason="FailedScheduling", message="x" * 5000, type="Warning")
    (event,) = _events(apiserver, "FailedScheduling")
    assert len(event["message"]) == 1024


@requires_fake
@pytest.mark.parametrize("refusal", ["404", "403"])
def test_core_event_fallback(apiserver, api_client, pod, refusal: str) -> None:
    fake = apiserver.fake
    if refusal == "404":
        fake.fail_next(1, status=404, path_regex=r"^/apis/events\.k8s\.io/")
    else:
        fake.deny(verb="create", resource="events", group="events.k8s.io")
    assert events.post_event(api_client, pod, reason="FailedScheduling", type="Warning",
                             message="0/1 nodes are available: 1 node(s) were unschedulable.",
                             reporting_controller="extender")
    (event,) = _events(apiserver, "FailedScheduling")
    assert event["involvedObject"]["name"] == "p" and event["involvedObject"]["uid"] == pod["metadata"]["uid"]
    assert event["message"].startswith("0/1 nodes are available")
    assert event["source"] == {"component": "extender"} and event["count"] == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", event["firstTimestamp"])
    assert event["firstTimestamp"] == event["lastTimestamp"]
    (core_post,) = fake.requests_matching("POST", r"^/api/v1/namespaces/default/events$")
    assert core_post.body["kind"] == "Event" and core_post.body["apiVersion"] == "v1"


@requires_fake
def test_event_failure_returns_false(apiserver, api_client, pod) -> None:
    apiserver.fake.fail_next(1, status=500, path_regex=r"/events$")
    assert events.post_event(api_client, pod, reason="Scheduled", message="m") is False


def test_event_to_unreachable_server_returns_false() -> None:
    client = api_client_for(f"http://127.0.0.1:{free_port()}")
    assert events.post_event(client, {"namespace": "default", "name": "p", "uid": "u"},
                             reason="Scheduled", message="m") is False
    assert events.set_pod_scheduled_condition(client, "default", "p", message="m") is False


def test_pod_scheduled_condition_patched(apiserver, api_client, pod) -> None:
    assert events.set_pod_scheduled_condition(api_client, "default", "p",
                                              message="0/2 nodes are available: 2 Insufficient cpu.")
    conditions = {c["type"]: c for c in apiserver.client.get_pod("p")["status"].get("conditions", [])}
    scheduled = conditions["PodScheduled"]
    assert scheduled["status"] == "False" and scheduled["reason"] == "Unschedulable"
    assert scheduled["message"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert scheduled.get("lastProbeTime") is None and scheduled["lastTransitionTime"]
    if apiserver.fake is not None:
        (patch,) = apiserver.fake.requests_matching("PATCH", r"^/api/v1/namespaces/default/pods/p/status$")
        assert patch.content_type == "application/strategic-merge-patch+json"
        (sent,) = patch.body["status"]["conditions"]
        assert sent["type"] == "PodScheduled" and sent["lastProbeTime"] is None


def test_condition_on_missing_pod_returns_false(apiserver, api_client) -> None:
    assert events.set_pod_scheduled_condition(api_client, "default", "missing", message="m") is False
