"""`extender schedule`: the standalone scheduler for the pods that name it in spec.schedulerName."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Any

import click

from extender.checks.permissions import DEFAULT_NAMESPACE, SERVICE_ACCOUNTS, required_permissions
from extender.errors import ExtenderError
from extender.logs import setup_logging
from extender.scheduler.profiles import DEFAULT_SCHEDULER_NAME, build_profiles, parse_profile_option

__all__ = ["schedule", "default_lease_namespace"]

log = logging.getLogger(__name__)

IN_CLUSTER_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
FALLBACK_LEASE_NAMESPACE = "kube-system"


def default_lease_namespace(path: str = IN_CLUSTER_NAMESPACE_FILE) -> str:
    """The pod's own namespace when running in a cluster, else kube-system (as kube-scheduler)."""
    try:
        return Path(path).read_text(encoding="utf-8").strip() or FALLBACK_LEASE_NAMESPACE
    except OSError:
        return FALLBACK_LEASE_NAMESPACE


def _parse_service_account(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, str] | None:
    if value is None:
        return None
    namespace, sep, name = value.partition(":")
    if not sep or not namespace or not name or ":" in name:
        raise click.BadParameter("expected NAMESPACE:NAME, e.g. scheduler-extender:extender-scheduler")
    return namespace, name


