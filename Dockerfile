# syntax=docker/dockerfile:1
#
# The scheduler extender image: one image for every mode.
#   webhook (default CMD):  extender serve --bind 0.0.0.0:8888 ...
#   standalone scheduler:   extender schedule --scheduler-name extender-scheduler ...
#   offline tools:          extender check | explain | simulate ...
#
# Build:  make image   (docker, podman or buildah; IMAGE=... PYTHON_IMAGE=... to change either)
# Run:    docker run --rm -p 8888:8888 -v "$PWD/cluster.yaml:/data/cluster.yaml:ro" \
#             ghcr.io/example/scheduler-extender:0.1.0 \
#             serve --bind 0.0.0.0:8888 --source snapshot --snapshot /data/cluster.yaml
#         (the image name is the one deploy/ pulls; retag it for your registry)
#
# Two stages: the builder installs the package and its dependencies into a
# virtualenv; the final stage copies only that virtualenv and config/, so neither
# pip nor build caches nor the source tree end up in the image.
# For reproducible builds pin the base image by digest: python:3.11-slim@sha256:...
# PYTHON_IMAGE may be any Debian-based image with Python 3.11+ as `python` on PATH and
# groupadd/useradd (../shared/tools/container-base.sh makes one without a registry): no
# interpreter path is written here, the virtualenv links to the base's own python
# (/usr/local/bin on python:3.11-slim, /usr/bin on Debian), the same in both stages.

ARG PYTHON_IMAGE=python:3.11-slim

# ---------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

WORKDIR /src
RUN python -m venv /opt/venv

# tini, the container's PID 1 (see ENTRYPOINT): Debian's static build, copied alone into the
# final stage, which gets no package manager run.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tini >/dev/null \
 && rm -rf /var/lib/apt/lists/*

# Dependencies first, read from pyproject.toml: this layer is rebuilt only when
# pyproject.toml changes, not on every source edit. Every dependency ships wheels,
# so no compiler is needed (and the slim image has none).
COPY pyproject.toml ./
RUN pip install --upgrade pip \
 && pip install $(python -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')

# The package itself, as a wheel (what a release would publish), installed without
# touching the dependencies resolved above. Then:
# - the runtime needs no installer: pip, setuptools and wheel leave the venv;
# - bytecode is compiled now with unchecked-hash invalidation (valid whatever the
#   file times after COPY): the runtime root filesystem is read-only, so Python
#   could not write .pyc files there anyway.
COPY extender/ ./extender/
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && pip install --no-deps /wheels/*.whl \
 && pip uninstall --yes pip setuptools wheel \
 && python -m compileall -q -f --invalidation-mode unchecked-hash /opt/venv/lib

# ---------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

LABEL org.opencontainers.image.title="scheduler-extender" \
      org.opencontainers.image.description="Kubernetes scheduler extender and standalone scheduler with a Python policy engine" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"

# A named user for logs and ps; the USER line below stays numeric so that
# Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
RUN groupadd --system --gid 65532 extender \
 && useradd --system --uid 65532 --gid 65532 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin extender

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    EXTENDER_HEALTHCHECK_URL=http://127.0.0.1:8888/healthz

COPY --from=builder /opt/venv /opt/venv
COPY --from=builder /usr/bin/tini-static /usr/local/bin/tini

# config/ holds the default policies (policy-webhook.yaml for `serve`, policy.yaml
# for `schedule`), the gunicorn configuration (gunicorn.conf.py) and the demo
# snapshot; EXTENDER_CONFIG_DIR tells the CLI where. In Kubernetes the policies are
# mounted from a ConfigMap at /etc/extender/ instead (see deploy/). Owned by root and
# read-only for the runtime user.
WORKDIR /app
COPY config/ ./config/
ENV EXTENDER_CONFIG_DIR=/app/config

USER 65532:65532

# The webhook: POST /filter /prioritize /bind /preempt; GET /healthz /readyz
# /metrics /version. With --tls-cert/--tls-key it serves HTTPS on the same port.
EXPOSE 8888

# Docker's own health check (Kubernetes ignores it and uses the probes in deploy/):
# the slim image has no curl, so Python asks /healthz. For `extender schedule`, or
# with TLS, point EXTENDER_HEALTHCHECK_URL at its health endpoint
# (e.g. http://127.0.0.1:10251/healthz, `extender schedule --metrics-bind`).
#
# Kubernetes probes (deploy/components/webhook/deployment.yaml):
#   livenessProbe:  GET /healthz on port 8888 -- the process answers
#   readinessProbe: GET /readyz  on port 8888 -- the cluster state is listed
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; url = os.environ.get('EXTENDER_HEALTHCHECK_URL', 'http://127.0.0.1:8888/healthz'); sys.exit(0 if urllib.request.urlopen(url, timeout=4).status == 200 else 1)"]

# tini is PID 1 and runs extender as its child. The kernel drops a signal sent to a PID 1 that
# has no handler for it, and Python installs its SIGTERM handlers only once the command is
# imported (about a second, more on a busy node): a pod deleted while its container started
# ran on until the kubelet's SIGKILL at the end of its grace period (30 s), and could take the
# Lease and bind meanwhile. tini blocks signals from its first instruction and forwards each
# to extender, for which an early SIGTERM has its default effect (exit); later it gets the
# graceful shutdown. -s: also reap when tini is not PID 1 (docker run --init), without a warning.
ENTRYPOINT ["tini", "-s", "--", "extender"]
CMD ["serve", "--bind", "0.0.0.0:8888", "--policy", "/app/config/policy-webhook.yaml"]
