"""PolicyHolder: reload on change, keep the old policy on a bad file, ConfigMap-style symlink swaps."""

from __future__ import annotations

import os
import time

import pytest

from extender.errors import PolicyError
from extender.policy.reloading import PolicyHolder

HEAD = "apiVersion: extender/v1alpha1\nkind: Policy\n"
ONE = HEAD + "filters: [{name: NodeReady}]\n"
TWO = HEAD + "filters: [{name: NodeReady}, {name: ResourceFit}]\n"
BAD = HEAD + "filters: [{name: NoSuchPlugin}]\n"


def write(path, text):
    path.write_text(text)
    # Make sure the stat signature changes even on coarse-mtime filesystems.
    stamp = time.time_ns() + 1_000_000_000
    os.utime(path, ns=(stamp, stamp))


@pytest.fixture
def outcomes():
    return []


@pytest.fixture
def holder(tmp_path, outcomes):
    path = tmp_path / "policy.yaml"
    path.write_text(ONE)
    return PolicyHolder(path, on_reload=lambda outcome, err: outcomes.append((outcome, err)))


def test_unchanged_then_success(holder, outcomes, tmp_path):
    assert holder.maybe_reload() == "unchanged"
    first = holder.engine
    write(tmp_path / "policy.yaml", TWO)
    assert holder.maybe_reload() == "success"
    assert holder.policy.filter_names == ["NodeReady", "ResourceFit"]
    assert holder.engine is not first
    assert outcomes == [("unchanged", None), ("success", None)]


def test_touch_without_change_is_unchanged(holder, tmp_path):
    write(tmp_path / "policy.yaml", ONE)
    assert holder.maybe_reload() == "unchanged"


def test_a_bad_file_keeps_the_old_policy(holder, outcomes, tmp_path, caplog):
    engine = holder.engine
    write(tmp_path / "policy.yaml", BAD)
    with caplog.at_level("ERROR"):
        assert holder.maybe_reload() == "failure"
    assert holder.engine is engine
    assert "unknown filter plugin 'NoSuchPlugin'" in outcomes[-1][1]
    assert "NoSuchPlugin" in caplog.text and "not reloaded" in caplog.text
    assert "NoSuchPlugin" in holder.last_error
    # The same bad version is reported once, not on every poll.
    assert holder.maybe_reload() == "unchanged"
    write(tmp_path / "policy.yaml", TWO)
    assert holder.maybe_reload() == "success"
    assert holder.last_error is None


def test_a_missing_file_keeps_the_old_policy(holder, tmp_path):
    engine = holder.engine
    os.unlink(tmp_path / "policy.yaml")
    assert holder.maybe_reload() == "failure"
    assert holder.engine is engine


def test_configmap_symlink_swap(tmp_path):
    # kubelet's layout: policy.yaml -> ..data/policy.yaml, ..data -> ..<timestamp>
    for name, text in (("..v1", ONE), ("..v2", TWO)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "policy.yaml").write_text(text)
    os.symlink("..v1", tmp_path / "..data")
    os.symlink("..data/policy.yaml", tmp_path / "policy.yaml")
    holder = PolicyHolder(tmp_path / "policy.yaml")
    assert holder.policy.filter_names == ["NodeReady"]
    os.symlink("..v2", tmp_path / "..data_tmp")
    os.replace(tmp_path / "..data_tmp", tmp_path / "..data")  # the atomic swap kubelet does
    assert holder.maybe_reload() == "success"
    assert holder.policy.filter_names == ["NodeReady", "ResourceFit"]


def test_an_invalid_file_at_start_up_raises(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(BAD)
    with pytest.raises(PolicyError, match="NoSuchPlugin"):
        PolicyHolder(path)
    with pytest.raises(PolicyError, match="cannot read"):
        PolicyHolder(tmp_path / "missing.yaml")


def test_a_failing_callback_does_not_stop_reloading(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(ONE)

    def broken(outcome, error):
        raise RuntimeError("metrics down")

    holder = PolicyHolder(path, on_reload=broken)
    write(path, TWO)
    assert holder.maybe_reload() == "success"


def test_background_watching(holder, outcomes, tmp_path):
    holder.start_watching(interval=0.01)
    try:
        write(tmp_path / "policy.yaml", TWO)
        deadline = time.monotonic() + 5
        while ("success", None) not in outcomes and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        holder.stop_watching()
    assert ("success", None) in outcomes
    assert holder.policy.filter_names == ["NodeReady", "ResourceFit"]


def test_preparers_run_before_the_new_policy_serves(holder, tmp_path):
    seen = []
    holder.add_preparer(lambda policy: seen.append((policy.filter_names, holder.policy.filter_names)))
    write(tmp_path / "policy.yaml", TWO)
    assert holder.maybe_reload() == "success"
    # The preparer saw the new policy while the old one was still the one serving.
    assert seen == [(["NodeReady", "ResourceFit"], ["NodeReady"])]
    assert holder.policy.filter_names == ["NodeReady", "ResourceFit"]


def test_a_failing_preparer_keeps_the_old_policy(holder, outcomes, tmp_path):
    def refuse(policy):
        raise RuntimeError("pods could not be listed")

    holder.add_preparer(refuse)
    write(tmp_path / "policy.yaml", TWO)
    assert holder.maybe_reload() == "failure"
    assert holder.policy.filter_names == ["NodeReady"]
    assert outcomes[-1] == ("failure", "could not prepare for the new policy: pods could not be listed")
