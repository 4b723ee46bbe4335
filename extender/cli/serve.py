"""`extender serve`: the webhook under gunicorn."""

from __future__ import annotations

import logging
import os
import runpy
import tempfile
from dataclasses import replace
from typing import Any

import click

from extender.errors import ExtenderError
from extender.logs import setup_logging
from extender.settings import Settings, config_dir

GUNICORN_CONF = "gunicorn.conf.py"
# Short names for --worker-class; config/gunicorn.conf.py says which is the default and why.
WORKER_CLASSES = {"connection": "extender.webhook.worker.ConnectionWorker", "gthread": "gthread", "sync": "sync"}


def _load_gunicorn_conf() -> dict[str, Any]:
    """The settings and hooks of config/gunicorn.conf.py, evaluated after our env is in place."""
    path = config_dir() / GUNICORN_CONF
    if not path.is_file():
        raise click.ClickException(
            f"{path} not found: set EXTENDER_CONFIG_DIR to the directory holding {GUNICORN_CONF}"
        )
    namespace = runpy.run_path(str(path))
    return {k: v for k, v in namespace.items() if not k.startswith("_") and not isinstance(v, type(os))}


def _prepare_metrics_dir() -> None:
    """Workers share counters through files; the directory must be known before
    prometheus_client is first imported, in this process and so in every worker."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="extender-metrics-")
    else:
        # A directory named by the deployment (the chart's /tmp/metrics) lives on an emptyDir
        # that starts empty: prometheus_client opens its files there at import, before
        # gunicorn's on_starting could make it.
        os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)


def run_gunicorn(options: dict[str, Any]) -> None:
    from gunicorn.app.base import BaseApplication

    class Application(BaseApplication):
        def load_config(self) -> None:
            for key, value in options.items():
                if key in self.cfg.settings and value is not None:
                    self.cfg.set(key, value)

        def load(self) -> Any:
            # Runs in each worker after fork, so the watches belong to the worker.
            from gunicorn.arbiter import Arbiter

            # late: the webhook imports prometheus_client, which must come after _prepare_metrics_dir
            from extender.webhook import create_app

            try:
                return create_app()
            except ExtenderError as exc:
                # serve checked this before gunicorn started (startup.py): what changed since
                # is one line, not a traceback; the arbiter stops on the boot error.
                logging.getLogger("extender.webhook").error("worker cannot start: %s", exc)
                raise SystemExit(Arbiter.WORKER_BOOT_ERROR) from None

    Application().run()


@click.command()
@click.option("--bind", "bind", default="127.0.0.1:8888", show_default=True, help="HOST:PORT to listen on.")
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="gunicorn workers [conf: 2].")
@click.option("--threads", type=click.IntRange(1, 256), default=None,
              help="Threads per worker, gthread only [conf: 4].")
@click.option("--worker-class", type=click.Choice(sorted(WORKER_CLASSES)), default=None,
              help="gunicorn worker: connection (a thread per connection), gthread or sync [conf: connection].")
@click.option("--timeout", type=click.IntRange(1, 3600), default=None, help="Worker timeout, seconds [conf: 30].")
@click.option("--policy", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Policy file (reloaded when it changes). Default: the built-in webhook policy.")
@click.option("--source", type=click.Choice(["auto", "kube", "snapshot"]), default="auto", show_default=True,
              help="Cluster state source: the API server, a snapshot file, or auto (kube when configured).")
@click.option("--snapshot", type=click.Path(exists=True), default=None,
              help="Snapshot file or directory (default: the embedded config/snapshot.yaml).")
@click.option("--kubeconfig", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--context", default=None, help="kubeconfig context.")
@click.option("--url-prefix", default="", help="Path prefix before the verbs, e.g. /scheduler.")
@click.option("--filter-verb", default="filter", show_default=True)
@click.option("--prioritize-verb", default="prioritize", show_default=True)
@click.option("--bind-verb", default="bind", show_default=True)
@click.option("--preempt-verb", default="preempt", show_default=True)
@click.option("--enable-bind/--disable-bind", default=True, show_default=True)
@click.option("--enable-explain/--disable-explain", default=False, show_default=True,
              help="Serve POST /explain (shows how the policy decides: keep it off on shared networks).")
@click.option("--scheduler-name", "scheduler_names", multiple=True, default=("default-scheduler",),
              show_default=True, help="schedulerNames whose pods /bind accepts (repeatable).")
@click.option("--allow-namespace", "namespaces_allow", multiple=True, help="Only bind pods of these namespaces.")
@click.option("--deny-namespace", "namespaces_deny", multiple=True, help="Never bind pods of these namespaces.")
@click.option("--lease-namespace", default="",
              help="Namespace of the device and gang ledger Leases (shared GPUs, pod groups) [default: the pod's "
                   "namespace in a cluster, else scheduler-extender].")
@click.option("--gang-hold", type=click.FloatRange(0.5, 3600), default=Settings.gang_hold, show_default=True,
              help="Seconds /bind holds a pod-group member for its quorum; below kube-scheduler's httpTimeout "
                   "for the extender (docs/gangs.md).")
@click.option("--gang-give-way-backoff", type=click.FloatRange(0, 600), default=Settings.gang_give_way_backoff,
              show_default=True,
              help="Seconds a pod group that gave way to a competing gang is refused before it may hold "
                   "members again (docs/gangs.md).")
@click.option("--max-body-bytes", type=click.IntRange(1024), default=Settings.max_body_bytes, show_default=True)
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--client-ca", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Require client certificates signed by this CA (mutual TLS).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--log-level", default="INFO", show_default=True)
@click.option("--access-log/--no-access-log", default=False, show_default=True,
              help="Log every successful filter and prioritize call too (binds, preempts and failed calls "
                   "are always logged).")
def serve(bind: str, workers: int | None, threads: int | None, worker_class: str | None, timeout: int | None,
          tls_cert: str | None, tls_key: str | None, client_ca: str | None, **options: Any) -> None:
    """Serve the extender verbs (filter, prioritize, bind, preempt) for kube-scheduler."""
    if bool(tls_cert) != bool(tls_key):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if client_ca and not tls_cert:
        raise click.UsageError("--client-ca needs --tls-cert and --tls-key")
    settings = Settings()
    values: dict[str, Any] = {k: (tuple(v) if isinstance(v, tuple | list) else (v or "")) for k, v in options.items()}
    values["enable_bind"] = options["enable_bind"]
    values["enable_explain"] = options["enable_explain"]
    values["max_body_bytes"] = options["max_body_bytes"]
    values["access_log"] = options["access_log"]
    values["gang_hold"] = options["gang_hold"]
    values["gang_give_way_backoff"] = options["gang_give_way_backoff"]
    settings = replace(settings, **values)
    os.environ.update(settings.to_env())
    os.environ["EXTENDER_BIND"] = bind
    _prepare_metrics_dir()
    setup_logging(settings.log_format, settings.log_level)
    # extender.webhook.runtime imports prometheus_client, so it must come after _prepare_metrics_dir.
    from extender.startup import check_serving, fail
    from extender.webhook.runtime import choose_source

    try:
        source = choose_source(settings)
        check_serving(settings, source, (tls_cert, tls_key, client_ca))  # here, not in each worker
    except ExtenderError as exc:
        fail(str(exc), settings.log_format)
    os.environ["EXTENDER_STARTUP_CHECKED"] = "1"  # gunicorn.conf.py's on_starting need not again
    if workers is None and source == "snapshot":
        # The in-memory cluster lives in each worker: with two, a bind served by one
        # would be invisible to the other. One worker keeps the demo cluster coherent.
        workers = 1
    if worker_class is not None:
        os.environ["EXTENDER_WORKER_CLASS"] = WORKER_CLASSES[worker_class]
    for name, number in (("WORKERS", workers), ("THREADS", threads), ("TIMEOUT", timeout)):
        if number is not None:
            os.environ[f"EXTENDER_{name}"] = str(number)
    for name, path in (("TLS_CERT", tls_cert), ("TLS_KEY", tls_key), ("CLIENT_CA", client_ca)):
        if path is not None:
            # abspath, not resolve(): a Secret volume's tls.crt is a symlink into ..data, which the
            # kubelet swaps on rotation; the resolved target is deleted after the swap.
            os.environ[f"EXTENDER_{name}"] = os.path.abspath(path)
    run_gunicorn(_load_gunicorn_conf())


__all__ = ["serve"]
