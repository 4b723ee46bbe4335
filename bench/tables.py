"""The benchmarks' one output form: a titled table of rows, columns in order of first appearance.

Every bench prints through this, whether `python -m bench` runs it or it runs alone; it lives
apart from bench/__main__.py so that no bench imports the runner that imports it.
"""

from __future__ import annotations

from typing import Any

Rows = list[dict[str, Any]]


def print_table(title: str, rows: Rows) -> None:
    if not rows:
        return
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    cells = [[str(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(f"\n== {title}")
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))
