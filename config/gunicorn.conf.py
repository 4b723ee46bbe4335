"""gunicorn settings for the extender webhook.

Used by `extender serve` and by plain
`gunicorn -c config/gunicorn.conf.py 'extender.webhook:create_app()'`.
Every value can be overridden through the environment (EXTENDER_BIND,
EXTENDER_WORKERS, EXTENDER_THREADS, EXTENDER_TIMEOUT, EXTENDER_TLS_*), which is
how `extender serve` passes its options.

Why these defaults. Measured with `python -m bench matrix` (500 nodes in node-cache
mode, the standalone policy, one pod = filter + prioritize, 2-core machine):

    worker          1 client: req/s  p50 ms   8 clients: req/s  p99 ms
    sync    w1 t1        396         2.79          416          31.3
    sync    w2 t1        348         2.92          552          23.5
    gthread w1 t4        349         3.01          375          38.2
    gthread w2 t4        318         3.13          641          37.8   <- default
    gthread w4 t4        331         3.14          607          35.9
    gthread w2 t1        308         3.34          571          27.1

- kube-scheduler calls the extender for one pod at a time, so latency, not
  parallelism, sets its pods/s; a request is CPU-bound Python and the GIL
  serialises the threads of one worker.
- The sync worker is ~0.3 ms faster for a lone loopback client, but it closes the
  connection after every request: across a real pod network kube-scheduler would
  pay a TCP handshake per call (more than those 0.3 ms), and while one request
  runs, probes and /metrics scrapes wait behind it. gthread keeps kube-scheduler's
  keep-alive connection and answers /healthz and /readyz during a slow filter.
- workers = 2: one per core, and the best throughput with several callers (HA
  kube-schedulers, profiles, scrapes). Each worker holds its own cluster state and
  its own watches, so more workers than cores only cost memory and API-server load
  (w4 is no faster on 2 cores).
- threads = 4: enough for probes, scrapes and a second caller in flight.
- timeout 30 s: far above kube-scheduler's 5 s httpTimeout; a worker that blocks
  that long is stuck and is better restarted.
- gunicorn sets TCP_NODELAY on its listening socket; without it small replies
  stall ~40 ms on delayed ACKs (shared/wire/README.md measured 11 pods/s).
"""

import os
import shutil
import ssl
import tempfile

bind = os.environ.get("EXTENDER_BIND", "127.0.0.1:8888")
workers = int(os.environ.get("EXTENDER_WORKERS", "2"))
threads = int(os.environ.get("EXTENDER_THREADS", "4"))
worker_class = os.environ.get("EXTENDER_WORKER_CLASS", "extender.webhook.worker.ConnectionWorker")
timeout = int(os.environ.get("EXTENDER_TIMEOUT", "30"))
graceful_timeout = int(os.environ.get("EXTENDER_GRACEFUL_TIMEOUT", "20"))
# Longer than kube-scheduler's idle connection timeout, so it is the client that closes.
keepalive = 120
# The app logs one structured line per verb call; gunicorn's access log would duplicate it.
accesslog = None
errorlog = "-"
loglevel = os.environ.get("EXTENDER_LOG_LEVEL", "info").lower()
# No preload: the app (and its watch threads) must be created inside each worker.
preload_app = False
# gunicorn 27's control socket (~/.gunicorn/gunicorn.ctl) can kill workers and shut the
# server down; nothing here uses it, and a read-only root filesystem has no home for it.
control_socket_disable = True

# ---- TLS (extender serve --tls-cert/--tls-key/--client-ca) ------------------------
# gunicorn calls `ssl_context` for every accepted connection; extender.tls answers with
# one cached context per worker, rebuilt when the files change (cert-manager rotation,
# no restart), with TLS 1.2 minimum and, given a client CA, client certificates required.
# A bad certificate/key pair stops the server here, at start-up.
certfile = os.environ.get("EXTENDER_TLS_CERT") or None
keyfile = os.environ.get("EXTENDER_TLS_KEY") or None
ca_certs = os.environ.get("EXTENDER_CLIENT_CA") or None
if ca_certs:
    cert_reqs = ssl.CERT_REQUIRED
if certfile:
    from extender.tls import TLSConfigError, check_files

    try:
        check_files(certfile, keyfile or certfile, ca_certs)
    except TLSConfigError as _exc:
        raise SystemExit(f"extender: {_exc}") from None


def ssl_context(config, default_ssl_context_factory):
    from extender.tls import gunicorn_ssl_context

    return gunicorn_ssl_context(config, default_ssl_context_factory)


# ---- Prometheus multiprocess mode ----------------------------------------------------
# Each worker is a process; counters only add up across them through files in a
# shared directory, which must be known before any worker imports prometheus_client.
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="extender-metrics-")


def on_starting(server):
    """Start from an empty metrics directory: files of a previous run would be summed in."""
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            os.unlink(path)
        else:
            shutil.rmtree(path, ignore_errors=True)


def child_exit(server, worker):
    """Drop a dead worker's live gauges (its counters stay, as Prometheus expects)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
