"""`make bench` (python -m bench): every benchmark in one run, printed as tables.

Not part of `make test`: these print numbers, they do not assert them. Ratios
are computed from figures taken in the same run, since the machines are noisy.
Run one part with `python -m bench engine|interpod|load|state|webhook|standalone|volumes|devices|dra|gangs|matrix|e2e`,
and `--quick` for a shorter pass. `python -m bench chaos` (faults under load on a real control plane,
bench/bench_chaos.py) is apart: it prints a verdict, not a table. `python -m bench scheduler-perf --help`:
kube-scheduler's own scheduler_perf workloads against kube-scheduler and ours (bench/scheduler_perf/).
`python -m bench gang-scale --help`: a gang of 1,000 on 5,000 nodes under both (bench/bench_gang_scale.py).
`python -m bench gang-pairs --help`: competing gangs through the webhook, time to the first whole gang
(bench/bench_gang_pairs.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.tables import Rows, print_table


def _engine(quick: bool) -> Rows:
    from bench import bench_engine

    return bench_engine.run((100, 1000) if quick else (100, 1000, 5000))


def _load(quick: bool) -> Rows:
    from bench import bench_load

    return bench_load.run((1000,) if quick else (1000, 5000), runs=3 if quick else 7)


def _state(quick: bool) -> Rows:
    from bench import bench_cluster_state

    return bench_cluster_state.run()


def _interpod(quick: bool) -> Rows:
    from bench import bench_interpod

    return bench_interpod.run(1000, 30_000, 3) if quick else bench_interpod.run()


def _webhook(quick: bool) -> Rows:
    from bench import bench_webhook

    return bench_webhook.run(quick)


def _standalone(quick: bool) -> Rows:
    from bench import bench_standalone

    return bench_standalone.run()


def _volumes(quick: bool) -> Rows:
    from bench import bench_volumes

    return bench_volumes.run((1000,) if quick else (1000, 5000))


def _devices(quick: bool) -> Rows:
    from bench import bench_devices

    return bench_devices.run(quick)


def _dra(quick: bool) -> Rows:
    from bench import bench_dra

    return bench_dra.run((1000,) if quick else (1000, 5000), runs=3 if quick else 5)


def _gangs(quick: bool) -> Rows:
    from bench import bench_gangs

    return bench_gangs.run(quick)


def _preemption(quick: bool) -> Rows:
    from bench import bench_preemption

    return bench_preemption.run(nodes=100 if quick else 200)


def _loopback(quick: bool) -> Rows:
    from bench import bench_loopback

    return bench_loopback.run(quick)


def _e2e(quick: bool) -> Rows:
    from bench import bench_e2e

    return bench_e2e.run(pods=500 if quick else 1000, repeat=1 if quick else 3)


def _matrix(quick: bool) -> Rows:
    from bench import bench_webhook

    return bench_webhook.worker_matrix(seconds=2.0 if quick else 4.0)


PARTS: dict[str, Callable[[bool], Rows]] = {
    "engine": _engine, "interpod": _interpod, "load": _load, "state": _state, "webhook": _webhook,
    "standalone": _standalone, "volumes": _volumes, "devices": _devices, "dra": _dra, "loopback": _loopback,
    "gangs": _gangs, "preemption": _preemption,
}
# Not in the default set: matrix takes long, e2e needs KUBEBUILDER_ASSETS (it says so and
# returns nothing without them).
EXTRA: dict[str, Callable[[bool], Rows]] = {"matrix": _matrix, "e2e": _e2e}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["scheduler-perf"]:  # kube-scheduler's scheduler_perf corpus, its own options
        from bench.scheduler_perf import runner

        return runner.main(argv[1:])
    if argv[:1] == ["gang-scale"]:  # a gang of 1,000 on 5,000 nodes, both schedulers, its own options
        from bench import bench_gang_scale

        return bench_gang_scale.main(argv[1:])
    if argv[:1] == ["gang-pairs"]:  # competing gangs through the webhook on a real control plane
        from bench import bench_gang_pairs

        return bench_gang_pairs.main(argv[1:])
    if argv[:1] == ["e2e"] and len(argv) > 1:  # e2e's own options: --repeat, --only, --py-spy, ...
        from bench import bench_e2e

        return bench_e2e.main(argv[1:])
    if argv[:1] == ["chaos"]:  # its own options and output: --minutes, --seed, --json, ...
        from bench import bench_chaos

        return bench_chaos.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench", description="Run the benchmarks, print tables.")
    parser.add_argument("parts", nargs="*", metavar="PART",
                        help=f"any of {', '.join([*PARTS, *EXTRA])} (default: all but matrix and e2e)")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    parser.add_argument("--json", type=Path, help="also write all rows to this file")
    options = parser.parse_args(argv)
    unknown = [part for part in options.parts if part not in PARTS and part not in EXTRA]
    if unknown:  # checked here: argparse's choices reject an empty nargs="*" list on 3.11
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join([*PARTS, *EXTRA])}")
    chosen = options.parts or list(PARTS)
    everything: dict[str, Rows] = {}
    for name in chosen:
        started = time.perf_counter()
        rows = {**PARTS, **EXTRA}[name](options.quick)
        everything[name] = rows
        print_table(f"{name} ({time.perf_counter() - started:.0f} s)", rows)
        sys.stdout.flush()
    if options.json:
        options.json.write_text(json.dumps(everything, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
