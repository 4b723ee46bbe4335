"""The webhook's "can the gang fit at all" check: certain refusals only."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.gangs.fitting import (
    REASON_MEMBERS,
    REASON_MIN_RESOURCES,
    REASON_NO_NODE,
    fits_at_all,
)

GiB = 2**30


def test_enough_room_passes() -> None:
    free = [{"cpu": 2000, "memory": 4 * GiB, "pods": 10}, {"cpu": 2000, "memory": 4 * GiB, "pods": 10}]
    assert fits_at_all([{"cpu": 1000}] * 4, 4, free) is None
    assert fits_at_all([{"cpu": 1000}] * 4, 0, []) is None  # quorum already there: nothing to check


def test_members_needing_more_than_the_sum_are_refused_with_numbers() -> None:
    misfit = fits_at_all([{"cpu": 1000}] * 4, 4, [{"cpu": 2000}, {"cpu": 1500}])
    assert misfit is not None and misfit.reason == REASON_MEMBERS
    assert misfit.message == "4 more members: cpu short by 500m"


def test_only_the_quorum_counts_and_the_smallest_members_first() -> None:
    # Three members to place, two needed: the two smallest fit in 3 CPUs.
    assert fits_at_all([{"cpu": 2000}, {"cpu": 1000}, {"cpu": 1000}], 2, [{"cpu": 3000}]) is None
    misfit = fits_at_all([{"cpu": 1000}], 2, [{"cpu": 9000}])
    assert misfit is not None and misfit.message == "2 more members needed, 1 left to place"


def test_members_fitting_no_single_node_are_refused() -> None:
    misfit = fits_at_all([{"cpu": 3000}] * 2, 2, [{"cpu": 2000}, {"cpu": 2000}, {"cpu": 2000}])
    assert misfit is not None and misfit.reason == REASON_NO_NODE
    assert misfit.message == "2 more members needed, 0 of the 2 left fit on some node"


def test_pod_slots_count_when_the_nodes_report_them() -> None:
    misfit = fits_at_all([{"cpu": 100}] * 3, 3, [{"cpu": 9000, "pods": 2}])
    assert misfit is not None and misfit.message == "3 more members: pods short by 1"
    assert fits_at_all([{"cpu": 100}] * 3, 3, [{"cpu": 9000}]) is None


def test_overcommitted_nodes_take_no_room_from_the_others() -> None:
    assert fits_at_all([{"cpu": 1000}] * 2, 2, [{"cpu": -5000}, {"cpu": 2000}]) is None


def test_min_resources_like_coscheduling_with_the_groups_own_pods_as_free() -> None:
    free = [{"cpu": 1000, "memory": GiB, "pods": 5}]
    misfit = fits_at_all([], 0, free, min_resources={"cpu": 3000, "memory": 2 * GiB}, min_count=3)
    assert misfit is not None and misfit.reason == REASON_MIN_RESOURCES
    assert misfit.message == "minResources: cpu short by 2, memory short by 1Gi"
    # The group's two running members hold 2 CPU and 1 GiB: Coscheduling counts them as free.
    assert fits_at_all([], 0, free, min_resources={"cpu": 3000, "memory": 2 * GiB}, min_count=3,
                       group_usage={"cpu": 2000, "memory": GiB}, placed=2) is None
    misfit = fits_at_all([], 0, [{"cpu": 9000, "pods": 1}], min_resources={"cpu": 1}, min_count=3)
    assert misfit is not None and misfit.message == "minResources: pods short by 2"


requests = st.fixed_dictionaries({"cpu": st.integers(0, 4000), "memory": st.integers(0, 8)})


@settings(max_examples=300, deadline=None)
@given(st.lists(requests, min_size=1, max_size=6), st.lists(requests, min_size=1, max_size=4), st.data())
def test_a_gang_that_first_fit_can_place_is_never_refused(members: list, nodes: list, data: st.DataObject) -> None:
    """Certain refusals only: whenever some placement exists (found here by trying first-fit in
    every member order), the check must pass."""
    needed = data.draw(st.integers(1, len(members)))
    order = data.draw(st.permutations(range(len(members))))
    free = [dict(n) for n in nodes]
    placed = 0
    for i in order:
        room = next((r for r in free if all(members[i][k] <= r[k] for k in r)), None)
        if room is not None:
            for k in room:
                room[k] -= members[i][k]
            placed += 1
    if placed >= needed:
        assert fits_at_all(members, needed, nodes) is None
