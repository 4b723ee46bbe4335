"""SelfSubjectAccessReviews and their enforcement on requests."""

from __future__ import annotations

import pytest
from kubernetes import client

SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

FAKE_AUTHORIZER = (
    "tests the fake's switchable authorizer (deny/allow for every user); real RBAC is exercised "
    "with users of their own in tests/scheduler/test_cli.py, test_leader.py and tests/kube/test_events.py"
)


def _review(kube, **attrs) -> dict:
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attrs},
    }
    resp = kube.request("POST", SSAR, body)
    assert resp.status_code == 201
    return resp.json()


def test_everything_is_allowed_by_default(kube) -> None:
    review = _review(
        kube, verb="create", resource="pods", subresource="binding", namespace="default"
    )
    assert review["kind"] == "SelfSubjectAccessReview" and review["status"]["allowed"] is True
    assert review["spec"]["resourceAttributes"]["subresource"] == "binding"


@pytest.mark.requires_fake(FAKE_AUTHORIZER)
def test_deny_one_permission(fake, kube) -> None:
    fake.deny(verb="create", resource="pods", subresource="binding")
    assert _review(kube, verb="create", resource="pods", subresource="binding")["status"] == {
        "allowed": False
    }
    assert (
        _review(kube, verb="create", resource="pods")["status"]["allowed"] is True
    )  # RBAC: pods != pods/binding
    kube.create_pod("p")
    resp = kube.bind_pod("p", "n1")
    assert resp.status_code == 403 and resp.json()["reason"] == "Forbidden"
    assert resp.json()["message"] == (
        'pods "p" is forbidden: User "fakeapi-user" cannot create resource "pods/binding" in API group "" '
        'in the namespace "default"'
    )


@pytest.mark.requires_fake(FAKE_AUTHORIZER)
def test_deny_by_group_and_allow_back(fake, kube) -> None:
    fake.deny(resource="leases", group="coordination.k8s.io")
    assert (
        _review(kube, verb="get", group="coordination.k8s.io", resource="leases")["status"][
            "allowed"
        ]
        is False
    )
    resp = kube.request("GET", "/apis/coordination.k8s.io/v1/leases")
    assert resp.status_code == 403
    assert resp.json()["message"] == (
        'leases.coordination.k8s.io is forbidden: User "fakeapi-user" cannot list '
        'resource "leases" in API group "coordination.k8s.io" at the cluster scope'
    )
    fake.allow(verb="get", resource="leases", group="coordination.k8s.io")
    assert (
        _review(kube, verb="get", group="coordination.k8s.io", resource="leases")["status"][
            "allowed"
        ]
        is True
    )
    assert (
        _review(kube, verb="list", group="coordination.k8s.io", resource="leases")["status"][
            "allowed"
        ]
        is False
    )


@pytest.mark.requires_fake(FAKE_AUTHORIZER)
def test_predicate_and_reset(fake, kube) -> None:
    fake.set_allowed(lambda a: a.verb in ("get", "list", "watch"))
    assert _review(kube, verb="watch", resource="nodes")["status"]["allowed"] is True
    assert _review(kube, verb="patch", resource="nodes")["status"]["allowed"] is False
    fake.allow_all()
    assert _review(kube, verb="patch", resource="nodes")["status"]["allowed"] is True


@pytest.mark.requires_fake(FAKE_AUTHORIZER)
def test_official_client_review(fake, apiserver) -> None:
    from kubernetes import config

    fake.deny(verb="patch", resource="pods", subresource="status")
    api_client = config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        api = client.AuthorizationV1Api(api_client)
        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(
                    verb="patch", resource="pods", subresource="status"
                )
            )
        )
        assert api.create_self_subject_access_review(review).status.allowed is False
    finally:
        api_client.close()


def test_review_needs_exactly_one_attribute_set(kube) -> None:
    resp = kube.request(
        "POST",
        SSAR,
        {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}},
    )
    assert resp.status_code == 422
