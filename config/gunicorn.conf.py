"""gunicorn settings for the extender webhook.

Used by `extender serve` and by plain
`gunicorn -c config/gunicorn.conf.py 'extender.webhook:create_app()'`.
Every value can be overridden through the environment (EXTENDER_BIND,
EXTENDER_WORKERS, EXTENDER_THREADS, EXTENDER_WORKER_CLASS, EXTENDER_TIMEOUT, EXTENDER_TLS_*),
which is how `extender serve` passes its options.

Why these defaults. What users feel is kube-scheduler's throughput with the webhook in
its path: it calls filter, then prioritize, for one pod at a time over one kept-alive
connection, so every microsecond the server spends on a call (and every hand-off between
its threads) is pods/s. Measured by `python -m bench e2e --pods 2000 --repeat 3`: a real
etcd, kube-apiserver and kube-scheduler v1.36.3 on the 2-core development machine, 500
nodes, the default webhook policy in node-cache mode with --disable-bind (kube-scheduler is
registered without bindVerb, so no pod watch), medians; the ratio is to the empty extender
of the same round (bench/empty_extender.py: stdlib HTTP server, TCP_NODELAY, no state, no
logging), CPU is the extender's per pod:

    setup                                  pods/s   x empty   extender CPU ms/pod
    empty extender                           496      1.0        0.28
    connection w2 (the defaults)             484      1.03       0.36
    connection w2, bind enabled (pod watch)  360      0.77       0.57
    connection w1                            439      0.88       0.40
    gthread w2 t4                            385      0.78       0.84
    gthread w1 t1                            340      0.73       0.85
    sync w1                                  377      0.76       0.81
    (kube-scheduler alone: 828 pods/s; full NodeList, defaults: 1.24 x empty, 2.1 ms/pod
    against 7.3, its nodes read by piece: extender/webhook/nodeviews.py.)

Pods/s move by about +-0.1 x between rounds on this shared machine (the defaults gave
0.93, 1.03, 1.04 x); CPU per pod moves less. Only the ConnectionWorker reads
kube-scheduler's plain requests itself (extender/webhook/plain_requests.py) and answers
its verb calls without a WSGI environ or Response (VerbRoutes.answer_plain, while
gunicorn's access log and request hooks are off, as here): the two largest of the changes
that took a call's CPU from 3.3 to 1.06-1.23 x the empty extender's (`python -m bench
loopback`, one kept-alive client sending filter + prioritize of 230 names, back to back).

- worker_class = extender.webhook.worker.ConnectionWorker: a thread per connection reads
  the request, runs the app and writes the reply, then blocks reading the next request.
  gthread hands each request from its poller thread to a pool thread and back through a
  pipe, and touches the heartbeat file on every loop; with the GIL every hand-off waits
  for the thread holding it. sync answers one request at a time and closes the
  connection after each (a new TCP, or TLS, handshake per call across a pod network).
  The ConnectionWorker also stops promptly on SIGTERM when kube-scheduler holds an idle
  spare connection (gthread waited the whole graceful timeout; docs/reliability.md).
- workers = 2: kube-scheduler's single connection lands on one worker, so a second one
  does not add pods/s (w1 measured below w2 above, by about the rounds' noise; a worker
  without a pod watch costs nothing while idle); it keeps answering
  while the other is restarted (a worker boots by listing every node and pod, seconds on
  a large cluster), and serves probes, scrapes and a second caller (HA kube-schedulers
  during a leader change, several profiles) in parallel. Each worker holds its own cluster
  state and watches, so more workers than cores only cost memory and API-server load.
- threads = 4: gthread only (its pool size); the ConnectionWorker has one thread per open
  connection, up to worker_connections (gunicorn's 1000), beyond which new connections
  wait in the listen backlog.
- The verb routes (filter, prioritize, bind, preempt) are answered in front of Flask, and
  their access log line and metrics are written after the reply has been sent
  (extender/webhook/verb_routes.py): kube-scheduler no longer waits for them. Successful
  filter and prioritize calls are only counted unless `--access-log`. gunicorn's own
  access log stays off (it would duplicate that line).
- timeout 30 s: far above kube-scheduler's 5 s httpTimeout; a worker that blocks that
  long is stuck and is better restarted. With the ConnectionWorker it also bounds a
  request (or reply) that stalls half-way (SO_RCVTIMEO/SO_SNDTIMEO).
- keepalive 120 s: longer than kube-scheduler's idle connection timeout, so it is the
  client that closes.
- kube-scheduler's requests (plain HTTP/1.1 POSTs with a Content-Length) skip gunicorn's
  parser; anything else is pushed back to it unread and parsed, checked and answered by
  gunicorn as before, so its C parser (gunicorn-h1c) would no longer help the verbs.
- gunicorn sets TCP_NODELAY on its listening socket; without it small replies stall
  ~40 ms on delayed ACKs (11 pods/s measured against kube-scheduler v1.36).
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
# gunicorn's own lines in the extender's format: JSON lines stay JSON with --log-format json.
logger_class = "extender.webhook.gunicorn_logs.GunicornLogger"
loglevel = os.environ.get("EXTENDER_LOG_LEVEL", "info").lower()
# No preload: the app (and its watch threads) must be created inside each worker.
preload_app = False
# gunicorn 27's control socket (~/.gunicorn/gunicorn.ctl) can kill workers and shut the
# server down; nothing here uses it, and a read-only root filesystem has no home for it.
control_socket_disable = True

# ---- Prometheus multiprocess mode ----------------------------------------------------
# Each worker is a process; counters only add up across them through files in a
# shared directory, which must be known before any worker imports prometheus_client.
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="extender-metrics-")


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
    from extender.errors import ExtenderError
    from extender.startup import check_tls

    try:
        check_tls(certfile, keyfile, ca_certs)
    except ExtenderError as _exc:
        raise SystemExit(f"Error: {_exc}") from None


def ssl_context(config, default_ssl_context_factory):
    from extender.tls import gunicorn_ssl_context

    return gunicorn_ssl_context(config, default_ssl_context_factory)


def on_starting(server):
    """Check what every worker will need once, here in the master, then start from an empty
    metrics directory (files of a previous run would be summed in)."""
    _check_once()
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            os.unlink(path)
        else:
            shutil.rmtree(path, ignore_errors=True)


def _check_once():
    """Plain `gunicorn -c` (no `extender serve`, which checks before gunicorn starts and says so
    in EXTENDER_STARTUP_CHECKED): a bad policy, snapshot or unreachable API server is one line
    and exit status 1 here, not a traceback in each worker and "Worker failed to boot"."""
    if os.environ.get("EXTENDER_STARTUP_CHECKED") == "1":
        return
    from extender.errors import ExtenderError
    from extender.settings import Settings
    from extender.startup import check_serving
    from extender.webhook.runtime import choose_source

    try:
        settings = Settings.from_env()
        check_serving(settings, choose_source(settings), (None, None, None))  # TLS: checked above
    except ExtenderError as exc:
        raise SystemExit(f"Error: {exc}") from None
    os.environ["EXTENDER_STARTUP_CHECKED"] = "1"  # a re-exec (USR2) inherits the answer


def child_exit(server, worker):
    """Drop a dead worker's live gauges (its counters stay, as Prometheus expects)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
