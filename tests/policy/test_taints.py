"""TaintToleration and TaintPreferNoSchedule."""

from __future__ import annotations

import pytest

from extender.errors import PolicyError
from extender.policy.builtin import TaintPreferNoSchedule, TaintToleration
from extender.policy.cluster_view import EMPTY_CLUSTER
from extender.policy.status import Code

from .builders import make_node, make_pod, reasons, run_filter, run_scores, taint, toleration

UNTOLERATED = ("node(s) had untolerated taint(s)",)
GPU = taint("nvidia.com/gpu", "present", "NoSchedule")


@pytest.mark.parametrize(
    ("taints", "tolerations", "expected"),
    [
        ([], [], ()),
        ([GPU], [], UNTOLERATED),
        ([taint("dedicated", "db", "NoExecute")], [], UNTOLERATED),
        ([taint("soft", "", "PreferNoSchedule")], [], ()),  # only affects the score
        ([GPU], [toleration("nvidia.com/gpu", "present", "NoSchedule")], ()),
        ([GPU], [toleration("nvidia.com/gpu", "present")], ()),  # empty effect = every effect
        ([GPU], [toleration("nvidia.com/gpu", "absent", "NoSchedule")], UNTOLERATED),
        ([GPU], [toleration("nvidia.com/gpu", operator="Exists")], ()),
        ([GPU], [toleration("nvidia.com/gpu", "present", "NoExecute")], UNTOLERATED),
        ([GPU], [toleration("other", operator="Exists")], UNTOLERATED),
        ([GPU, taint("b", "", "NoExecute")], [toleration(operator="Exists")], ()),  # empty key + Exists: all
        ([GPU], [toleration(operator="Exists", effect="NoExecute")], UNTOLERATED),
        ([taint("a", "", "NoSchedule"), taint("b", "", "NoSchedule")], [toleration("a", operator="Exists")], UNTOLERATED),
    ],
)
def test_taint_toleration(taints, tolerations, expected):
    result = run_filter(TaintToleration(), make_pod(tolerations=tolerations), make_node(taints=taints))
    assert reasons(result) == expected
    if expected:
        assert result.code == Code.UNRESOLVABLE
        assert result.plugin == "TaintToleration"


def test_detail_names_the_first_untolerated_taint():
    node = make_node(taints=[taint("a", "", "NoSchedule"), taint("node-role.kubernetes.io/control-plane", "", "NoSchedule")])
    result = run_filter(TaintToleration(), make_pod(tolerations=[toleration("a", operator="Exists")]), node)
    assert result.detail == "untolerated taint {node-role.kubernetes.io/control-plane: } (effect NoSchedule)"


def test_tolerate_everything_skips_the_plugin():
    assert TaintToleration().prefilter(make_pod(tolerations=[toleration(operator="Exists")]), EMPTY_CLUSTER) is None


def test_no_args():
    with pytest.raises(PolicyError, match="x: unknown argument"):
        TaintToleration.from_args({"x": 1})


def test_prefer_no_schedule_counts_and_reverse_normalizes():
    soft = [taint("a", "", "PreferNoSchedule"), taint("b", "1", "PreferNoSchedule"), taint("c", "", "NoSchedule")]
    nodes = [make_node("n0"), make_node("n1", taints=soft[:1]), make_node("n2", taints=soft)]
    plugin = TaintPreferNoSchedule()
    raw = run_scores(plugin, make_pod(), nodes)
    assert raw == [0, 1, 2]
    assert plugin.normalize_scores(raw) == [100, 50, 0]
    tolerant = make_pod(tolerations=[toleration("b", "1", "PreferNoSchedule")])
    assert run_scores(plugin, tolerant, nodes) == [0, 1, 1]
    # NoSchedule tolerations do not count for PreferNoSchedule taints.
    assert run_scores(plugin, make_pod(tolerations=[toleration("a", operator="Exists", effect="NoSchedule")]), nodes) == [0, 1, 2]
    assert plugin.normalize_scores([0, 0]) == [100, 100]
    assert plugin.normalize_scores([1, 3]) == [67, 0]  # 100 - 100*1//3, integer maths like Go
