"""bench/bench_chaos.py's figures: pods created and bound per workload kind and pool
(``pods_by_kind``, the DRA kinds apart in ``dra_pods``), from the checker's pod watch."""

from __future__ import annotations

from typing import Any

from bench.bench_chaos import figures
from bench.chaos.checker import PodEvent, Run
from bench.chaos.cluster import Election


def pod(name: str, kind: str, node: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": name, "namespace": "chaos", "uid": f"uid-{name}",
                                         "labels": {"chaos.example/kind": kind}}, "spec": {}}
    if node:
        body["spec"]["nodeName"] = node
    return body


def test_pods_by_kind_counts_each_pod_once_per_kind_and_pool() -> None:
    events = [PodEvent(1.0, "ADDED", pod("sa-dra-template-1", "dra-template")),
              PodEvent(2.0, "MODIFIED", pod("sa-dra-template-1", "dra-template", "sa-0")),
              PodEvent(2.5, "MODIFIED", pod("sa-dra-template-1", "dra-template", "sa-0")),  # a status update
              PodEvent(3.0, "ADDED", pod("wh-dra-shared-2-0", "dra-shared")),
              PodEvent(3.0, "ADDED", pod("wh-dra-shared-2-1", "dra-shared")),
              PodEvent(4.0, "MODIFIED", pod("wh-dra-shared-2-0", "dra-shared", "wh-3")),
              PodEvent(5.0, "ADDED", pod("sa-plain-3", "plain", "sa-1")),
              PodEvent(6.0, "ADDED", pod("probe-0-sa", "probe", "sa-2"))]
    result = figures(7, 1.0, [], Run(events=events, nodes=[], pods=[]), [], {}, Election())
    assert result["pods_by_kind"] == {
        "dra-shared": {"created": 2, "bound": 1, "by_pool": {"sa": {"created": 0, "bound": 0},
                                                             "wh": {"created": 2, "bound": 1}}},
        "dra-template": {"created": 1, "bound": 1, "by_pool": {"sa": {"created": 1, "bound": 1},
                                                               "wh": {"created": 0, "bound": 0}}},
        "plain": {"created": 1, "bound": 1, "by_pool": {"sa": {"created": 1, "bound": 1},
                                                        "wh": {"created": 0, "bound": 0}}},
    }
    assert result["dra_pods"] == {"created": 3, "bound": 2}
    assert result["pods_scheduled"] == 3 and "probe" not in result["bound_by_kind"]


def test_only_the_webhook_pools_pending_pods_go_to_kube_scheduler() -> None:
    from bench.bench_chaos import webhook_pool_pending
    from bench.chaos.checker import Violation

    found = [Violation("pending-but-fits", "chaos/wh-dra-template-1", "Pending 40 s ..., yet it fits wh-2"),
             Violation("pending-but-fits", "chaos/sa-dra-template-2", "Pending 40 s ..., yet it fits sa-2"),
             Violation("pending-but-fits", "chaos/wh-gang-3", "3 members Pending 40 s ..., yet 3 fit together"),
             Violation("device-twice", "chaos/wh-x", "...")]
    assert webhook_pool_pending(found) == ["chaos/wh-dra-template-1"]
