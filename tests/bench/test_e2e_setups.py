"""`python -m bench e2e --only`: which setups a run takes."""

from __future__ import annotations

from bench.bench_e2e import ALONE, DEFAULTS, EMPTY_FULL, EMPTY_NAMES, chosen_setups, default_setups


def _labels(only: list[str]) -> list[str]:
    return [setup.label for setup in chosen_setups(default_setups(), only)]


def test_a_whole_label_selects_that_setup_alone() -> None:
    assert _labels([ALONE, EMPTY_NAMES, DEFAULTS]) == [ALONE, EMPTY_NAMES, DEFAULTS]


def test_other_text_selects_every_label_containing_it() -> None:
    chosen = _labels(["empty extender"])
    assert chosen == [EMPTY_NAMES, EMPTY_FULL]


def test_nothing_named_runs_every_setup() -> None:
    assert _labels([]) == [setup.label for setup in default_setups()]
