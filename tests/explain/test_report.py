"""The HTML report: self-contained, a bar per node and resource, the tables, the comparison."""

from __future__ import annotations

from collections import defaultdict
from html.parser import HTMLParser

from extender.cluster.snapshot import Snapshot
from extender.policy.defaults import default_policy
from extender.policy.loading import load_policy_file
from extender.simulation.report import render_report, write_report
from extender.simulation.simulating import compare, simulate
from tests.explain.conftest import LEAST, MOST


class Page(HTMLParser):
    """Collects what the assertions need: svgs, bars by svg, table rows, external references."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.svgs = 0
        self.bars: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        self.tags: list[str] = []
        self.external: list[str] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.tags.append(tag)
        if tag == "svg":
            self.svgs += 1
        if tag == "rect" and "after" in (values.get("class") or "").split():
            self.bars[self.svgs][values["data-resource"] or ""].append(values["data-node"] or "")
        for name in ("src", "href"):
            if values.get(name):
                self.external.append(values[name] or "")
        if tag == "link":
            self.external.append(values.get("href") or "link")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_single_run_report(small: Snapshot, tmp_path) -> None:
    result = simulate(small, load_policy_file(LEAST))
    path = write_report(tmp_path / "report.html", result, snapshot="small.yaml")
    html = path.read_text()
    page = Page(html)
    assert html.startswith("<!DOCTYPE html>")
    assert page.svgs == 1
    # One bar per node in each resource's column.
    assert {resource: sorted(nodes) for resource, nodes in page.bars[1].items()} == {
        "cpu": ["a", "b", "c"], "memory": ["a", "b", "c"], "pods": ["a", "b", "c"],
    }
    assert "script" not in page.tags and page.external == []  # nothing loads from the network
    text = " ".join(page.text)
    for expected in ("default/p1", "default/p2", "default/p3", "default/big", "3 Insufficient cpu",
                     "waiting for scheduling gates: [example.com/wait]", "12% \u2192 75%", "3/5"):
        assert expected in text, expected


def test_bar_widths_follow_the_usage(small: Snapshot) -> None:
    html = render_report(simulate(small, load_policy_file(LEAST)))
    # b's cpu: 500m before (12.5% of 112 px = 14 px), 2500m added (62.5% = 70 px).
    assert 'class="bar before" data-node="b" data-resource="cpu" x="124" y="75" width="14.0"' in html
    assert 'class="bar after" data-node="b" data-resource="cpu" x="138.0" y="75" width="70.0"' in html


def test_two_policies_side_by_side_with_a_diff(small: Snapshot) -> None:
    comparison = compare(small, [load_policy_file(LEAST), load_policy_file(MOST)])
    html = render_report(comparison)
    page = Page(html)
    assert page.svgs == 2
    for svg in (1, 2):
        assert sorted(page.bars[svg]["cpu"]) == ["a", "b", "c"]
    assert 'class="runs two"' in html
    diff = html[html.index("Placed differently"):]
    for pod in ("default/p1", "default/p2", "default/p3", "default/big"):
        assert pod in diff
    assert "4 pods land on a different node" in diff
    assert diff.count('class="none">unschedulable') == 1  # big, under the spreading policy


def test_text_is_escaped(shipped: Snapshot) -> None:
    html = render_report(simulate(shipped, default_policy("standalone")))
    assert "&lt;built-in standalone&gt;" in html and "<built-in" not in html
    assert Page(html).svgs == 1
    assert sorted(Page(html).bars[1]["cpu"]) == sorted(n["metadata"]["name"] for n in shipped.nodes)


def test_a_large_cluster_charts_only_the_nodes_that_changed() -> None:
    node = {"kind": "Node", "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                       "conditions": [{"type": "Ready", "status": "True"}]}}
    pods = [{"kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}} for i in range(3)]
    snapshot = Snapshot(nodes=[{**node, "metadata": {"name": f"n{i:02}"}} for i in range(50)], pods=pods)
    result = simulate(snapshot, default_policy("standalone"))
    page = Page(render_report(result))
    assert sorted(page.bars[1]["cpu"]) == sorted({p.node for p in result.placements})
    assert "3 of 50 nodes shown" in " ".join(page.text)
