"""NodeViewCache.infos: the request's node views with the state's pods, copied once per change."""

from __future__ import annotations

from typing import Any

from extender.cluster.state import ClusterState, infos_from_views
from extender.webhook.nodeviews import NodeViewCache
from tests.helpers import wire_body


def _state_and_request() -> tuple[ClusterState, list[dict[str, Any]]]:
    items = wire_body("filter-request-nodecache-false.json")["Nodes"]["items"]
    state = ClusterState()
    state.replace_nodes(items)
    state.replace_pods([])
    return state, items


def test_infos_are_what_the_state_builds_and_reused_until_something_changes() -> None:
    state, items = _state_and_request()
    cache = NodeViewCache()
    views = [cache.view(item) for item in items]
    first = cache.infos(views, state)
    expected = infos_from_views(views, state)
    assert [(i.node, i.requested, i.pod_count) for i in first] == [(i.node, i.requested, i.pod_count) for i in expected]
    assert all(a is b for a, b in zip(cache.infos(views, state), first, strict=True))
    name = views[0].name
    state.assume("default/newcomer", name, uid="u-1")  # the state's info of that node changes
    again = cache.infos(views, state)
    assert again[0] is not first[0] and again[0].pod_count == first[0].pod_count + 1
    assert again[0].node is views[0]  # still the request's view of the node
    assert all(a is b for a, b in zip(again[1:], first[1:], strict=True))
