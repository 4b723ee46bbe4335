"""The watch stream reader (pure) and the Reflector against scripted streams the fake cannot send."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.cluster.state import ClusterState
from extender.kube.client import api_client_for
from extender.kube.source import KubeSource
from extender.kube.watching import LineReader, Reflector, TruncatedStream, iter_lines
from tests.helpers import FAST_WATCH, wait_for
from tests.kube.scripted import ScriptedServer, event_line

# ---- LineReader / iter_lines -------------------------------------------------------------


def test_line_split_across_chunks_is_joined() -> None:
    reader = LineReader()
    assert reader.feed(b'{"a":') == []
    assert reader.feed(b"1") == []
    assert reader.feed(b'}\n{"b":2}\n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert reader.pending == b'{"c"'
    assert reader.feed(b":3}\n") == [b'{"c":3}']
    assert reader.pending == b""


def test_blank_lines_are_dropped() -> None:
    assert LineReader().feed(b"\n\n{}\n \n") == [b"{}"]


def test_truncated_final_line_is_a_dropped_stream() -> None:
    with pytest.raises(TruncatedStream):
        list(iter_lines([b'{"type":"ADDED"}\n{"type":"ADD']))


def test_complete_final_line_without_newline_is_kept() -> None:
    assert list(iter_lines([b'{"a":1}\n{"b":', b"2}"])) == [b'{"a":1}', b'{"b":2}']


def test_overlong_line_is_refused() -> None:
    reader = LineReader(max_line=10)
    with pytest.raises(ValueError):
        reader.feed(b"x" * 11)


events = st.lists(
    st.dictionaries(st.text(min_size=1, max_size=5), st.text(max_size=20) | st.integers(-2**53, 2**53), max_size=4),
    max_size=8,
)


@given(events, st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=20))
def test_any_chunking_yields_the_same_lines(objects: list[dict], cuts: list[int]) -> None:
    stream = b"".join(orjson.dumps(o) + b"\n" for o in objects)
    chunks, position, index = [], 0, 0
    while position < len(stream):
        size = cuts[index % len(cuts)]
        chunks.append(stream[position:position + size])
        position += size
        index += 1
    assert [orjson.loads(line) for line in iter_lines(chunks)] == objects


# ---- Reflector against a scripted stream --------------------------------------------------------


def _node(name: str, rv: str, cpu: str = "4") -> dict:
    return {
        "metadata": {"name": name, "resourceVersion": rv},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.fixture
def scripted() -> ScriptedServer:
    server = ScriptedServer().start()
    yield server
    server.close()


def _reflector(server: ScriptedServer, seen: list) -> Reflector:
    return Reflector(api_client_for(server.url), "/api/v1/nodes", resource="nodes",
                     on_list=lambda items: seen.append(("LIST", [i["metadata"]["name"] for i in items])),
                     on_event=lambda kind, obj: seen.append((kind, obj["metadata"]["name"])), **FAST_WATCH)


def test_event_split_inside_a_line_is_applied_once(scripted: ScriptedServer) -> None:
    line = event_line("ADDED", _node("n2", "11"))
    scripted.lists["/api/v1/nodes"] = {"metadata": {"resourceVersion": "10"}, "items": [_node("n1", "5")]}
    scripted.watches["/api/v1/nodes"] = [[line[:7], line[7:20], line[20:] + event_line("ADDED", _node("n3", "12"))]]
    seen: list = []
    reflector = _reflector(scripted, seen)
    reflector.start()
    try:
        wait_for(lambda: len(seen) >= 3, message="events")
        assert seen == [("LIST", ["n1"]), ("ADDED", "n2"), ("ADDED", "n3")]
        assert reflector.resource_version == "12"
        assert reflector.malformed_events == 0
    finally:
        reflector.stop()


def test_malformed_event_is_skipped_and_the_rest_applied(scripted: ScriptedServer) -> None:
    scripted.lists["/api/v1/nodes"] = {"metadata": {"resourceVersion": "10"}, "items": []}
    scripted.watches["/api/v1/nodes"] = [[
        event_line("ADDED", _node("n1", "11")),
        b"this is not json\n",
        b'{"type":"ADDED"}\n',  # no object
        b'{"type":"SURPRISE","object":{}}\n',
        event_line("ADDED", _node("n2", "12")),
    ]]
    seen: list = []
    reflector = _reflector(scripted, seen)
    reflector.start()
    try:
        wait_for(lambda: ("ADDED", "n2") in seen, message="the event after the bad ones")
        assert seen == [("LIST", []), ("ADDED", "n1"), ("ADDED", "n2")]
        assert reflector.malformed_events == 3
        assert reflector.resource_version == "12"
        assert reflector.lists == 1  # no re-list for a bad line
    finally:
        reflector.stop()


def test_unparseable_quantity_marks_only_that_node_unusable(scripted: ScriptedServer) -> None:
    scripted.lists["/api/v1/nodes"] = {
        "metadata": {"resourceVersion": "10"},
        "items": [_node("good", "1"), _node("bad", "2", cpu="lots")],
    }
    scripted.watches["/api/v1/nodes"] = [[event_line("ADDED", _node("worse", "11", cpu="1e999"))]]
    state = ClusterState()
    source = KubeSource(state, api_client_for(scripted.url), housekeeping_interval=0.05, **FAST_WATCH)
    source.start()
    try:
        assert source.wait_synced(5)
        wait_for(lambda: state.node_info("worse"), message="node from the watch")
        assert state.node_info("good").node.error == ""
        assert "status.allocatable.cpu" in state.node_info("bad").node.error
        assert state.node_info("bad").node.unschedulable
        assert state.node_info("worse").node.error
        assert state.node_info("good").free("cpu") == 4000
    finally:
        source.stop()


def test_stop_is_prompt_while_a_watch_is_open(scripted: ScriptedServer) -> None:
    import time

    seen: list = []
    reflector = _reflector(scripted, seen)
    reflector.start()
    assert reflector.wait_synced(5)
    wait_for(lambda: scripted.watch_requests("/api/v1/nodes"), message="the watch")
    started = time.monotonic()
    reflector.stop()
    assert not reflector.alive
    assert time.monotonic() - started < 2


def test_long_silence_is_logged(scripted: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    seen: list = []
    reflector = _reflector(scripted, seen)
    reflector.stall_after = 0.2
    reflector.start()
    try:
        assert reflector.wait_synced(5)
        assert not reflector.check_stall()
        wait_for(lambda: reflector.check_stall(), message="stall")
        assert any("no nodes watch event" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
    finally:
        reflector.stop()


def test_repeated_410_relists_back_off(scripted: ScriptedServer) -> None:
    import time

    expired = event_line("ERROR", {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                   "reason": "Expired", "code": 410, "message": "too old resource version"})
    scripted.lists["/api/v1/nodes"] = {"metadata": {"resourceVersion": "10"}, "items": []}
    scripted.watches["/api/v1/nodes"] = [[expired], [expired], [expired]]
    listed: list[float] = []

    def on_list(items) -> None:
        list(items)
        listed.append(time.monotonic())

    reflector = Reflector(api_client_for(scripted.url), "/api/v1/nodes", resource="nodes", on_list=on_list,
                          on_event=lambda kind, obj: None, **FAST_WATCH)
    reflector.start()
    try:
        wait_for(lambda: len(listed) == 4, message="four lists")
        assert reflector.restarts["gone"] == 3
        assert listed[1] - listed[0] < listed[3] - listed[1]  # first re-list at once, then backoff
        assert listed[3] - listed[1] >= 0.075
    finally:
        reflector.stop()


def test_a_watch_silent_past_the_idle_timeout_is_opened_again(scripted: ScriptedServer,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection that stays open but delivers nothing (dropped without a reset) must not
    freeze the cache until timeoutSeconds: the watch is opened again from its resourceVersion."""
    from extender.kube import watching

    monkeypatch.setattr(watching, "WATCH_IDLE_TIMEOUT", 0.5)
    scripted.lists["/api/v1/nodes"] = {"metadata": {"resourceVersion": "10"}, "items": []}
    scripted.watches["/api/v1/nodes"] = [[event_line("ADDED", _node("n1", "11"))]]  # then silence
    seen: list = []
    reflector = _reflector(scripted, seen)
    reflector.start()
    try:
        wait_for(lambda: len(scripted.watch_requests("/api/v1/nodes")) >= 2, timeout=5,
                 message="a second watch after the silence")
        assert scripted.watch_requests("/api/v1/nodes")[1]["resourceVersion"] == "11"
        assert reflector.lists == 1 and seen == [("LIST", []), ("ADDED", "n1")]
    finally:
        reflector.stop()
