"""managedFields cut from a list reply's bytes: exactly that field goes, whatever the strings hold."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.kube.managedfields import without_managed_fields

TRICKY = ['"managedFields":[', ']},"spec":', ',"managedFields":[1]},"spec":{', '"metadata":', "]}", "\\", '"']


def _pod(name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
         managed: bool = True, spec_first: bool = False) -> dict[str, Any]:
    """A pod in kube-apiserver's field order (metadata, spec, status; managedFields last in metadata)."""
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels or {},
                            "annotations": annotations or {}}
    if managed:
        meta["managedFields"] = [{"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1",
                                  "fieldsV1": {"f:spec": {"f:containers": {'k:{"name":"a]}b"}': {".": {}}}},
                                               "f:metadata": {"f:labels": {}}}}]
    spec = {"nodeName": "n1", "containers": [{"name": "c", "env": [{"name": "X", "value": ']},"spec":'}]}]}
    if spec_first:
        return {"spec": spec, "metadata": meta, "status": {"phase": "Running"}}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def _page(items: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}, "items": items})


def _unmanaged(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items = copy.deepcopy(items)
    for item in items:
        item["metadata"].pop("managedFields", None)
    return items


def test_every_items_managed_fields_go_and_nothing_else() -> None:
    items = [_pod("a"), _pod("b", managed=False), _pod("c", labels={"app": "web"})]
    trimmed = without_managed_fields(_page(items))
    assert b"managedFields" not in trimmed
    assert orjson.loads(trimmed)["items"] == _unmanaged(items)


def test_a_reply_without_managed_fields_is_returned_as_is() -> None:
    data = _page([_pod("a", managed=False)])
    assert without_managed_fields(data) is data


def test_patterns_inside_strings_are_text_not_structure() -> None:
    items = [_pod("a", annotations={t: t for t in TRICKY}), _pod("b", labels={"x": '"managedFields":['})]
    assert orjson.loads(without_managed_fields(_page(items)))["items"] == _unmanaged(items)


def test_metadata_after_spec_is_left_whole() -> None:
    """Another server's field order: the span would run into the next pod, so nothing is cut there."""
    items = [_pod("a", spec_first=True), _pod("b", spec_first=True)]
    assert orjson.loads(without_managed_fields(_page(items)))["items"] == items


texts = st.lists(st.sampled_from([*'ab"\\]}[{,:', *TRICKY, "spec", "metadata", "managedFields"]), max_size=6).map("".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.dictionaries(texts, texts, max_size=3), st.booleans(), st.booleans()),
                min_size=1, max_size=5))
def test_any_page_decodes_to_its_pods_with_or_without_their_managed_fields(pods: list[tuple]) -> None:
    items = [_pod(f"p{i}", annotations=notes, managed=managed, spec_first=spec_first)
             for i, (notes, managed, spec_first) in enumerate(pods)]
    got = orjson.loads(without_managed_fields(_page(items)))["items"]
    assert len(got) == len(items)
    for before, after in zip(items, got, strict=True):
        assert after in (before, _unmanaged([before])[0])
        if not any(p[2] for p in pods):  # all in the API server's order: every one is cut
            assert "managedFields" not in after["metadata"]
