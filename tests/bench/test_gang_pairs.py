"""bench/bench_gang_pairs.py's bookkeeping (its rounds run in tests/e2e/test_gangs_webhook.py)."""

from __future__ import annotations

from bench.bench_gang_pairs import GangShape, Round, _pod_names, summary


def test_members_are_created_interleaved_across_gangs() -> None:
    names = [name for name, _gang in _pod_names([GangShape("a", 3), GangShape("b", 2)])]
    assert names == ["a-1", "b-1", "a-2", "b-2", "a-3"]


def test_the_summary_counts_slow_missing_and_partial_rounds() -> None:
    rounds = [Round(0.4, "a", {"a": 3, "b": 0}, []), Round(6.0, "b", {"a": 1, "b": 3}, ["a"]),
              Round(None, "", {"a": 0, "b": 0}, [])]
    row = summary("pairs", rounds)
    assert row == {"scenario": "pairs", "rounds": 3, "median_s": 3.2, "worst_s": 6.0, "over_5s": 1,
                   "no_whole_gang": 1, "partly_bound": 1}
