"""KubeBinder: the Binding subresource, the assumption it records, and every refusal's message."""

from __future__ import annotations

import pytest

from extender.cluster.state import ClusterState
from extender.errors import ClusterError, ConflictError, NotFoundError
from extender.kube.binder import KubeBinder
from tests.fakeapi.fixtures import fake_only
from tests.helpers import wait_for


@pytest.fixture
def synced(apiserver, make_source):
    """A node n1, a synced state and a binder on it."""
    apiserver.client.create_node("n1", cpu="4")
    state = ClusterState()
    source = make_source(state)
    assert source.wait_synced(5)
    return state, KubeBinder(source.api_client, state)


def _created(apiserver, state: ClusterState, name: str, **options) -> dict:
    pod = apiserver.client.create_pod(name, cpu="250m", **options)
    wait_for(lambda: state.pod(f"default/{name}"), message=f"pod {name} in the state")
    return pod


def test_bind_success_sends_uid_and_assumes(apiserver, synced) -> None:
    state, binder = synced
    pod = _created(apiserver, state, "p")
    uid = pod["metadata"]["uid"]
    binder.bind("default", "p", uid, "n1", annotations={"example.com/device": "gpu-0"})
    record = state.pod("default/p")
    assert record.node_name == "n1"  # counted at once, assumed or already confirmed by the watch
    assert state.node_info("n1").requested["cpu"] == 250
    bound = apiserver.client.get_pod("p")
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["metadata"]["annotations"]["example.com/device"] == "gpu-0"
    wait_for(lambda: not state.pod("default/p").assumed, message="watch confirms the bind")
    assert state.assumed_keys() == []
    if apiserver.fake is not None:
        (request,) = apiserver.fake.requests_matching("POST", r"/binding$")
        assert request.path == "/api/v1/namespaces/default/pods/p/binding"
        assert request.body == {
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "p", "namespace": "default", "uid": uid,
                         "annotations": {"example.com/device": "gpu-0"}},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
        }


def test_uid_mismatch(apiserver, synced) -> None:
    state, binder = synced
    _created(apiserver, state, "p")
    with pytest.raises(ConflictError, match=r"^pod default/p was recreated \(UID mismatch\)$") as caught:
        binder.bind("default", "p", "00000000-0000-0000-0000-000000000000", "n1")
    assert caught.value.status == 409 and not caught.value.retryable
    assert state.pod("default/p").node_name == "" and state.assumed_keys() == []


def test_already_assigned(apiserver, synced) -> None:
    state, binder = synced
    pod = _created(apiserver, state, "p", node_name="n1")
    with pytest.raises(ConflictError, match=r"^pod default/p is already assigned to node n1$"):
        binder.bind("default", "p", pod["metadata"]["uid"], "n2")


def test_being_deleted(apiserver, synced) -> None:
    state, binder = synced
    pod = _created(apiserver, state, "p", finalizers=["example.com/hold"])
    kube = apiserver.client
    try:
        kube.delete_pod("p")
        wait_for(lambda: state.pod("default/p").deleting, message="deletionTimestamp")
        with pytest.raises(ConflictError, match=r"^pod default/p is being deleted$"):
            binder.bind("default", "p", pod["metadata"]["uid"], "n1")
    finally:
        kube.patch_pod("p", {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")


def test_scheduling_gates(apiserver, synced) -> None:
    state, binder = synced
    pod = _created(apiserver, state, "p", scheduling_gates=["example.com/wait"])
    with pytest.raises(ConflictError, match=r"^pod default/p still has scheduling gates$"):
        binder.bind("default", "p", pod["metadata"]["uid"], "n1")


def test_not_found(synced) -> None:
    _state, binder = synced
    with pytest.raises(NotFoundError, match=r"^pod default/missing not found$") as caught:
        binder.bind("default", "missing", "", "n1")
    assert caught.value.status == 404 and caught.value.reason == "NotFound"


@fake_only("injects 500 and 429 replies to a bind, which a real server does not give on demand")
@pytest.mark.parametrize("status", [500, 429])
def test_server_errors_are_retryable(apiserver, synced, status: int) -> None:
    state, binder = synced
    pod = _created(apiserver, state, "p")
    apiserver.fake.fail_next(1, status=status, path_regex=r"/binding$")
    with pytest.raises(ClusterError) as caught:
        binder.bind("default", "p", pod["metadata"]["uid"], "n1")
    error = caught.value
    assert type(error) is ClusterError and error.status == status and error.retryable
    assert str(error).startswith(f"binding pod default/p to node n1 failed: {status}")
    assert state.pod("default/p").node_name == "" and state.assumed_keys() == []
    binder.bind("default", "p", pod["metadata"]["uid"], "n1")  # the retry works
    assert apiserver.fake.binding_count("default", "p") == 1


def test_unreachable_server_is_retryable() -> None:
    from extender.kube.client import api_client_for
    from tests.helpers import free_port

    binder = KubeBinder(api_client_for(f"http://127.0.0.1:{free_port()}"), ClusterState())
    with pytest.raises(ClusterError, match="cannot reach the API server") as caught:
        binder.bind("default", "p", "u", "n1")
    assert caught.value.status is None and caught.value.retryable


def test_bind_confirmed_by_the_watch_first_is_not_assumed_again() -> None:
    """The watch may deliver the bound pod before the binder reads its reply; assuming it then
    would let expire_assumed() unbind a pod that really is on the node."""
    clock = [0.0]
    state = ClusterState(assume_ttl=1.0, clock=lambda: clock[0])
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
           "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    state.upsert_pod(pod)
    state.assume("default/p", "n1", uid="u1")
    assert not state.pod("default/p").assumed and state.assumed_keys() == []
    clock[0] = 5.0
    assert state.expire_assumed() == []
    assert state.pod("default/p").node_name == "n1"
