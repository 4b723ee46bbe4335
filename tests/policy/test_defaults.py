"""The shipped policy files are the built-in defaults, commented."""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.errors import PolicyError
from extender.policy import builtin
from extender.policy.defaults import default_policy
from extender.policy.loading import load_policy_file

CONFIG = Path(__file__).resolve().parents[2] / "config"


@pytest.mark.parametrize(("file", "mode"), [("policy.yaml", "standalone"), ("policy-webhook.yaml", "webhook")])
def test_config_file_loads_to_the_default(file, mode):
    loaded = load_policy_file(CONFIG / file)
    default = default_policy(mode)
    assert loaded.filters == default.filters
    assert loaded.scorers == default.scorers


def test_standalone_runs_every_built_in_filter():
    names = default_policy("standalone").filter_names
    assert sorted(names) == sorted(plugin.name for plugin in builtin.FILTERS)


def test_webhook_does_not_repeat_kube_scheduler():
    policy = default_policy("webhook")
    assert policy.filter_names == ["NodeReady", "NodeLabels"]
    assert policy.scorers == ()


def test_unknown_mode():
    with pytest.raises(PolicyError, match="unknown mode 'simulate'"):
        default_policy("simulate")
