"""Events (events.k8s.io with a core fallback) and the PodScheduled condition: posted, never raising."""

from __future__ import annotations

import re

import pytest

from extender.cluster import events


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


@pytest.fixture
def refuse_events(apiserver, api_client):
    """Make event posts fail; returns the ApiClient to post with.

    On the fake: a 404 (events.k8s.io not served), a 403 on events.k8s.io, or a 500 on
    every events request, injected for everybody. On a real server: a user of its own whose
    RBAC lacks the refused API groups ("403"; "500" becomes "no events permission at all").
    A kube-apiserver that does not serve events.k8s.io needs its own flags, so "404" is
    fake-only."""
    from extender.cluster.kube_client import build_api_client
    from tests.fakeapi.rbac import create_user, rule

    made = []

    def refuse(how: str):
        if apiserver.fake is not None:
            if how == "404":
                apiserver.fake.fail_next(1, status=404, path_regex=r"^/apis/events\.k8s\.io/")
            elif how == "403":
                apiserver.fake.deny(verb="create", resource="events", group="events.k8s.io")
            else:
                apiserver.fake.fail_next(1, status=500, path_regex=r"/events$")
            return api_client
        if how == "404":
            pytest.skip("a real kube-apiserver serves events.k8s.io/v1 unless started with "
                        "--runtime-config=events.k8s.io/v1=false; the 404 fallback runs on the fake")
        rules = [rule(["create"], ["events"])] if how == "403" else [rule(["get"], ["pods"])]
        user = create_user(apiserver.plane, apiserver.client, rules, prefix="events")
        user.wait_can(True, *(("create", "events") if how == "403" else ("get", "pods")))
        client = build_api_client(kubeconfig=str(user.kubeconfig))
        made.append((user, client))
        return client

    yield refuse
    for user, client in made:
        client.close()
        user.delete()


@pytest.mark.parametrize("refusal", ["404", "403"])
def test_core_event_fallback(apiserver, refuse_events, pod, refusal: str) -> None:
    client = refuse_events(refusal)
    assert events.post_event(client, pod, reason="FailedScheduling", type="Warning",
                             message="0/1 nodes are available: 1 node(s) were unschedulable.",
                             reporting_controller="extender")
    (event,) = _events(apiserver, "FailedScheduling")
    assert event["involvedObject"]["name"] == "p" and event["involvedObject"]["uid"] == pod["metadata"]["uid"]
    assert event["message"].startswith("0/1 nodes are available")
    assert event["source"] == {"component": "extender"} and event["count"] == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", event["firstTimestamp"])
    assert event["firstTimestamp"] == event["lastTimestamp"]
    if apiserver.fake is not None:
        (core_post,) = apiserver.fake.requests_matching("POST", r"^/api/v1/namespaces/default/events$")
        assert core_post.body["kind"] == "Event" and core_post.body["apiVersion"] == "v1"


def test_event_failure_returns_false(apiserver, refuse_events, pod) -> None:
    client = refuse_events("500")
    assert events.post_event(client, pod, reason="Scheduled", message="m") is False
    assert _events(apiserver, "Scheduled") == []
