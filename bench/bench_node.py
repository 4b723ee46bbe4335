"""The local node's times: how long a node takes to be Ready, and the in-cluster suite's runs.

    python -m bench.bench_node --starts 3          # start and stop the node cluster 3 times
    python -m bench.bench_node --suite 5           # run `pytest -m node` 5 times in a row

A failed run's pytest output and the daemons' logs (kubelet, containerd, kube-proxy, the
control plane's, the pod logs still on the node) are kept under --logs (run-N, run-N.out).

Needs what the node tests need (root, containerd, the KUBEBUILDER_ASSETS binaries with
kubelet and kube-proxy: tests/e2e/node.py says what is missing). Prints one row per run and
then the median and the worst; the suite's exit codes are printed too (a "5 in a row" claim
is only true if every one is 0). Not part of `make test` or `make bench`: it owns the
machine's iptables and a node for minutes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEEP_LOGS = "E2E_NODE_LOGS"  # tests.e2e.nodecluster.KEEP_LOGS (not imported: pytest runs apart)


def starts(count: int) -> None:
    from tests.e2e.images import pause_image
    from tests.e2e.nodecluster import NodeCluster

    pause_image()  # built once, outside the timing
    rows = []
    for run in range(1, count + 1):
        started = time.monotonic()
        with NodeCluster() as cluster:
            timings = dict(cluster.timings)
        timings["start+stop"] = time.monotonic() - started
        rows.append(timings)
        print(f"run {run}: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()), flush=True)
    for key in rows[0]:
        values = [r[key] for r in rows]
        print(f"{key:>24}: median {statistics.median(values):.1f}s, worst {max(values):.1f}s")


def suite(count: int, args: list[str], logs: Path) -> int:
    durations, codes = [], []
    for run in range(1, count + 1):
        started = time.monotonic()
        kept = logs / f"run-{run}"
        shutil.rmtree(kept, ignore_errors=True)
        env = {**os.environ, KEEP_LOGS: str(kept)}
        result = subprocess.run([sys.executable, "-m", "pytest", "-m", "node", "-q", "-p", "no:cacheprovider", *args],
                                cwd=ROOT, env=env, capture_output=True, text=True, check=False)  # fmt: skip
        durations.append(time.monotonic() - started)
        codes.append(result.returncode)
        summary = [line for line in result.stdout.splitlines() if " passed" in line or " failed" in line
                   or " error" in line][-1:]  # fmt: skip
        print(f"run {run}: {durations[-1]:.0f}s exit {result.returncode} {' '.join(summary)}", flush=True)
        if result.returncode != 0:  # the assertions, not the daemons' log tails (those are kept)
            (logs / f"run-{run}.out").write_text(result.stdout + result.stderr)
            print("\n".join(line[:2000] for line in result.stdout.splitlines()
                            if line.startswith(("E   ", "FAILED", "ERROR", "tests/"))))
            print(f"  pytest's output: {logs / f'run-{run}.out'}; the daemons' logs: {kept}")
        else:
            shutil.rmtree(kept, ignore_errors=True)
    print(f"suite: median {statistics.median(durations):.0f}s, worst {max(durations):.0f}s, "
          f"exit codes {codes} ({'all passed' if not any(codes) else 'NOT all passed'})")
    return 0 if not any(codes) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=0, help="start and stop the node cluster N times")
    parser.add_argument("--suite", type=int, default=0, help="run the node tests N times in a row")
    parser.add_argument("--logs", type=Path, default=Path("/var/tmp/node-suite-logs"),
                        help="where a failed --suite run's output and daemons' logs are kept")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments for --suite (after --)")
    options = parser.parse_args()
    if not options.starts and not options.suite:
        options.starts = 3
    if options.starts:
        starts(options.starts)
    return suite(options.suite, options.pytest_args, options.logs) if options.suite else 0


if __name__ == "__main__":
    raise SystemExit(main())
