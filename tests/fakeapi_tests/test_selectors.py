"""Selector parsing and matching, unit-level, plus the server's answers for bad selectors."""

from __future__ import annotations

import pytest

from tests.fakeapi.resources import NODE, POD
from tests.fakeapi.selectors import (
    Selection,
    parse_field_selector,
    parse_label_selector,
    pod_fields,
)
from tests.fakeapi.status import ApiError

PENDING_UNBOUND = {
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"schedulerName": "mine"},
    "status": {"phase": "Pending"},
}
BOUND = {
    "metadata": {"name": "q", "namespace": "ns"},
    "spec": {"schedulerName": "mine", "nodeName": "n1"},
    "status": {"phase": "Running"},
}


def _fields(text: str):
    return parse_field_selector(text, POD.field_labels)


@pytest.mark.parametrize(
    ("selector", "pending", "bound"),
    [
        ("spec.nodeName=", True, False),
        ("spec.nodeName==", True, False),
        ("spec.nodeName!=", False, True),
        ("spec.nodeName=n1", False, True),
        ("spec.schedulerName=mine,spec.nodeName=,status.phase=Pending", True, False),
        ("status.phase!=Succeeded,status.phase!=Failed", True, True),
        ("metadata.namespace=ns,metadata.name==q", False, True),
        ("", True, True),
    ],
)
def test_field_selector_semantics(selector: str, pending: bool, bound: bool) -> None:
    sel = _fields(selector)
    assert sel.matches(pod_fields(PENDING_UNBOUND)) is pending
    assert sel.matches(pod_fields(BOUND)) is bound


def test_field_selector_escapes_commas_and_equals() -> None:
    sel = _fields(r"metadata.name=a\,b\=c")
    assert sel.terms[0].value == "a,b=c"


def test_unsupported_field_label_is_a_400_with_the_real_message() -> None:
    with pytest.raises(ApiError) as err:
        _fields("spec.priority=1")
    assert (err.value.code, err.value.reason, err.value.message) == (
        400,
        "BadRequest",
        "field label not supported: spec.priority",
    )


def test_field_selector_without_operator_is_refused() -> None:
    with pytest.raises(ApiError) as err:
        _fields("spec.nodeName")
    assert err.value.code == 400 and "can't understand 'spec.nodeName'" in err.value.message


def test_node_fields_include_unschedulable() -> None:
    sel = parse_field_selector("spec.unschedulable=false", NODE.field_labels)
    assert sel.matches(NODE.fields_of({"metadata": {"name": "n"}, "spec": {}}))
    assert not sel.matches(
        NODE.fields_of({"metadata": {"name": "n"}, "spec": {"unschedulable": True}})
    )


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "db"}, False),
        ("app!=web", {}, True),  # != matches objects without the key
        ("app in (web, db)", {"app": "db"}, True),
        ("app notin (web,db)", {"app": "cache"}, True),
        ("app notin (web)", {}, True),
        ("app", {"app": ""}, True),
        ("!app", {"app": "x"}, False),
        ("!app", {}, True),
        ("tier=front,app in (web)", {"tier": "front", "app": "web"}, True),
        ("tier=front,app in (web)", {"tier": "back", "app": "web"}, False),
        ("replicas>2", {"replicas": "3"}, True),
        ("replicas<2", {"replicas": "3"}, False),
        ("replicas>2", {"replicas": "1_0"}, False),  # strconv.ParseInt, not Python's int()
        ("replicas<2", {"replicas": "\u0661"}, False),  # ARABIC-INDIC DIGIT ONE is no integer
        ("replicas>2", {}, False),
        ("example.com/role=gpu", {"example.com/role": "gpu"}, True),
    ],
)
def test_label_selector_semantics(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


@pytest.mark.parametrize("bad", ["app in web", "app in (", "=x", "app=(x)", "a b", "n>-1", "n>1_0", "n>x"])
def test_malformed_label_selector_is_a_400(bad: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_label_selector(bad)
    assert err.value.code == 400


def test_selection_combines_labels_and_fields() -> None:
    sel = Selection(_fields("spec.nodeName="), parse_label_selector("app=web"), POD.fields_of)
    assert sel.matches({**PENDING_UNBOUND, "metadata": {"name": "p", "labels": {"app": "web"}}})
    assert not sel.matches(PENDING_UNBOUND)
    assert not sel.matches(None)


def test_server_refuses_bad_selectors_on_list_and_watch(kube) -> None:
    for params in (
        {"fieldSelector": "spec.bogus=1"},
        {"fieldSelector": "spec.bogus=1", "watch": "true"},
    ):
        resp = kube.request("GET", "/api/v1/pods", params=params)
        assert resp.status_code == 400
        assert resp.json()["message"] == "field label not supported: spec.bogus"
    resp = kube.request("GET", "/api/v1/pods", params={"labelSelector": "app in ("})
    assert resp.status_code == 400 and resp.json()["reason"] == "BadRequest"


def test_list_filters_with_the_scheduler_query(kube) -> None:
    kube.create_pod("mine-pending", scheduler_name="mine")
    kube.create_pod("other-pending")
    kube.create_pod("mine-bound", scheduler_name="mine", node_name="n1")
    names = [
        p["metadata"]["name"]
        for p in kube.list_pods(
            field_selector="spec.schedulerName=mine,spec.nodeName=,status.phase=Pending"
        )
    ]
    assert names == ["mine-pending"]


def test_gt_and_lt_read_integers_as_go_does(kube) -> None:
    """Both servers: a bound is a label value ("-1" is not one) and an integer, and a label
    compares only when strconv.ParseInt reads it ("1_0" is no integer there)."""
    for name, value in (("ten", "10"), ("underscored", "1_0"), ("three", "3")):
        kube.create_pod(name, labels={"n": value})
    names = [p["metadata"]["name"] for p in kube.list_pods(label_selector="n>5")]
    assert names == ["ten"]
    resp = kube.request("GET", "/api/v1/namespaces/default/pods", params={"labelSelector": "n>-1"})
    assert resp.status_code == 400 and resp.json()["reason"] == "BadRequest"
