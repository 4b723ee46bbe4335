"""deploy/grafana/dashboard.json: valid, laid out without overlaps, and in step with extender/metrics.py."""

from __future__ import annotations

import json
import re

from prometheus_client.metrics import MetricWrapperBase

from extender import metrics
from tests.helpers import ROOT

DASHBOARD = ROOT / "deploy" / "grafana" / "dashboard.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def _exposed() -> dict[str, str]:
    """Every series name the project exports, mapped to its metric's base name."""
    names = {}
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            for family in value.describe():
                for suffix in SUFFIXES[family.type]:
                    names[family.name + suffix] = family.name
    return names


def _panels() -> list[dict]:
    return json.loads(DASHBOARD.read_text())["panels"]


def test_every_query_names_a_real_metric() -> None:
    exposed = _exposed()
    used = set()
    for panel in _panels():
        for target in panel.get("targets", []):
            for name in re.findall(r"\bextender_[a-z_]+", target["expr"]):
                assert name in exposed, f"{panel['title']}: {name} is not in extender/metrics.py"
                used.add(exposed[name])
    assert used == set(exposed.values()), f"metrics without a panel: {set(exposed.values()) - used}"


def test_cache_age_is_computed_from_the_last_event_timestamp() -> None:
    exprs = [t["expr"] for p in _panels() for t in p.get("targets", [])]
    assert any(e.startswith("time() - max") and "extender_cache_last_event_timestamp_seconds" in e for e in exprs)


def test_layout_ids_and_datasources() -> None:
    panels = _panels()
    assert len({p["id"] for p in panels}) == len(panels)
    cells = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24
        for dx in range(pos["w"]):
            for dy in range(pos["h"]):
                cell = (pos["x"] + dx, pos["y"] + dy)
                assert cell not in cells, f"{panel['title']} overlaps another panel"
                cells.add(cell)
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert all('job=~"$job"' in t["expr"] for t in panel["targets"])
