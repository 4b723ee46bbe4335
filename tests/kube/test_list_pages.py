"""A paginated list: the next page is fetched while the current one is handed over, and a
list that fails or is stopped half-way still behaves as one that never happened."""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson
import pytest

from extender.errors import ClusterError
from extender.kube.client import api_client_for
from extender.kube.watching import Reflector
from tests.helpers import FAST_WATCH, wait_for
from tests.kube.scripted import ScriptedServer


class Pages:
    """Stands in for the server behind Reflector._page: page i holds items "i-0", "i-1"."""

    def __init__(self, count: int, fail_at: int | None = None, hold: threading.Event | None = None) -> None:
        self.count = count
        self.fail_at = fail_at
        self.hold = hold
        self.asked: list[str] = []

    def __call__(self, token: str) -> dict[str, Any]:
        self.asked.append(token)
        index = int(token or 0)
        if self.hold is not None and index > 0:
            self.hold.wait(10)
        if index == self.fail_at:
            raise ClusterError("GET /api/v1/pods: 500 InternalError", status=500)
        meta: dict[str, Any] = {"resourceVersion": "7"}
        if index + 1 < self.count:
            meta["continue"] = str(index + 1)
        return {"metadata": meta, "items": [{"metadata": {"name": f"{index}-{j}"}} for j in range(2)]}


def _reflector(on_list: Any) -> Reflector:
    reflector = Reflector(api_client_for("http://127.0.0.1:9"), "/api/v1/pods", resource="pods",
                          on_list=on_list, on_event=lambda kind, obj: None, **FAST_WATCH)
    return reflector


def test_the_next_page_is_asked_for_before_this_one_is_consumed() -> None:
    names: list[str] = []
    pages = Pages(3)

    def on_list(items: Any) -> None:
        for item in items:
            if not names:  # still on the first item of the first page: page 2 is on its way
                wait_for(lambda: "1" in pages.asked, timeout=5, message="the second page requested")
            names.append(item["metadata"]["name"])

    reflector = _reflector(on_list)
    reflector._page = pages  # type: ignore[method-assign]
    reflector._list()
    assert names == ["0-0", "0-1", "1-0", "1-1", "2-0", "2-1"]
    assert pages.asked == ["", "1", "2"]
    assert reflector.synced and reflector.resource_version == "7"


def test_a_failed_later_page_fails_the_whole_list() -> None:
    got: list[str] = []
    reflector = _reflector(lambda items: got.extend(i["metadata"]["name"] for i in items))
    reflector._page = Pages(3, fail_at=2)  # type: ignore[method-assign]
    with pytest.raises(ClusterError):
        reflector._list()
    assert got == ["0-0", "0-1", "1-0", "1-1"]
    assert not reflector.synced and reflector.resource_version == ""


def test_stop_during_a_list_does_not_wait_for_the_page_in_flight() -> None:
    hold = threading.Event()
    reflector: Reflector

    def on_list(items: Any) -> None:
        for _ in items:
            reflector._stop.set()  # stop() while page 2 is still being fetched (held below)

    reflector = _reflector(on_list)
    reflector._page = Pages(3, hold=hold)  # type: ignore[method-assign]
    started = time.monotonic()
    try:
        reflector._list()
        assert time.monotonic() - started < 5
        assert not reflector.synced
    finally:
        hold.set()


# ---- managedFields left out of list pages -------------------------------------------------------


def _pod(name: str) -> dict[str, Any]:
    """A pod in kube-apiserver's field order: managedFields last in metadata, then spec."""
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": "a"},
                         "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                                            "fieldsV1": {"f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}}}}}}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}, "status": {"phase": "Running"}}


@pytest.mark.parametrize("trim", [True, False])
def test_list_pages_lose_managed_fields_only_when_asked(trim: bool) -> None:
    server = ScriptedServer().start()
    try:
        server.lists["/api/v1/pods"] = {"metadata": {"resourceVersion": "3"}, "items": [_pod("a"), _pod("b")]}
        seen: list[dict[str, Any]] = []
        reflector = Reflector(api_client_for(server.url), "/api/v1/pods", resource="pods",
                              on_list=seen.extend, on_event=lambda kind, obj: None,
                              trim_managed_fields=trim, **FAST_WATCH)
        reflector._list()
        expected = [_pod("a"), _pod("b")]
        if trim:
            for pod in expected:
                del pod["metadata"]["managedFields"]
        assert seen == expected
        assert orjson.dumps(seen)  # plain JSON data, as decoded
    finally:
        server.close()


def test_page_size_0_reads_one_unpaginated_reply() -> None:
    server = ScriptedServer().start()
    try:
        server.lists["/api/v1/pods"] = {"metadata": {"resourceVersion": "8"}, "items": [_pod("a"), _pod("b")]}
        seen: list[dict[str, Any]] = []
        reflector = Reflector(api_client_for(server.url), "/api/v1/pods", resource="pods", page_size=0,
                              on_list=seen.extend, on_event=lambda kind, obj: None,
                              trim_managed_fields=True, field_selector="status.phase!=Failed", **FAST_WATCH)
        reflector._list()
        assert [p["metadata"]["name"] for p in seen] == ["a", "b"]
        assert all("managedFields" not in p["metadata"] for p in seen)
        assert reflector.synced and reflector.resource_version == "8"
        assert server.requests == [("/api/v1/pods", {"fieldSelector": "status.phase!=Failed"})]  # no limit
    finally:
        server.close()
