"""Tests of the bench/ harnesses (not the benchmarks themselves: those print numbers)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.scheduler_perf.corpus import Workload


def load_config(root: Path, folder: str, text: str) -> list[Workload]:
    """The workloads of ``text`` written as ``root/folder/performance-config.yaml``, loaded as
    the corpus loads scheduler_perf's files (the folder names the workloads' group)."""
    from bench.scheduler_perf import corpus

    (root / folder).mkdir()
    config = root / folder / "performance-config.yaml"
    config.write_text(text)
    return corpus.load_file(config, root)
