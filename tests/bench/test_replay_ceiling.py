"""bench.bench_replay's offline ceiling: the most any policy could place by x = 100 (docs/replay.md)."""

from __future__ import annotations

import pytest

from bench.bench_replay import _fillings, ceiling
from extender.model.gpushare import PodShape

SHARE_810 = PodShape(1000, 810, 1)
SHARE_470 = PodShape(1000, 470, 1)
WHOLE = PodShape(1000, 1000, 1)


def test_the_ways_to_fill_one_gpu_are_the_maximal_ones():
    sizes = [810, 470, 160]
    found = sorted(tuple(sizes[j] for j in pattern) for pattern in _fillings(sizes))
    # 810+160 leaves 30; 470+470 leaves 60 (a 160 no longer fits); 470+160*3 and 160*6 likewise
    assert found == [(160, 160, 160, 160, 160, 160), (470, 160, 160, 160), (470, 470), (810, 160)]


def test_a_gpu_is_better_spent_on_two_470s_than_on_one_810():
    # 10 GPUs; 6 shares of 810 and 11 of 470 arrive (100.3 %), then more that come too late.
    # Placing every 810 leaves 4 GPUs for 8 of the 470s: 86.2 %. The relaxation gives 4.5 GPUs to
    # the 810s and 5.5 to pairs of 470s: 4.5*810 + 5.5*940 = 8,815 milli, 88.15 %.
    shapes = [SHARE_810] * 6 + [SHARE_470] * 11 + [SHARE_810] * 3
    assert ceiling(shapes, 10_000) == pytest.approx(88.15)


def test_whole_gpus_go_first_and_the_rest_is_shares():
    # 3 GPUs: 2 whole GPUs arrive, then an 810 (x = 93.7), then a 470 would bring x to 109.
    assert ceiling([WHOLE, WHOLE, SHARE_810, SHARE_470], 3_000) == pytest.approx(281_000 / 3_000)
