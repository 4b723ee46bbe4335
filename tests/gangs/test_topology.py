"""Candidate domains for a group with a topology constraint (TopologyPlacementGenerator)."""

from __future__ import annotations

from extender.gangs.topology import REASON_NO_DOMAIN, REASON_SPLIT, placements

RACK = "example.com/rack"
NODES = {
    "a1": {RACK: "r1"}, "a2": {RACK: "r1"},
    "b1": {RACK: "r2"},
    "x": {},
}


def test_one_domain_per_label_value_nodes_without_it_left_out() -> None:
    found = placements(RACK, NODES, [])
    assert found.domains == {"r1": ("a1", "a2"), "r2": ("b1",)} and not found.reason


def test_placed_members_pin_their_domain() -> None:
    assert placements(RACK, NODES, ["a2"]).domains == {"r1": ("a1", "a2")}
    assert placements(RACK, NODES, ["a1", "a2"]).domains == {"r1": ("a1", "a2")}


def test_members_in_two_domains_or_unlabelled_nodes_are_an_error() -> None:
    split = placements(RACK, NODES, ["a1", "b1"])
    assert (split.domains, split.reason, split.message) == ({}, REASON_SPLIT, f"members already in {RACK}=r1, r2")
    assert placements(RACK, NODES, ["x"]).reason == REASON_SPLIT
    assert placements(RACK, NODES, ["gone"]).reason == REASON_SPLIT


def test_no_labelled_node() -> None:
    found = placements("example.com/zone", NODES, [])
    assert (found.domains, found.reason) == ({}, REASON_NO_DOMAIN)
    pinned = placements(RACK, {"a1": {RACK: "r1"}}, ["a1"])
    assert pinned.domains == {"r1": ("a1",)}
    only_other = placements(RACK, {"b1": {RACK: "r2"}}, [])
    assert only_other.domains == {"r2": ("b1",)}
