"""One unpaginated list reply, read object by object as its bytes arrive.

kube-apiserver serves a list from its watch cache; paginated, it walks the cache from each
page's first object to the end of the resource, so listing n objects in pages of p costs it
n^2 / 2p steps: at 150,000 pods in pages of 500, 16 s of its CPU, against 3 s for the same
pods in one reply (docs/performance-scheduler-perf.md). One reply decoded whole would hold
every pod's JSON at once (250 MB and more); read this way, only the bytes of the object
being decoded and the part of the reply not read yet are held.

The reply is `{...,"metadata":{...},"items":[{item},{item},...]}`. Each item is cut at the
next `},{"<key>":` where <key> is the first key of the first item (`metadata` for
kube-apiserver): with bare quotes this is JSON structure, never text inside a string. A cut
inside an item (an array of objects that start with that key) leaves a piece that is not a
whole JSON value, which orjson refuses: the piece is then extended to the next cut, so a
wrong cut costs a decode and never a wrong object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from extender.errors import ClusterError

_ITEMS = b'"items":['
_FIRST_KEY_LIMIT = 256


class ListStream:
    """Splits the chunks of one list reply into decoded items; `metadata` is the list's own
    (resourceVersion), known once the items are done. `trim` rewrites each item's bytes
    before decoding (extender/kube/managedfields.py)."""

    def __init__(self, chunks: Iterable[bytes], what: str, trim: Callable[[bytes], bytes] | None = None) -> None:
        self._chunks = iter(chunks)
        self.what = what
        self.trim = trim
        self.metadata: dict[str, Any] = {}
        self._buffer = b""
        self._pos = 0  # self._buffer[:self._pos] is consumed
        self._done = False

    def _more(self) -> int:
        """Append the next chunk, dropping the consumed bytes first; how many were dropped
        (positions in the buffer move back by that much), -1 at the end of the reply."""
        if self._done:
            return -1
        for chunk in self._chunks:
            if chunk:
                dropped = self._pos
                self._buffer = self._buffer[dropped:] + chunk
                self._pos = 0
                return dropped
        self._done = True
        return -1

    def _find(self, pattern: bytes, start: int) -> int:
        """The position of `pattern` at or after `start`, reading more as needed; -1 at the end."""
        while True:
            found = self._buffer.find(pattern, start)
            if found >= 0:
                return found
            start = max(start, len(self._buffer) - len(pattern) + 1)
            dropped = self._more()
            if dropped < 0:
                return -1
            start -= dropped

    def _rest(self) -> bytes:
        """Everything not consumed yet, to the end of the reply."""
        while self._more() >= 0:
            pass
        return self._buffer[self._pos:]

    def items(self) -> Iterator[dict[str, Any]]:
        """Each item of the list, decoded, in order; ClusterError for a reply that is not a list
        or is cut short."""
        opening = self._find(_ITEMS, 0)
        if opening < 0:
            yield from self._whole()
            return
        try:
            self.metadata = orjson.loads(self._buffer[:opening] + b'"items":[]}').get("metadata") or {}
        except orjson.JSONDecodeError:
            yield from self._whole()  # "items" is not the list's own key: decode the reply whole
            return
        self._pos = opening + len(_ITEMS)
        while len(self._buffer) < self._pos + _FIRST_KEY_LIMIT and self._more() >= 0:
            pass
        head = self._buffer[self._pos:self._pos + _FIRST_KEY_LIMIT]
        if head.startswith(b"]"):
            self._trailer(self._rest()[1:])
            return
        key_end = head.find(b'":', 2)
        if not head.startswith(b'{"') or key_end < 0:
            raise ClusterError(f"{self.what}: list items are not objects")
        cut = b"}," + head[:key_end + 2]  # },{"metadata":
        while True:
            end = self._find(cut, self._pos)
            item = None
            while end >= 0:
                item = self._decode(self._buffer[self._pos:end + 1])
                if item is not None:
                    break
                end = self._find(cut, end + 1)  # a cut inside the item: extend to the next
            if item is None:
                break
            yield item
            self._pos = end + 2
        yield self._last(self._rest())

    def _decode(self, piece: bytes) -> dict[str, Any] | None:
        if self.trim is not None:
            piece = self.trim(piece)
        try:
            item = orjson.loads(piece)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(item, dict):
            raise ClusterError(f"{self.what}: a list item is not an object")
        return item

    def _last(self, rest: bytes) -> dict[str, Any]:
        """The last item: it ends at one of the `}]` in what is left, the reply's end after it."""
        self._buffer = b""
        end = rest.find(b"}]")
        while end >= 0:
            item = self._decode(rest[:end + 1])
            if item is not None:
                self._trailer(rest[end + 2:])
                return item
            end = rest.find(b"}]", end + 1)
        raise ClusterError(f"{self.what}: list reply cut short")

    def _trailer(self, rest: bytes) -> None:
        """What follows the items: `}`, or more keys of the list (its metadata, on some servers)."""
        rest = rest.strip()
        if rest == b"}":
            return
        try:
            tail = orjson.loads(b"{" + rest[1:]) if rest.startswith(b",") else None
        except orjson.JSONDecodeError:
            tail = None
        if not isinstance(tail, dict):
            raise ClusterError(f"{self.what}: list reply cut short")
        if isinstance(tail.get("metadata"), dict):
            self.metadata = tail["metadata"]

    def _whole(self) -> Iterator[dict[str, Any]]:
        """A reply that does not have the usual layout: decoded whole, as a page would be."""
        rest = self._rest()
        self._buffer = b""
        try:
            reply = orjson.loads(rest)
        except orjson.JSONDecodeError as exc:
            raise ClusterError(f"{self.what}: list reply is not JSON: {exc}") from None
        if not isinstance(reply, dict) or not isinstance(reply.get("items") or [], list):
            raise ClusterError(f"{self.what}: list reply has no items list")
        metadata = reply.get("metadata")
        self.metadata = metadata if isinstance(metadata, dict) else {}
        yield from (item for item in reply.get("items") or [] if isinstance(item, dict))
