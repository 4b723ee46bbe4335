"""Third-party plugins: the example package, used directly and installed through its entry point."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from extender.errors import PolicyError
from extender.policy import enqueue
from extender.policy.engine import Engine, Policy
from extender.policy.loading import load_policy
from extender.scheduler.hints import QueueingHints

from .builders import make_node, make_pod

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugin"
POLICY = """
apiVersion: extender/v1alpha1
kind: Policy
filters:
  - name: ResourceFit
  - name: MaxPodsPerNode
    args: {max: 2}
scores:
  - name: FewestPods
    weight: 2
"""


@pytest.fixture
def example_registry(registry, monkeypatch):
    """The example package imported from its source tree and registered by hand (no install)."""
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    import extender_example_plugin

    extender_example_plugin.register(registry)
    return registry


def test_example_plugins_in_a_policy(example_registry):
    engine = Engine(load_policy(POLICY, registry=example_registry))
    nodes = [make_node("busy", running=[make_pod("a"), make_pod("b")]), make_node("one", running=[make_pod("c")]),
             make_node("idle")]
    decision = engine.decide(make_pod(), nodes)
    assert decision.failed["busy"].reasons == ("node(s) had reached the policy's pod limit",)
    assert decision.failed["busy"].plugin == "MaxPodsPerNode"
    assert decision.normalized_scores["FewestPods"] == [0.0, 100.0]
    assert decision.ranking()[0][0].name == "idle"


def test_example_plugin_args_are_checked(example_registry):
    with pytest.raises(PolicyError, match=r"filters\[1\]\.args\.max: must be an integer of at least 1"):
        load_policy(POLICY.replace("max: 2", "max: 0"), registry=example_registry)


@pytest.fixture(scope="session")
def installed_example():
    """pip-install the example package (editable) into this interpreter's environment."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
         "-e", str(EXAMPLE)],
        capture_output=True, text=True, timeout=300,
    )
    if result.returncode != 0:
        pytest.fail(f"pip install -e {EXAMPLE} failed:\n{result.stdout}\n{result.stderr}")
    return EXAMPLE


@pytest.mark.slow
def test_installed_plugin_is_found_by_name(installed_example, tmp_path):
    # A fresh interpreter, as `extender serve` would be: only the entry point can find the plugin.
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    script = textwrap.dedent(
        f"""
        import json
        from extender.policy.loading import load_policy_file
        policy = load_policy_file({str(policy)!r})
        print(json.dumps([type(p).__module__ for p in policy.filters] +
                         [type(s.plugin).__module__ for s in policy.scorers]))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [
        "extender.policy.builtin.fit",
        "extender_example_plugin.plugins",
        "extender_example_plugin.plugins",
    ]


def test_the_example_plugins_implement_the_documented_protocols(example_registry) -> None:
    """docs/plugins.md points plugin authors at the example: it must pass through the contract unchanged."""
    from extender.policy.plugins import (
        FilterPlugin,
        NormalizeScores,
        PreFilterPlugin,
        ScorePlugin,
        extension_points,
    )

    limit = example_registry.build_filter("MaxPodsPerNode", {"max": 2})
    fewest = example_registry.build_scorer("FewestPods", {})
    assert isinstance(limit, FilterPlugin) and not isinstance(limit, PreFilterPlugin)
    assert isinstance(fewest, ScorePlugin) and isinstance(fewest, NormalizeScores)
    points = extension_points(fewest)
    assert (points.score, points.normalize_scores, points.prescore) == (fewest.score, fewest.normalize_scores, None)


def test_the_example_filter_registers_its_events_for_the_queue(example_registry) -> None:
    """docs/plugins.md's third-party plugin declares its own events: the standalone queue retries
    the pods it refused after a pod deletion (its hint: a capped namespace), not a node relabel."""
    limit = example_registry.build_filter("MaxPodsPerNode", {"max": 2, "namespaces": ["batch"]})
    hints = QueueingHints.of([Policy(filters=(limit,))])
    refused = frozenset({"MaxPodsPerNode"})
    batch, other = make_pod("w", namespace="batch"), make_pod("w", namespace="web")
    deleted = hints.wakes(enqueue.PODS, enqueue.DELETE, None)
    assert deleted is not None and deleted(batch, refused) and not deleted(other, refused)
    assert hints.wakes(enqueue.NODES, enqueue.ADD, None) is None  # it says yes: every pod moves
    relabelled = hints.wakes(enqueue.NODES, enqueue.UPDATE_NODE_LABEL, None)
    assert relabelled is not None and not relabelled(batch, refused)
