"""bench/chaos/history.py's ClaimWatch: a re-list after a gap (410 Gone) writes what was freed
before what was taken, so a device moved from one claim to another in the gap is not seen in
two claims at once by the DRA checks."""

from __future__ import annotations

from typing import Any

import orjson

from bench.chaos.dra_checks import replay_claims
from bench.chaos.history import ClaimWatch


def claim(name: str, version: str, device: str = "") -> dict[str, Any]:
    status = {"allocation": {"devices": {"results": [
        {"request": "r", "driver": "d", "pool": "p", "device": device}]}}} if device else {}
    return {"metadata": {"name": name, "namespace": "chaos", "uid": f"uid-{name}", "resourceVersion": version},
            "status": status}


class Listed:
    def __init__(self, items: list[dict[str, Any]], version: str) -> None:
        self.content = orjson.dumps({"items": items, "metadata": {"resourceVersion": version}})

    def raise_for_status(self) -> None:
        pass


def test_a_relist_frees_before_it_takes() -> None:
    watch = ClaimWatch("https://127.0.0.1:1", "token", "ca.crt", clock=lambda: 1.0)
    answers = [Listed([claim("a", "1", "gpu-0"), claim("gone", "1", "gpu-1")], "1"),
               # In the gap: b took gpu-0 after a freed it, and gone was deleted. Listed b first.
               Listed([claim("b", "5", "gpu-0"), claim("a", "4")], "5")]
    watch.session.get = lambda *args, **kwargs: answers.pop(0)  # type: ignore[method-assign]
    watch._list()  # noqa: SLF001 - the start
    watch._list()  # noqa: SLF001 - after a 410
    events = [(e.type, e.claim["metadata"]["name"]) for e in watch.snapshot_claims()]
    assert events == [("ADDED", "a"), ("ADDED", "gone"), ("DELETED", "gone"), ("MODIFIED", "a"), ("ADDED", "b")]
    held = [sorted(c["metadata"]["name"] for c in now.values()) for _, now, _ in replay_claims(watch.snapshot_claims())]
    assert max(len(h) for h in held[2:]) == 1  # a and b never both allocated
    watch.session.close()
