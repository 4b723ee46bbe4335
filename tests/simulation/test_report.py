"""The HTML report: self-contained, a bar per node and resource, the tables, the comparison."""

from __future__ import annotations

import re
from collections import defaultdict
from html import escape
from html.parser import HTMLParser

from extender.cluster.snapshot import Snapshot, read_snapshot
from extender.policy.decisions import FitError
from extender.policy.defaults import default_policy
from extender.policy.loading import load_policy_file
from extender.policy.status import unschedulable
from extender.simulation.report import render_report, write_report
from extender.simulation.simulating import compare, simulate
from tests.explain.conftest import FIXTURES, LEAST, MOST


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


# ---- what the tryout found: greying, reasons, measured usage, width ---------------------------


def _name_fill(html: str, node: str) -> str:
    group = html[html.index(f'<g class="node" data-node="{node}">'):]
    return re.search(r'<text x="0" [^>]*fill="(#[0-9a-f]+)">', group)[1]


def test_a_tainted_node_that_took_tolerating_pods_is_not_greyed(shipped: Snapshot) -> None:
    result = simulate(shipped, default_policy("standalone"))
    assert "gpu-1" in {p.node for p in result.placements}  # trainer-1 tolerates dedicated=gpu
    html = render_report(result)
    assert _name_fill(html, "gpu-1") == "#0f172a"
    assert _name_fill(html, "node-4") == "#94a3b8"  # cordoned: no new pod may go there
    assert _name_fill(html, "node-5") == "#94a3b8"  # NotReady
    gpu = html[html.index('data-node="gpu-1"'):html.index('data-node="node-4"')]
    assert 'class="note taint"' in gpu and "dedicated=gpu:NoSchedule" in gpu
    assert 'class="note closed"' not in gpu
    assert "taint: only pods that tolerate it" in html


def test_each_reason_has_a_tag_of_its_own_and_preemption_a_headline(shipped: Snapshot) -> None:
    result = simulate(shipped, default_policy("standalone"))
    huge = next(u for u in result.unschedulable if u.pod == "default/huge")
    assert ". preemption: " in huge.reason  # the two summaries kube-scheduler joins
    html = render_report(result)
    tags = re.findall(r'<span class="reason">([^<]*)</span>', html)
    assert "3 Insufficient cpu" in tags and "6 Preemption is not helpful for scheduling" in tags
    assert not [tag for tag in tags if "preemption" in tag or ". " in tag], tags
    headlines = re.findall(r'<div class="headline">([^<]*)</div>', html)
    assert headlines == ["0/6 nodes are available", "preemption: 0/6 nodes are available"]


def test_a_reason_with_commas_of_its_own_stays_one_tag() -> None:
    from extender.simulation.report import _reason_html
    from extender.simulation.simulating import Unplaced


    tainted, small = unschedulable("node(s) had untolerated taint {a: b, c: d}"), unschedulable("Insufficient cpu")
    fit_error = FitError.of([tainted, tainted, small], 0, 3)
    assert str(fit_error) == "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {a: b, c: d}."
    html = _reason_html(Unplaced("p", str(fit_error), fit_error=fit_error))
    assert re.findall(r'class="reason">([^<]*)<', html) == ["1 Insufficient cpu",
                                                            "2 node(s) had untolerated taint {a: b, c: d}"]


def test_load_aware_policies_show_the_measured_usage() -> None:
    fixtures = FIXTURES
    result = simulate(read_snapshot(fixtures / "load.yaml"), load_policy_file(fixtures / "load-policy.yaml"))
    assert all(n.measured for n in result.nodes)
    html = render_report(result)
    assert "Measured usage after" in html
    for usage in result.nodes:
        group = html[html.index(f'<g class="node" data-node="{usage.node}">'):]
        group = group[:group.index("</g><g class=\"node\"") if "</g><g class=\"node\"" in group else None]
        assert f"<title>{escape(usage.measured)}</title>" in group
    assert result.notes
    for note in result.notes:
        assert f'<p class="source run-note">{escape(note)}</p>' in html
    # Without a usage source there is no such column.
    assert "Measured usage after" not in render_report(simulate(read_snapshot(fixtures / "load.yaml"),
                                                                load_policy_file(LEAST)))


def test_the_page_uses_a_wide_window_and_the_chart_is_not_scaled_up(small: Snapshot) -> None:
    html = render_report(simulate(small, load_policy_file(LEAST)))
    width = int(re.search(r"main \{ max-width:(\d+)px", html)[1])
    assert width >= 1600
    assert ".runs.one" not in html  # one run fills the page
    svg = re.search(r'<svg class="usage" width="(\d+)" height="(\d+)" viewBox="0 0 (\d+) (\d+)"', html)
    assert svg[1] == svg[3] and svg[2] == svg[4]  # drawn at its own size, shrunk only to fit
    assert "svg.usage { width:auto; max-width:100%; height:auto; }" in html