def _parse_profiles(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[tuple[str, str]]:
    parsed = []
    for value in values:
        try:
            parsed.append(parse_profile_option(value))
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return parsed


def _preflight(api_client: Any, leader_elect: bool, lease_namespace: str,
               service_account: tuple[str, str] | None, devices: bool = False) -> None:
    """Refuse to start without every permission, naming each missing one (exit status 1).

    `devices`: a policy shares GPUs, so binds write the device ledger's Leases."""
    # late: checks.preflight loads the kubernetes client (~0.3 s), and `extender schedule --help` (which
    # imports this module) needs none of it
    from extender.checks.preflight import PreflightError, check_permissions, format_missing

    permissions = required_permissions("standalone", leader_elect=leader_elect, devices=devices)
    try:
        missing = check_permissions(api_client, permissions, namespace=lease_namespace)
    except PreflightError as exc:
        click.echo(f"error: cannot check permissions: {exc}", err=True)
        raise SystemExit(1) from None
    if missing:
        namespace, name = service_account or (
            default_lease_namespace() if Path(IN_CLUSTER_NAMESPACE_FILE).is_file() else DEFAULT_NAMESPACE,
            SERVICE_ACCOUNTS["standalone"],
        )
        click.echo("error: the scheduler lacks permissions it needs and will not start.", err=True)
        click.echo(format_missing(missing, name, namespace, target_namespace=lease_namespace), err=True)
        click.echo("Fix the RBAC rules, or pass --skip-preflight to start anyway.", err=True)
        raise SystemExit(1)
    log.info("preflight: all %d permissions granted", len(permissions))


def _shares_devices(profiles: list[Any]) -> bool:
    # late: the built-in plugins cost ~0.2 s to import, and `extender schedule --help` needs none of them
    from extender.policy.builtin import DeviceFit

    return any(isinstance(f, DeviceFit) for profile in profiles for f in profile.engine.policy.filters)


def _catch_stop_signals() -> tuple[threading.Event, dict[signal.Signals, Any]]:
    """Handle SIGTERM and SIGINT from the first moment: in a container this process is PID 1,
    which the kernel does not kill on a signal it has no handler for, so a pod deleted while
    it starts would run (and could take the lease and bind) until the kubelet's SIGKILL at
    the end of the grace period. Returns the event they set and the handlers they replaced."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    return stop, previous


def _wait_for_signal(stop: threading.Event) -> None:
    """Block until SIGTERM or SIGINT (graceful shutdown starts after it)."""
    while not stop.wait(1.0):
        pass


@click.command()
@click.option("--scheduler-name", default=DEFAULT_SCHEDULER_NAME, show_default=True,
              help="Schedule pods whose spec.schedulerName is this.")
@click.option("--policy", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Policy file for --scheduler-name (reloaded on change) [default: built-in standalone].")
@click.option("--profile", "profiles", multiple=True, callback=_parse_profiles, metavar="NAME=POLICYFILE",
              help="Also schedule pods of schedulerName NAME with this policy (repeatable; NAME= for the default).")
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True,
              help="Run several replicas; only the holder of the Lease schedules.")
@click.option("--lease-name", default=DEFAULT_SCHEDULER_NAME, show_default=True)
@click.option("--lease-namespace", default=None,
              help="Namespace of the leader-election Lease and of the device ledger Leases "
                   "[default: the pod's namespace in a cluster, else kube-system].")
@click.option("--lease-duration", type=click.FloatRange(min=1), default=15.0, show_default=True,
              help="Seconds a follower waits after the last renewal before taking over.")
@click.option("--renew-deadline", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="Seconds the leader keeps trying to renew before it stops scheduling.")
@click.option("--retry-period", type=click.FloatRange(min=0.05), default=2.0, show_default=True,
              help="Seconds between lease attempts.")
@click.option("--kubeconfig", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--context", default=None, help="kubeconfig context.")
@click.option("--skip-preflight", is_flag=True, help="Start without checking RBAC permissions first.")
@click.option("--metrics-bind", "--health-bind", "metrics_bind", default="0.0.0.0:10251", show_default=True,
              help="HOST:PORT for /healthz, /readyz and /metrics (empty: off).")
@click.option("--percentage-of-nodes-to-score", type=click.IntRange(0, 100), default=0, show_default=True,
              help="Stop filtering once this share of nodes is feasible (0: adaptive, as kube-scheduler).")
@click.option("--parallel-binds", type=click.IntRange(1, 256), default=16, show_default=True,
              help="Binds in flight at once.")
@click.option("--disable-preemption", is_flag=True,
              help="Never evict lower-priority pods for a pod that fits nowhere (it just waits).")
@click.option("--service-account", callback=_parse_service_account, default=None, metavar="NS:NAME",
              help=f"The account we run as, for the preflight message "
                   f"[default: {DEFAULT_NAMESPACE}:{SERVICE_ACCOUNTS['standalone']}].")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--log-level", default="INFO", show_default=True)
def schedule(scheduler_name: str, policy: str | None, profiles: list[tuple[str, str]], leader_elect: bool,
             lease_name: str, lease_namespace: str | None, lease_duration: float, renew_deadline: float,
             retry_period: float, kubeconfig: str | None, context: str | None, skip_preflight: bool,
             metrics_bind: str, percentage_of_nodes_to_score: int, parallel_binds: int, disable_preemption: bool,
             service_account: tuple[str, str] | None, log_format: str, log_level: str) -> None:
    """Schedule pending pods of --scheduler-name (and each --profile) with the policy engine.

    \b
    Watches nodes, pods, and the Pending unbound pods of each schedulerName; places
    each pod on the best node the policy allows and binds it through the Binding
    subresource. Unschedulable pods get a FailedScheduling Event and the condition
    PodScheduled=False/Unschedulable, and are retried when the cluster changes.
    SIGTERM stops taking pods, finishes binds in flight and releases the Lease.
    """
    # late: the scheduler, the kubernetes client and prometheus_client cost ~0.6 s to import, and
    # `extender schedule --help` (which imports this module) needs none of it
    from extender.kube import deviceledger
    from extender.kube.client import build_api_client
    from extender.scheduler.health import HealthServer
    from extender.scheduler.leader import LeaderElector
    from extender.scheduler.standalone import Scheduler, connections_needed
    from extender.startup import fail, reach_api_server, tune_gc

    setup_logging(log_format, log_level)
    stop, previous_handlers = _catch_stop_signals()
    tune_gc()
    lease_namespace = lease_namespace or default_lease_namespace()
    try:
        built = build_profiles(scheduler_name, policy, profiles)
        api_client = build_api_client(kubeconfig, context,
                                      pool_size=connections_needed(parallel_binds, len(built)))
        reach_api_server(api_client)
        deviceledger.configure(api_client, namespace=lease_namespace)
        if not skip_preflight:
            _preflight(api_client, leader_elect, lease_namespace, service_account, _shares_devices(built))
        leader = LeaderElector(api_client, namespace=lease_namespace, name=lease_name,
                               lease_duration=lease_duration, renew_deadline=renew_deadline,
                               retry_period=retry_period) if leader_elect else None
    except (ExtenderError, ValueError) as exc:
        fail(str(exc), log_format)
    if stop.is_set():  # told to stop while starting: nothing was started yet
        log.info("stopped before scheduling started")
        return
    scheduler = Scheduler(api_client, built, leader=leader, parallel_binds=parallel_binds,
                          percentage_of_nodes_to_score=percentage_of_nodes_to_score,
                          preemption=not disable_preemption)
    health = None
    if metrics_bind:
        try:
            health = HealthServer(metrics_bind, healthz=scheduler.health, readyz=scheduler.readiness)
        except (OSError, ValueError) as exc:
            raise click.ClickException(f"--metrics-bind {metrics_bind}: {exc}") from None
        health.start()
    scheduler.start()
    try:
        _wait_for_signal(stop)
    finally:
        scheduler.stop()
        if health is not None:
            health.stop()
        for sig, old in previous_handlers.items():
            signal.signal(sig, old)
