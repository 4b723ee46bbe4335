"""One unpaginated list reply read object by object: the same items and metadata as decoding it
whole, however the bytes are chunked and whatever the items hold."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.errors import ClusterError
from extender.kube.liststream import ListStream
from extender.kube.managedfields import without_managed_fields


def _pod(name: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}], **extra}, "status": {"phase": "Running"}}


def _reply(items: list[dict[str, Any]], metadata_last: bool = False) -> bytes:
    meta = {"resourceVersion": "42"}
    if metadata_last:
        return orjson.dumps({"kind": "PodList", "apiVersion": "v1", "items": items, "metadata": meta})
    return orjson.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items})


def _read(data: bytes, size: int, trim: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    stream = ListStream([data[i:i + size] for i in range(0, len(data), size)], "GET /api/v1/pods",
                        trim=without_managed_fields if trim else None)
    items = list(stream.items())
    return items, stream.metadata


@pytest.mark.parametrize("size", [1, 5, 64, 1 << 16])
def test_items_and_metadata_whatever_the_chunks(size: int) -> None:
    items = [_pod(f"p{i}") for i in range(20)]
    assert _read(_reply(items), size) == (items, {"resourceVersion": "42"})


def test_empty_list() -> None:
    assert _read(_reply([]), 3) == ([], {"resourceVersion": "42"})


def test_metadata_after_the_items() -> None:
    items = [_pod("a"), _pod("b")]
    assert _read(_reply(items, metadata_last=True), 7) == (items, {"resourceVersion": "42"})


def test_an_array_of_objects_starting_with_the_first_key_is_not_a_cut() -> None:
    """`},{"metadata":` inside an item (objects in a list that start with metadata) is tried as
    an item's end, refused by the decoder, and the item read whole."""
    tricky = _pod("a", templates=[{"metadata": {"name": "t1"}}, {"metadata": {"name": "t2"}}])
    texts = _pod("b", note='},{"metadata":{"name":"x"}}]}')
    items = [tricky, texts, _pod("c")]
    assert _read(_reply(items), 11) == (items, {"resourceVersion": "42"})


def test_managed_fields_are_trimmed_per_item() -> None:
    item = _pod("a")
    item["metadata"]["managedFields"] = [{"manager": "m", "fieldsV1": {"f:spec": {}}}]
    item = {"metadata": item["metadata"], "spec": item["spec"], "status": item["status"]}
    items, _ = _read(_reply([item, _pod("b")]), 13, trim=True)
    assert "managedFields" not in items[0]["metadata"] and items[1] == _pod("b")


@pytest.mark.parametrize("cut", [10, 80, -3, -1])
def test_a_reply_cut_short_is_an_error(cut: int) -> None:
    data = _reply([_pod("a"), _pod("b"), _pod("c")])
    with pytest.raises(ClusterError):
        _read(data[:cut], 7)


def test_a_reply_of_another_layout_is_decoded_whole() -> None:
    data = orjson.dumps({"items": [{"kind": "Pod", "metadata": {"name": "a"}}], "metadata": {"resourceVersion": "5"}})
    assert _read(data, 4) == ([{"kind": "Pod", "metadata": {"name": "a"}}], {"resourceVersion": "5"})
    with pytest.raises(ClusterError):
        _read(b"not json", 4)


texts = st.lists(st.sampled_from(['"', "\\", "}", "]", "{", "[", ",", ":", "metadata", '},{"metadata":', "a"]),
                 max_size=6).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(texts, texts, max_size=3), max_size=6), st.integers(1, 300), st.booleans())
def test_any_list_reads_as_decoding_it_whole(notes: list[dict[str, str]], size: int, metadata_last: bool) -> None:
    items = [_pod(f"p{i}", notes=n, inner=[{"metadata": n}, {"metadata": {}}]) for i, n in enumerate(notes)]
    assert _read(_reply(items, metadata_last), size) == (items, {"resourceVersion": "42"})
