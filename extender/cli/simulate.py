"""`extender simulate`: where would the standalone scheduler put the pending pods of a snapshot.

The snapshot is never changed: each policy runs on its own in-memory copy. With two
`--policy` options the runs are compared on the same snapshot and seed. Pod groups are placed
all or nothing (extender.simulation.gangcycles).
"""

from __future__ import annotations

import json

import click

from extender.cli.explain_command import policy_from_option
from extender.cluster.snapshot import read_snapshot
from extender.errors import ExtenderError

__all__ = ["simulate"]


@click.command()
@click.argument("snapshot", type=click.Path(exists=True))
@click.option("--policy", "policies", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Policy file; give it twice to compare two policies (default: the built-in standalone policy).")
@click.option("--pods", "pods_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Extra pods (YAML/JSON) to schedule along with the snapshot's pending ones.")
@click.option("--html", "html", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write a self-contained HTML report (charts, placements, reasons) here.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed for breaking ties between equally scored nodes; same seed, same result.")
@click.option("--percentage-of-nodes-to-score", type=click.IntRange(0, 100), default=0, show_default=True,
              help="As the standalone scheduler's option: 0 = kube-scheduler's adaptive default.")
def simulate(snapshot: str, policies: tuple[str, ...], pods_file: str | None, html: str | None,
                     output: str, seed: int, percentage_of_nodes_to_score: int) -> None:
    """Schedule SNAPSHOT's pending pods (plus --pods) in priority order, in memory, and report.

    Prints each placement, each unschedulable pod with the reason kube-scheduler would
    give ("0/6 nodes are available: ..."), and the per-node cpu, memory and pod usage
    before and after. Pod groups (PodGroup objects in SNAPSHOT, of scheduling.k8s.io/v1alpha2
    or Coscheduling) are placed all or nothing, as the standalone scheduler does, and each is
    reported complete or why not.
    """
    # late: simulate reads node usage through the metrics API reader, which loads the kubernetes
    # client and prometheus_client (~0.5 s); `extender --help` imports this module and needs neither
    from extender.simulation import simulating
    from extender.simulation.report import write_report

    if len(policies) > 2:
        raise click.UsageError("--policy can be given at most twice (to compare two policies)")
    loaded = [policy_from_option(path) for path in policies] or [policy_from_option(None)]
    try:
        cluster = read_snapshot(snapshot)
        extra = simulating.read_pods(pods_file) if pods_file else []
        outcome: simulating.SimulationResult | simulating.Comparison
        if len(loaded) == 1:
            outcome = simulating.simulate(cluster, loaded[0], extra_pods=extra, seed=seed,
                               percentage_of_nodes_to_score=percentage_of_nodes_to_score)
        else:
            outcome = simulating.compare(cluster, loaded, extra_pods=extra, seed=seed,
                              percentage_of_nodes_to_score=percentage_of_nodes_to_score)
    except ExtenderError as exc:
        raise click.ClickException(str(exc)) from None
    if html:
        try:
            write_report(html, outcome, snapshot=snapshot)
        except OSError as exc:
            raise click.ClickException(f"cannot write {html}: {exc}") from None
        click.echo(f"wrote {html}", err=True)
    if output == "json":
        click.echo(json.dumps(simulating.to_json(outcome), indent=2))
    else:
        click.echo(simulating.render_table(outcome), nl=False)
