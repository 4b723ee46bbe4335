"""Fixtures for explain and simulate: the shipped snapshot loaded into a state, the small test snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.cluster.snapshot import Snapshot, load_into, read_snapshot
from extender.cluster.state import ClusterState
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from tests.helpers import SNAPSHOT

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
SMALL = FIXTURES / "small.yaml"
LEAST = FIXTURES / "least.yaml"
MOST = FIXTURES / "most.yaml"
EXTRA = FIXTURES / "extra.yaml"


@pytest.fixture(scope="session")
def shipped() -> Snapshot:
    return read_snapshot(SNAPSHOT)


@pytest.fixture
def shipped_state(shipped: Snapshot) -> ClusterState:
    state = ClusterState()
    load_into(state, shipped)
    return state


@pytest.fixture(scope="session")
def standalone() -> Engine:
    return Engine(default_policy("standalone"))


@pytest.fixture(scope="session")
def small() -> Snapshot:
    return read_snapshot(SMALL)
