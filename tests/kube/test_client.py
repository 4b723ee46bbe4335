"""Client construction and raw JSON requests: configuration sources and error mapping."""

from __future__ import annotations

import logging

import pytest

from extender.errors import ClusterError, ConflictError, GoneError, NotFoundError
from extender.kube import client as kube_client
from tests.fakeapi.fixtures import fake_only


def test_cluster_configured_sources(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert not kube_client.cluster_configured()
    (tmp_path / "config").write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    assert kube_client.cluster_configured()
    monkeypatch.delenv("KUBECONFIG")
    assert not kube_client.cluster_configured()  # ~/.kube/config absent
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert kube_client.cluster_configured()


def test_missing_kubeconfig_is_a_cluster_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ClusterError, match="no kubeconfig found"):
        kube_client.build_api_client(kubeconfig=str(tmp_path / "nope"))


def test_a_pod_without_a_token_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """In a pod (KUBERNETES_SERVICE_HOST set) whose token is not mounted (automountServiceAccountToken:
    false), the error names the token and the fix, not "no kubeconfig found" and "not in a cluster"."""
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(kube_client, "_SERVICE_ACCOUNT_TOKEN", str(tmp_path / "token"))
    with pytest.raises(ClusterError) as caught:
        kube_client.build_api_client()
    message = str(caught.value)
    assert "no ServiceAccount token" in message and str(tmp_path / "token") in message
    assert "automountServiceAccountToken" in message and "not running in a cluster" not in message


def test_unknown_context_is_a_cluster_error(apiserver) -> None:
    with pytest.raises(ClusterError, match="cannot load cluster configuration"):
        kube_client.build_api_client(kubeconfig=str(apiserver.kubeconfig), context="no-such-context")


def test_request_json_reads_raw_replies(apiserver, api_client) -> None:
    apiserver.client.create_node("n1")
    reply = kube_client.request_json(api_client, "GET", "/api/v1/nodes", query={"limit": 10})
    assert [n["metadata"]["name"] for n in reply["items"]] == ["n1"]
    assert isinstance(reply["items"][0], dict)  # plain dicts, never client model objects


def test_not_found_keeps_status_reason_and_message(api_client) -> None:
    with pytest.raises(NotFoundError) as caught:
        kube_client.request_json(api_client, "GET", "/api/v1/namespaces/default/pods/nope")
    error = caught.value
    assert error.status == 404 and error.reason == "NotFound"
    assert 'pods "nope" not found' in str(error) and error.server_message == 'pods "nope" not found'


def test_conflict(apiserver, api_client) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "twice"}}
    kube_client.request_json(api_client, "POST", "/api/v1/namespaces", body=body)
    with pytest.raises(ConflictError) as caught:
        kube_client.request_json(api_client, "POST", "/api/v1/namespaces", body=body)
    assert caught.value.status == 409 and caught.value.reason == "AlreadyExists"


@fake_only("injects 410 and 429 (Retry-After: 7) replies to a plain list, which a real server does not give on demand")
def test_gone_and_retry_after(apiserver, api_client) -> None:
    apiserver.fake.fail_next(1, status=410, path_regex="^/api/v1/nodes")
    with pytest.raises(GoneError):
        kube_client.request_json(api_client, "GET", "/api/v1/nodes")
    apiserver.fake.fail_next(1, status=429, path_regex="^/api/v1/nodes", retry_after=7)
    with pytest.raises(ClusterError) as caught:
        kube_client.request_json(api_client, "GET", "/api/v1/nodes")
    assert caught.value.status == 429 and caught.value.retryable and caught.value.retry_after == 7.0
    assert len(apiserver.fake.requests_matching("GET", "^/api/v1/nodes$")) == 2  # no hidden retries


def test_token_never_logged(apiserver, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = kube_client.build_api_client(kubeconfig=str(apiserver.kubeconfig))
    try:
        kube_client.request_json(client, "GET", "/api/v1/nodes")
        with pytest.raises(NotFoundError):
            kube_client.request_json(client, "GET", "/api/v1/nodes/nope")
    finally:
        client.close()
    assert apiserver.token not in caplog.text
    assert "authorization" not in caplog.text.lower()


def test_sends_the_bearer_token(apiserver, api_client) -> None:
    kube_client.request_json(api_client, "GET", "/api/v1/nodes")
    if apiserver.fake is not None:
        (request,) = apiserver.fake.requests_matching("GET", "^/api/v1/nodes$")
        assert request.headers["authorization"] == f"Bearer {apiserver.token}"


def test_kubeconfig_env_list_is_merged(apiserver, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{apiserver.kubeconfig}")
    client = kube_client.build_api_client()
    try:
        assert "items" in kube_client.request_json(client, "GET", "/api/v1/nodes")
    finally:
        client.close()
