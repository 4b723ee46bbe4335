"""Watches: list-then-watch, replay, 410, bookmarks, selector transitions, initial events."""

from __future__ import annotations

import threading

import pytest
from kubernetes import watch
from kubernetes.client import ApiException

from .expected import status
from .streams import RawWatch, types_and_names

COMPACTS = pytest.mark.requires_fake(
    "needs the fake's compact(): a real kube-apiserver serves watches from its watch cache, "
    "which etcd compaction does not shorten (the real 410 path runs on a private control plane "
    "in tests/reliability/test_real_faults.py)"
)
FAST_BOOKMARKS = pytest.mark.requires_fake(
    "sets the fake's bookmark interval below a second; a real kube-apiserver sends bookmarks "
    "about once a minute"
)


@pytest.fixture
def raw_watch(apiserver):
    opened: list[RawWatch] = []

    def open_watch(path: str, **params) -> RawWatch:
        w = RawWatch(apiserver.url, path, params, apiserver.token, apiserver.verify)
        opened.append(w)
        return w

    yield open_watch
    for w in opened:
        w.close()


def test_list_then_watch_sees_exactly_the_later_changes(kube, core_v1) -> None:
    kube.create_pod("a")
    kube.create_pod("b")
    listing = core_v1.list_namespaced_pod("default")
    kube.create_pod("c")
    kube.patch_pod("a", {"metadata": {"labels": {"x": "1"}}})
    kube.delete_pod("b")
    stream = watch.Watch().stream(
        core_v1.list_namespaced_pod,
        "default",
        resource_version=listing.metadata.resource_version,
        timeout_seconds=1,
    )
    events = [
        (e["type"], e["object"].metadata.name, int(e["object"].metadata.resource_version))
        for e in stream
    ]
    # A pod's deletion is recorded first (MODIFIED: deletionTimestamp, grace 0), then the
    # object goes (DELETED), even when it is not bound: the real server's two events.
    assert [(t, n) for t, n, _ in events] == [
        ("ADDED", "c"),
        ("MODIFIED", "a"),
        ("MODIFIED", "b"),
        ("DELETED", "b"),
    ]
    versions = [rv for _, _, rv in events]
    assert versions == sorted(versions) and versions[0] > int(listing.metadata.resource_version)


@pytest.mark.parametrize("rv", ["", "0"])
def test_watch_without_resource_version_starts_with_current_state(raw_watch, kube, rv: str) -> None:
    kube.create_pod("a")
    kube.create_pod("b")
    w = raw_watch("/api/v1/namespaces/default/pods", resourceVersion=rv, timeoutSeconds=5)
    w.wait_for(lambda ev: len(ev) >= 2)
    kube.create_pod("c")
    events = w.wait_for(lambda ev: len(ev) >= 3)
    assert types_and_names(events) == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]
    assert events[0]["object"]["kind"] == "Pod" and events[0]["object"]["apiVersion"] == "v1"


def test_deleted_event_carries_the_deletion_resource_version(raw_watch, kube) -> None:
    pod = kube.create_pod("a")
    w = raw_watch(
        "/api/v1/namespaces/default/pods",
        resourceVersion=pod["metadata"]["resourceVersion"],
        timeoutSeconds=5,
    )
    kube.delete_pod("a")
    marked, event = w.wait_for(lambda ev: len(ev) >= 2)
    assert marked["type"] == "MODIFIED" and marked["object"]["metadata"]["deletionTimestamp"]
    assert event["type"] == "DELETED"
    assert event["object"]["metadata"]["deletionGracePeriodSeconds"] == 0
    assert (
        int(event["object"]["metadata"]["resourceVersion"])
        > int(marked["object"]["metadata"]["resourceVersion"])
        > int(pod["metadata"]["resourceVersion"])
    )


@COMPACTS
def test_too_old_resource_version_gets_a_410_error_event(fake, raw_watch, kube) -> None:
    first = kube.create_pod("a")
    kube.create_pod("b")
    fake.compact()
    w = raw_watch(
        "/api/v1/namespaces/default/pods", resourceVersion=first["metadata"]["resourceVersion"]
    )
    w.wait_closed()
    assert w.status_code == 200  # the error comes as an event, after the headers
    assert len(w.events) == 1 and w.events[0]["type"] == "ERROR"
    current = fake.resource_version
    assert w.events[0]["object"] == status(
        410, f"too old resource version: {first['metadata']['resourceVersion']} ({current})", "Expired")
    assert w.error is None  # closed cleanly


@pytest.mark.requires_fake("sets the fake's history size (a real server's watch cache sizes itself)")
def test_bounded_history_window(fake, raw_watch, kube) -> None:
    fake.set_history_size(3)
    first = int(kube.create_pod("p0")["metadata"]["resourceVersion"])
    for i in range(1, 4):
        kube.create_pod(f"p{i}")
    w = raw_watch(
        "/api/v1/namespaces/default/pods", resourceVersion=first - 1
    )  # needs p0's event: evicted
    w.wait_closed()
    assert w.events[0]["object"]["code"] == 410
    ok = raw_watch("/api/v1/namespaces/default/pods", resourceVersion=first, timeoutSeconds=1)
    ok.wait_closed()
    assert types_and_names(ok.events) == [("ADDED", "p1"), ("ADDED", "p2"), ("ADDED", "p3")]


