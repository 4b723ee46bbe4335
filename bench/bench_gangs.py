"""Gangs: what the coordinator, the fit check and the gang ledger cost, for gangs of 100 to 5,000.

* coordinator: every member added (`upsert_member`), admitted (`admission`) and held (`hold`,
  the last one releasing all), µs per member for each, in one process;
* fits: `fits_at_all` for a gang's members against every node's free room, ms per call;
* ledger: one hold written into the group's Lease document (read the annotation, add the hold,
  dump it), µs per hold, averaged over the whole gang (the document grows with it), and the
  annotation's size once every member but the last is held: Kubernetes refuses more than
  256 KiB of annotations on one object, which bounds the gang one Lease can count (so gangs
  above 2,000 members are not measured here).

Usage: python bench/bench_gangs.py [--sizes 100 1000 5000]; `run(quick)` returns rows for `make bench`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.tables import print_table
from extender.gangs import ledger  # noqa: E402
from extender.gangs.coordinator import GangCoordinator, Member  # noqa: E402
from extender.gangs.fitting import fits_at_all  # noqa: E402
from extender.model.podgroups import API_V1ALPHA2, GANG, GroupKey, PodGroup  # noqa: E402

ANNOTATIONS_LIMIT = 256 * 1024
LEDGER_MAX = 2000


def _coordinator(size: int) -> dict[str, Any]:
    key = GroupKey(API_V1ALPHA2, "bench", "gang")
    gangs = GangCoordinator()
    gangs.upsert_group(PodGroup(key, "uid", 0, GANG, size, 300.0, {}, ()))
    members = [Member(f"uid-{i}", f"bench/p{i}", key, "extender-scheduler", requests={"cpu": 1000})
               for i in range(size)]
    started = time.perf_counter()
    for member in members:
        gangs.upsert_member(member)
    added = time.perf_counter()
    assert all(gangs.admission(m.uid).admitted for m in members)
    admitted = time.perf_counter()
    released = 0
    for member in members:
        released += sum(1 for v in gangs.hold(member.uid, "n1") if v.decision.value == "allow")
    held = time.perf_counter()
    assert released == size
    per = 1e6 / size
    return {"part": "coordinator", "members": size, "add us": round((added - started) * per, 1),
            "admit us": round((admitted - added) * per, 1), "hold us": round((held - admitted) * per, 1)}


def _fits(size: int, nodes: int = 5000) -> dict[str, Any]:
    free = [{"cpu": 4000, "memory": 16 * 2**30, "pods": 100} for _ in range(nodes)]
    requests = [{"cpu": 1000, "memory": 2**30} for _ in range(size)]
    runs = 5
    started = time.perf_counter()
    for _ in range(runs):
        assert fits_at_all(requests, size, free) is None
    return {"part": "fits", "members": size, "nodes": nodes,
            "ms per call": round((time.perf_counter() - started) * 1000 / runs, 1)}


def _ledger(size: int) -> dict[str, Any]:
    text = ""
    started = time.perf_counter()
    for i in range(size):
        doc = ledger.read({ledger.LEDGER_ANNOTATION: text})
        entry = ledger.Entry(f"node-{i:05d}", "extender-webhook-7d9f8b6c5-x2x9q/12/1a2b3c4d", 1_765_000_000.0 + i)
        doc = ledger.hold(doc, f"0b4e8f7c-2a1d-4c3e-9f00-{i:012d}", entry, min_count=size + 1,
                          bound=frozenset(), now=1_764_999_000.0)
        text = ledger.dump(doc)
    elapsed = time.perf_counter() - started
    return {"part": "ledger", "members": size, "hold us": round(elapsed * 1e6 / size, 1),
            "annotation KiB": round(len(text) / 1024, 1), "fits 256 KiB": len(text) <= ANNOTATIONS_LIMIT}


def run(quick: bool = False, sizes: tuple[int, ...] | None = None) -> list[dict[str, Any]]:
    sizes = sizes or ((100, 1000) if quick else (100, 1000, 5000))
    rows = [_coordinator(n) for n in sizes]
    rows += [_fits(n) for n in sizes]
    rows += [_ledger(n) for n in sizes if n <= LEDGER_MAX]  # beyond, the annotation is refused anyway
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    options = parser.parse_args()
    print_table("gangs", run(sizes=tuple(options.sizes)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
