"""Start-up: the checks that would stop a mode from working, found before it starts and said in
one line; the policy holder each mode starts with; the collector's tuning.

Under gunicorn each worker builds its runtime after fork (extender/webhook/app.py): a policy
that does not load, a snapshot that does not parse or an API server that cannot be reached
made every worker print a traceback, and gunicorn give up with "Worker failed to boot".
`extender serve` runs these checks once in the parent, before gunicorn starts, and
`extender schedule` before its first watch. Each error says what failed, where, and what
to do about it.
"""

from __future__ import annotations

import gc
import logging
import os
from pathlib import Path
from typing import Any, NoReturn

import click

from extender.checks.configs import webhook_policy_problems
from extender.cluster.snapshot import read_snapshot
from extender.errors import ClusterError, ExtenderError, PolicyError
from extender.policy.defaults import default_policy
from extender.policy.reloading import FixedPolicy, PolicyHolder
from extender.settings import Settings, default_snapshot
from extender.tls import TLSConfigError, TLSFiles, build_context

# /version answers any authenticated (and, by default, anonymous) client: a cheap round trip
# that also proves the credentials, since a bad token gets 401 even where anonymous is allowed.
PROBE_PATH = "/version"
PROBE_TIMEOUT = (3.0, 5.0)


def auto_fallback_reason() -> str:
    """Why `--source auto` found no cluster: what it looked for, in the order it looks."""
    env = os.environ.get("KUBECONFIG")
    looked = f"KUBECONFIG={env} names no file" if env else f"{Path('~/.kube/config').expanduser()} does not exist"
    return f"no cluster configured ({looked}, and KUBERNETES_SERVICE_HOST is not set)"


def reach_api_server(api_client: Any) -> None:
    """One GET /version with a short timeout: an unreachable server or refused credentials is
    a ClusterError naming the server and the kubectl line that shows the same failure."""
    # late (as in check_cluster): extender.kube.client imports prometheus_client, which must come
    # after the multiprocess directory is set; config/gunicorn.conf.py imports this module first.
    from extender.kube.client import request_json

    host = api_client.configuration.host
    try:
        request_json(api_client, "GET", PROBE_PATH, timeout=PROBE_TIMEOUT)
    except ClusterError as exc:
        reason = str(exc).removeprefix(f"GET {PROBE_PATH}: ").removeprefix("cannot reach the API server: ")
        if exc.status is None:
            what = (f"cannot reach the API server {host} ({reason}): check that it is up and that the "
                    "kubeconfig names the right server")
        elif exc.status in (401, 403):
            what = (f"the API server {host} refused GET {PROBE_PATH} ({reason}): check the credentials of the "
                    "kubeconfig or the ServiceAccount (and the impersonate permission when impersonating)")
        else:
            what = f"the API server {host} failed GET {PROBE_PATH} ({reason}): check its health"
        raise ClusterError(f"{what}; `kubectl get --raw {PROBE_PATH}` shows the same", status=exc.status) from None


def check_cluster(settings: Settings) -> Any:
    """The API client the settings describe, once the server has answered."""
    # late: see reach_api_server.
    from extender.kube.client import build_api_client

    api_client = build_api_client(settings.kubeconfig or None, settings.context or None)
    reach_api_server(api_client)
    return api_client


def check_snapshot(settings: Settings) -> None:
    read_snapshot(Path(settings.snapshot) if settings.snapshot else default_snapshot())


def check_policy(settings: Settings) -> None:
    """The webhook's policy loads, and is one a webhook can run (checks.configs.webhook_policy_problems)."""
    if settings.policy:
        holder = PolicyHolder(settings.policy)  # loads and validates; raises PolicyError with the path
        problems = webhook_policy_problems(settings.policy, holder.policy.filters)
        if problems:
            raise PolicyError(*problems)


def check_tls(cert: str | None, key: str | None, client_ca: str | None) -> None:
    if not cert:
        return
    try:
        build_context(TLSFiles(cert, key or cert, client_ca))  # gunicorn.conf.py logs what it loaded
    except TLSConfigError as exc:
        raise ExtenderError(f"{exc}; each must be a readable PEM file, and the key must match the "
                            "certificate (`openssl x509 -in CERT -noout -subject` reads one)") from None


def check_serving(settings: Settings, source: str, tls: tuple[str | None, str | None, str | None]) -> None:
    """Everything a webhook worker needs at boot, for the `source` choose_source picked;
    `tls` is (certificate, key, client CA)."""
    check_tls(*tls)
    check_policy(settings)
    if source == "snapshot":
        check_snapshot(settings)
    else:
        check_cluster(settings)


def fail(message: str, log_format: str) -> NoReturn:
    """Stop with one line and exit status 1: a JSON log line when logs are JSON, else click's
    `Error: ...` (no traceback either way)."""
    if log_format == "json":
        logging.getLogger("extender").error(message)
        raise SystemExit(1)
    raise click.ClickException(message)


# Objects allocated between young-generation collections (CPython's default: 700).
GC_YOUNG_THRESHOLD = 10_000


def tune_gc() -> None:
    """Collect the young generation every 10,000 allocations instead of every 700.

    Decoding a request or watch event allocates an object per JSON value; at 700, a
    full-NodeList call (hundreds of KB) ran a collection every few nodes, each promoting
    the half-built tree to the older generations, whose collections then walk it again:
    orjson.loads of a 230-node body took 1.29 ms instead of 0.84 (bench measured in one
    process). The objects are freed by reference counting as before; only cyclic garbage
    waits a little longer, a few MB at most.
    """
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def _record_reload(outcome: str, error: str | None) -> None:
    # late: prometheus_client must not be imported before the multiprocess directory is set, and
    # config/gunicorn.conf.py imports this module (check_tls) first.
    from extender import metrics

    metrics.POLICY_RELOADS.labels(outcome=outcome).inc()


def make_policy_holder(path: str, mode: str) -> PolicyHolder | FixedPolicy:
    """A reloading holder for a policy file, or the built-in default of the mode."""
    if not path:
        return FixedPolicy(default_policy(mode))
    return PolicyHolder(path, on_reload=_record_reload)