@COMPACTS
def test_python_client_watch_raises_410(fake, kube, core_v1) -> None:
    rv = kube.create_pod("a")["metadata"]["resourceVersion"]
    kube.create_pod("b")
    fake.compact()
    with pytest.raises(ApiException) as err:
        list(
            watch.Watch().stream(
                core_v1.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=2
            )
        )
    assert err.value.status == 410


@FAST_BOOKMARKS
def test_bookmarks_are_periodic_and_sent_before_timeout(fake, raw_watch, kube) -> None:
    fake.configure(bookmark_interval=0.25)
    rv = kube.create_pod("a")["metadata"]["resourceVersion"]
    w = raw_watch("/api/v1/pods", resourceVersion=rv, allowWatchBookmarks="true", timeoutSeconds=1)
    w.wait_closed()
    bookmarks = [e for e in w.events if e["type"] == "BOOKMARK"]
    assert len(bookmarks) >= 3 and w.events[-1]["type"] == "BOOKMARK"
    assert bookmarks[0]["object"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": rv},
    }
    plain = raw_watch("/api/v1/pods", resourceVersion=rv, timeoutSeconds=1)
    plain.wait_closed()
    assert plain.events == []


@FAST_BOOKMARKS
def test_python_client_tracks_bookmark_resource_version(fake, kube, core_v1) -> None:
    fake.configure(bookmark_interval=0.1)
    rv = kube.create_pod("a")["metadata"]["resourceVersion"]
    kube.create_node("n1")  # moves the global counter, not the pod history
    w = watch.Watch()
    types = [
        e["type"]
        for e in w.stream(
            core_v1.list_namespaced_pod,
            "default",
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=1,
        )
    ]
    assert set(types) == {"BOOKMARK"}
    assert int(w.resource_version) == fake.resource_version


def test_field_selector_watch_sees_binding_as_deleted(raw_watch, kube) -> None:
    """kube-apiserver's cacher: an object leaving the selection is a DELETED event."""
    kube.create_node("n1")
    rv = kube.create_pod("bound", node_name="n1")["metadata"]["resourceVersion"]
    unbound = raw_watch(
        "/api/v1/pods", fieldSelector="spec.nodeName=", resourceVersion=rv, timeoutSeconds=5
    )
    on_n1 = raw_watch(
        "/api/v1/pods", fieldSelector="spec.nodeName=n1", resourceVersion=rv, timeoutSeconds=5
    )
    pod = kube.create_pod("p")
    assert kube.bind_pod("p", "n1", uid=pod["metadata"]["uid"]).status_code == 201
    kube.patch_pod("p", {"metadata": {"labels": {"after": "bind"}}})
    events = unbound.wait_for(lambda ev: len(ev) >= 2)
    assert types_and_names(events) == [("ADDED", "p"), ("DELETED", "p")]
    gone = events[1]["object"]
    assert "nodeName" not in gone["spec"]  # the last state that matched...
    assert int(gone["metadata"]["resourceVersion"]) > int(
        events[0]["object"]["metadata"]["resourceVersion"]
    )
    events = on_n1.wait_for(lambda ev: len(ev) >= 2)
    assert types_and_names(events) == [("ADDED", "p"), ("MODIFIED", "p")]
    assert events[0]["object"]["spec"]["nodeName"] == "n1"


def test_label_selector_watch_transitions(raw_watch, kube) -> None:
    rv = kube.create_pod("p")["metadata"]["resourceVersion"]
    w = raw_watch(
        "/api/v1/namespaces/default/pods",
        labelSelector="app=web",
        resourceVersion=rv,
        timeoutSeconds=5,
    )
    kube.patch_pod("p", {"metadata": {"labels": {"app": "web"}}})
    kube.patch_pod("p", {"metadata": {"labels": {"app": "db"}}})
    kube.patch_pod("p", {"metadata": {"labels": {"app": "web"}}})
    kube.delete_pod("p")
    events = w.wait_for(lambda ev: len(ev) >= 5)
    assert types_and_names(events) == [
        ("ADDED", "p"),
        ("DELETED", "p"),
        ("ADDED", "p"),
        ("MODIFIED", "p"),  # marked for deletion
        ("DELETED", "p"),
    ]


def test_namespaced_watch_ignores_other_namespaces(raw_watch, kube) -> None:
    kube.create_namespace("other")
    rv = kube.create_pod("x")["metadata"]["resourceVersion"]
    w = raw_watch("/api/v1/namespaces/default/pods", resourceVersion=rv, timeoutSeconds=5)
    kube.create_pod("elsewhere", namespace="other")
    kube.create_pod("here")
    events = w.wait_for(lambda ev: len(ev) >= 1)
    assert types_and_names(events) == [("ADDED", "here")]


