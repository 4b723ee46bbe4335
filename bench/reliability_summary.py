"""The reliability figures: bodies fuzzed and 5xx replies, load requests, errors and p99, faults survived.

Runs the reliability suite (tests/reliability) with pytest, has it write its figures
to a JSON file, and prints them; or prints a figures file written earlier.

Usage:
  python bench/reliability_summary.py                     run the suite, print the figures
  python bench/reliability_summary.py -- -k fuzz          extra pytest arguments after --
  python bench/reliability_summary.py --from FILE         print figures written by an earlier run
  python bench/reliability_summary.py --json              the figures as JSON instead of text

Any pytest run writes the same file when $RELIABILITY_FIGURES names it, e.g.
  RELIABILITY_FIGURES=figures.json pytest tests/reliability
The exit status is pytest's (or 0 with --from).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.reliability.figures import FIGURES_ENV, summary_lines  # noqa: E402


def run_suite(pytest_args: list[str], target: Path) -> tuple[int, float]:
    env = {**os.environ, FIGURES_ENV: str(target)}
    command = [sys.executable, "-m", "pytest", "tests/reliability", "-q", "-p", "no:cacheprovider", *pytest_args]
    started = time.monotonic()
    code = subprocess.call(command, cwd=ROOT, env=env)
    return code, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--from", dest="source", type=Path, help="print this figures file instead of running")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)

    code, wall = 0, None
    if args.source is not None:
        path = args.source
    else:
        handle, name = tempfile.mkstemp(prefix="reliability-", suffix=".json")
        os.close(handle)
        path = Path(name)
        code, wall = run_suite(args.pytest_args, path)
    try:
        text = path.read_text()
    except OSError as exc:
        print(f"no figures: {exc}", file=sys.stderr)
        return code or 1
    if args.source is None:
        path.unlink(missing_ok=True)
    if not text.strip():
        print("no figures: the suite wrote nothing (did it run any reliability test?)", file=sys.stderr)
        return code or 1
    data = json.loads(text)
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print("reliability figures")
        for line in summary_lines(data):
            print(line)
        if wall is not None:
            print(f"suite wall time: {wall:.0f} s (pytest exit status {code})")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
