"""Events (events.k8s.io with a core fallback) and the PodScheduled condition: posted, never raising."""

from __future__ import annotations

import re

import pytest

from extender.kube import events


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
    """Make event posts fail; returns (the ApiClient to post with, the test client of that
    server, the pod "p" there).

    On the fake: a 404 (events.k8s.io not served), a 403 on events.k8s.io, or a 500 on
    every events request, injected for everybody. On a real server: "404" is a private
    kube-apiserver started with --runtime-config=events.k8s.io/v1=false (it answers the
    plain text "404 page not found"); "403" a user of its own whose RBAC allows core events
    only; "500" becomes a user with no events permission at all."""
    from extender.kube.client import build_api_client
    from tests.fakeapi.envtest import EnvtestControlPlane
    from tests.fakeapi.fixtures import start_envtest_handle
    from tests.fakeapi.rbac import create_user, rule

    cleanup = []

    def refuse(how: str):
        if apiserver.fake is not None:
            if how == "404":
                apiserver.fake.fail_next(1, status=404, path_regex=r"^/apis/events\.k8s\.io/")
            elif how == "403":
                apiserver.fake.deny(verb="create", resource="events", group="events.k8s.io")
            else:
                apiserver.fake.fail_next(1, status=500, path_regex=r"/events$")
            return api_client, apiserver.client, apiserver.client.get_pod("p")
        if how == "404":
            plane = EnvtestControlPlane(apiserver.plane.assets,
                                        extra_apiserver_args=["--runtime-config=events.k8s.io/v1=false"])
            cleanup.append(plane.stop)
            handle = start_envtest_handle(plane.start())
            cleanup.append(handle.client.close)
            client = build_api_client(kubeconfig=str(plane.kubeconfig))
            cleanup.append(client.close)
            return client, handle.client, handle.client.create_pod("p", cpu="100m")
        rules = [rule(["create"], ["events"])] if how == "403" else [rule(["get"], ["pods"])]
        user = create_user(apiserver.plane, apiserver.client, rules, prefix="events")
        cleanup.append(user.delete)
        user.wait_can(True, *(("create", "events") if how == "403" else ("get", "pods")))
        client = build_api_client(kubeconfig=str(user.kubeconfig))
        cleanup.append(client.close)
        return client, apiserver.client, apiserver.client.get_pod("p")

    yield refuse
    for step in reversed(cleanup):
        step()


@pytest.mark.parametrize("refusal", ["404", "403"])
def test_core_event_fallback(apiserver, refuse_events, pod, refusal: str) -> None:
    client, kube, pod = refuse_events(refusal)
    assert events.post_event(client, pod, reason="FailedScheduling", type="Warning",
                             message="0/1 nodes are available: 1 node(s) were unschedulable.",
                             reporting_controller="extender")
    (event,) = kube.list_events("default", reason="FailedScheduling")
    assert event["involvedObject"]["name"] == "p" and event["involvedObject"]["uid"] == pod["metadata"]["uid"]
    assert event["message"].startswith("0/1 nodes are available")
    assert event["source"] == {"component": "extender"} and event["count"] == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", event["firstTimestamp"])
    assert event["firstTimestamp"] == event["lastTimestamp"]
    if apiserver.fake is not None:
        (core_post,) = apiserver.fake.requests_matching("POST", r"^/api/v1/namespaces/default/events$")
        assert core_post.body["kind"] == "Event" and core_post.body["apiVersion"] == "v1"


def test_event_failure_returns_false(apiserver, refuse_events, pod) -> None:
    client, _, pod = refuse_events("500")
    assert events.post_event(client, pod, reason="Scheduled", message="m") is False
    assert _events(apiserver, "Scheduled") == []