def test_send_initial_events_ends_with_a_marked_bookmark(raw_watch, kube) -> None:
    kube.create_pod("a")
    w = raw_watch(
        "/api/v1/namespaces/default/pods",
        sendInitialEvents="true",
        allowWatchBookmarks="true",
        resourceVersionMatch="NotOlderThan",
        timeoutSeconds=5,
    )
    events = w.wait_for(lambda ev: any(e["type"] == "BOOKMARK" for e in ev))
    assert events[0]["type"] == "ADDED"
    bookmark = next(e for e in events if e["type"] == "BOOKMARK")
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_future_resource_version(apiserver, raw_watch, kube) -> None:
    """A list at a resourceVersion the server has not reached fails with 504 after a wait
    (3 s on kube-apiserver); a watch from there does not fail: it waits for the version and
    then streams what follows it, or ends cleanly at its timeout (kube-apiserver v1.36)."""
    if apiserver.fake is not None:
        apiserver.fake.configure(too_large_rv_wait=0.1)
    current = int(kube.call("GET", "/api/v1/pods")["metadata"]["resourceVersion"])
    future = current + 10_000
    resp = kube.request("GET", "/api/v1/pods", params={"resourceVersion": future})
    assert resp.status_code == 504
    status = resp.json()
    assert status["reason"] == "Timeout"
    assert status["message"].startswith(f"Timeout: Too large resource version: {future}, current: ")
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"

    unreached = raw_watch("/api/v1/namespaces/default/pods", resourceVersion=future, timeoutSeconds=1)
    unreached.wait_closed(timeout=10)
    assert unreached.status_code == 200 and unreached.events == [] and unreached.error is None

    since = int(kube.create_pod("first")["metadata"]["resourceVersion"]) + 1
    w = raw_watch("/api/v1/namespaces/default/pods", resourceVersion=since, timeoutSeconds=5)
    created = [kube.create_pod(f"p{i}") for i in range(3)]
    after = [p["metadata"]["name"] for p in created if int(p["metadata"]["resourceVersion"]) > since]
    events = w.wait_for(lambda ev: len(ev) >= len(after))
    assert types_and_names(events) == [("ADDED", name) for name in after]


def test_future_resource_version_waits_for_the_write(apiserver, kube) -> None:
    """A list at a resourceVersion not yet written waits for it. The version is global to the
    server, so on a real one an unrelated write (a lease) may reach it before "b" does: what
    holds on both is that the list is served at or past the version asked, and holds "b"
    exactly when "b" was written at or before the version served."""
    rv = int(kube.create_pod("a")["metadata"]["resourceVersion"])
    written: list[dict] = []
    timer = threading.Timer(0.2, lambda: written.append(kube.create_pod("b")))
    timer.start()
    listing = kube.call(
        "GET", "/api/v1/namespaces/default/pods", params={"resourceVersion": rv + 1}
    )
    timer.join()
    served = int(listing["metadata"]["resourceVersion"])
    b_version = int(written[0]["metadata"]["resourceVersion"])
    assert served >= rv + 1
    expected = ["a", "b"] if b_version <= served else ["a"]
    assert [p["metadata"]["name"] for p in listing["items"]] == expected


def test_single_object_and_legacy_watch_paths(raw_watch, kube) -> None:
    """Only the legacy /watch/ path watches one object; ?watch=true on the object's own URL
    is a plain GET on kube-apiserver v1.36 (one JSON object, not a stream)."""
    rv = kube.create_pod("a")["metadata"]["resourceVersion"]
    kube.create_pod("b")
    plain = kube.request(
        "GET", "/api/v1/namespaces/default/pods/a", params={"watch": "true", "resourceVersion": rv}
    )
    assert plain.status_code == 200 and plain.json()["kind"] == "Pod"
    one = raw_watch("/api/v1/watch/namespaces/default/pods/a", resourceVersion=rv, timeoutSeconds=5)
    legacy = raw_watch(
        "/api/v1/watch/namespaces/default/pods", resourceVersion=rv, timeoutSeconds=5
    )
    kube.patch_pod("a", {"metadata": {"labels": {"x": "1"}}})
    assert types_and_names(one.wait_for(lambda ev: len(ev) >= 1)) == [("MODIFIED", "a")]
    assert types_and_names(legacy.wait_for(lambda ev: len(ev) >= 2)) == [
        ("ADDED", "b"),
        ("MODIFIED", "a"),
    ]


def test_timeout_ends_the_stream_cleanly(raw_watch) -> None:
    w = raw_watch("/api/v1/nodes", timeoutSeconds=1)
    w.wait_closed()
    assert w.error is None and w.headers["Transfer-Encoding"] == "chunked"


def test_watches_on_events_and_leases(raw_watch, kube) -> None:
    w = raw_watch("/apis/coordination.k8s.io/v1/namespaces/default/leases", timeoutSeconds=5)
    kube.call(
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "l"},
            "spec": {},
        },
    )
    event = w.wait_for(lambda ev: len(ev) >= 1)[0]
    assert (
        event["object"]["kind"] == "Lease"
        and event["object"]["apiVersion"] == "coordination.k8s.io/v1"
    )
