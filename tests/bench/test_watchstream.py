"""The benchmarks' one watch-line reader (bench/watchstream.py)."""

from __future__ import annotations

import io

from bench.watchstream import watch_events


class Chunks(io.RawIOBase):
    """A stream that hands out the given chunks one per read, as a socket would."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    def read1(self, size: int = -1) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


def test_events_split_across_chunks_are_joined_and_stamped_when_their_chunk_came() -> None:
    times = iter([1.0, 2.0, 3.0])
    raw = Chunks([b'{"type":"ADDED","object":{"a":1}}\n{"type":"MOD', b'IFIED","object":{}}\n\n', b'{"type":"DELETED"'])
    events = list(watch_events(raw, lambda: False, clock=lambda: next(times)))
    assert events == [({"type": "ADDED", "object": {"a": 1}}, 1.0), ({"type": "MODIFIED", "object": {}}, 2.0)]


def test_a_stopped_reader_reads_no_further() -> None:
    raw = Chunks([b'{"type":"ADDED"}\n', b'{"type":"DELETED"}\n'])
    stop = []
    seen = []
    for event, _ in watch_events(raw, lambda: bool(stop)):
        seen.append(event["type"])
        stop.append(True)
    assert seen == ["ADDED"] and raw.chunks == [b'{"type":"DELETED"}\n']
