"""`extender check`: catch configuration and RBAC mistakes before a rollout.

Checks what it is given: a policy file, KubeSchedulerConfiguration files (strictly,
as kube-scheduler decodes them, plus our routes), and, when a cluster is at hand
(--kubeconfig/--context, or running in a pod), the RBAC permissions of the
ServiceAccount the chosen mode runs as. Exit status 1 on any problem, so it can
gate a CI job or an init container.
"""

from __future__ import annotations

from pathlib import Path

import click

from extender.checks.configs import check_policy, check_scheduler_config
from extender.checks.permissions import (
    DEFAULT_NAMESPACE,
    MODES,
    SERVICE_ACCOUNTS,
    required_permissions,
    service_account_user,
)
from extender.errors import ClusterError

__all__ = ["check"]


def _parse_service_account(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[str, str] | None:
    if value is None:
        return None
    namespace, sep, name = value.partition(":")
    if not sep or not namespace or not name or ":" in name:
        raise click.BadParameter(
            "expected NAMESPACE:NAME, e.g. scheduler-extender:extender-webhook"
        )
    return namespace, name


def _report(title: str, problems: list[str]) -> bool:
    """Print one section; True when it found nothing wrong."""
    if not problems:
        click.echo(f"{title}: ok")
        return True
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    click.echo(f"{title}: {count}")
    for problem in problems:
        click.echo(f"  {problem}")
    return False


# The files to validate: not `exists=True`, so a missing file is reported in its section with the rest.
_FILE = click.Path(dir_okay=False, path_type=Path)


@click.command()
@click.option("--policy", type=_FILE, default=None, help="A policy file to validate.")
@click.option("--scheduler-config", "scheduler_configs", type=_FILE, multiple=True,
              help="A KubeSchedulerConfiguration file to validate strictly (repeatable).")
@click.option(
    "--url-prefix",
    default="",
    show_default=True,
    help="The webhook's --url-prefix: extender verbs must reach our routes under it.",
)
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None)
@click.option("--context", default=None, help="kubeconfig context.")
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default="webhook",
    show_default=True,
    help="Which component's permissions to check (and, when given, which mode the --policy is for).",
)
@click.option(
    "--service-account",
    callback=_parse_service_account,
    default=None,
    metavar="NS:NAME",
    help=f"The account the component runs as [default: {DEFAULT_NAMESPACE}:"
    f"{SERVICE_ACCOUNTS['webhook']} or {DEFAULT_NAMESPACE}:{SERVICE_ACCOUNTS['standalone']}].",
)
@click.option(
    "--enable-bind/--disable-bind",
    default=True,
    show_default=True,
    help="Webhook mode: whether /bind is served (it needs the binding permissions).",
)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=True,
    show_default=True,
    help="Standalone mode: whether leader election is on (it needs the Lease permissions).",
)
@click.option(
    "--lease-namespace",
    default=None,
    help="Standalone mode: namespace of the leader-election Lease [default: the account's].",
)
@click.option(
    "--cluster/--no-cluster",
    "use_cluster",
    default=True,
    show_default=True,
    help="Check permissions when a cluster is configured (--no-cluster: files only).",
)
@click.pass_context
def check(
    ctx: click.Context,
    policy: Path | None,
    scheduler_configs: tuple[Path, ...],
    url_prefix: str,
    kubeconfig: str | None,
    context: str | None,
    mode: str,
    service_account: tuple[str, str] | None,
    enable_bind: bool,
    leader_elect: bool,
    lease_namespace: str | None,
    use_cluster: bool,
) -> None:
    """Validate policy and kube-scheduler files and the RBAC permissions in the cluster.

    \b
    Examples:
      extender check --policy config/policy.yaml
      extender check --scheduler-config config/kube-scheduler-http.yaml
      extender check --kubeconfig ~/.kube/config --mode standalone

    Out of the cluster the permissions are checked by impersonating the
    ServiceAccount (as `kubectl auth can-i --as=...` does), which needs the
    impersonate permission; in a pod they are checked for the pod's own account.
    Exit status: 0 when everything checked is fine, 1 otherwise.
    """
    # late: the kubernetes client costs ~0.3 s to import, and `extender check --help` (which imports
    # this module) needs none of it
    from extender.kube.client import in_cluster

    cluster_wanted = use_cluster and bool(kubeconfig or context or in_cluster())
    if policy is None and not scheduler_configs and not cluster_wanted:
        raise click.UsageError(
            "nothing to check: give --policy, --scheduler-config, or a cluster "
            "(--kubeconfig/--context, or run in a pod)"
        )
    ok = True
    if policy is not None:
        # A policy is checked for a mode only when --mode says so: without it, either mode's policy passes.
        explicit = ctx.get_parameter_source("mode") == click.core.ParameterSource.COMMANDLINE
        ok &= _report(f"policy {policy}", check_policy(policy, mode if explicit else None))
    for path in scheduler_configs:
        problems = check_scheduler_config(path, url_prefix=url_prefix)
        ok &= _report(f"scheduler config {path}", problems)
    if cluster_wanted:
        namespace, name = service_account or (DEFAULT_NAMESPACE, SERVICE_ACCOUNTS[mode])
        impersonate = bool(kubeconfig or context) or not in_cluster()
        ok &= _check_cluster(
            mode,
            namespace,
            name,
            kubeconfig=kubeconfig,
            context=context,
            impersonate=impersonate,
            bind=enable_bind,
            leader_elect=leader_elect,
            lease_namespace=lease_namespace or namespace,
        )
    ctx.exit(0 if ok else 1)


def _check_cluster(
    mode: str,
    namespace: str,
    name: str,
    *,
    kubeconfig: str | None,
    context: str | None,
    impersonate: bool,
    bind: bool,
    leader_elect: bool,
    lease_namespace: str,
) -> bool:
    # late: these load the kubernetes client and the policy engine (~0.5 s), which `extender check --help`
    # and the file checks never need
    from extender.checks.preflight import check_permissions, format_missing
    from extender.kube.client import build_api_client
    from extender.startup import reach_api_server

    user = service_account_user(namespace, name)
    who = user if impersonate else "this pod's service account"
    title = f"permissions for {mode} mode, as {who}"
    permissions = required_permissions(mode, bind=bind, leader_elect=leader_elect)
    try:
        api_client = build_api_client(kubeconfig, context)
        if impersonate:
            # Before the first request: the kept-alive connections take the default headers once.
            api_client.set_default_header("Impersonate-User", user)  # type: ignore[no-untyped-call]  # the kubernetes client ships no annotations
        reach_api_server(api_client)
        missing = check_permissions(api_client, permissions, namespace=lease_namespace)
    except ClusterError as exc:
        return _report(title, [f"cannot check: {exc}"])
    if not missing:
        click.echo(f"{title}: ok ({len(permissions)} checked)")
        return True
    click.echo(f"{title}: {len(missing)} missing")
    message = format_missing(missing, name, namespace, target_namespace=lease_namespace)
    for line in message.splitlines():
        click.echo(f"  {line}")
    return False
