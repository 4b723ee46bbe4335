# One entry point per job; every target installs what it needs into .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIND ?= 127.0.0.1:8888
SOURCE ?= snapshot
PYTEST_ARGS ?=
ARGS ?=
# The real control plane for the end-to-end tests: ../shared/tools/k8s-test-binaries.sh builds
# etcd, kube-apiserver and kube-scheduler into this cache (never built from here).
K8S_VERSION ?= 1.36.3
K8S_CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/k8s-test-binaries/$(K8S_VERSION)
# The image: the name deploy/ pulls (retag it for your registry: IMAGE=registry.example/x:tag),
# and its base. Without registry access, ../shared/tools/container-base.sh makes a local
# stand-in base and prints the name to pass as PYTHON_IMAGE.
IMAGE ?= ghcr.io/example/scheduler-extender:0.1.0
PYTHON_IMAGE ?= python:3.11-slim
# buildah in a container: vfs storage (no overlay), chroot isolation, the host's network.
BUILDAH ?= buildah --storage-driver $(or $(STORAGE_DRIVER),vfs)

.PHONY: install run test e2e node-test node-up bench image lint helm clean

# Two stamps: `make run` needs the runtime dependencies only (pip install -e .);
# `make test`, `make bench` and `make lint` add the test and benchmark extras.
$(VENV)/.installed-run: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed: $(VENV)/.installed-run
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

install: $(VENV)/.installed

## Run the webhook on 127.0.0.1:8888 with the embedded default cluster (config/snapshot.yaml).
run: $(VENV)/.installed-run
	$(VENV)/bin/extender serve --bind $(BIND) --source $(SOURCE) $(ARGS)

## Run the test suite: against the fake API server, or against a real control plane when
## KUBEBUILDER_ASSETS names the binaries (then the end-to-end tests run too; else they skip).
test: install
	$(VENV)/bin/pytest $(PYTEST_ARGS)

## Run only the end-to-end tests (real kube-apiserver and kube-scheduler): KUBEBUILDER_ASSETS,
## or else the cache of ../shared/tools/k8s-test-binaries.sh when it holds the three binaries.
e2e: install
	@assets="$${KUBEBUILDER_ASSETS:-$(K8S_CACHE)}"; \
	for b in etcd kube-apiserver kube-scheduler; do \
	  [ -x "$$assets/$$b" ] || { echo "no $$b in $$assets: run bash ../shared/tools/k8s-test-binaries.sh and export the KUBEBUILDER_ASSETS it prints" >&2; exit 2; }; \
	done; \
	KUBEBUILDER_ASSETS="$$assets" $(VENV)/bin/pytest -m e2e $(PYTEST_ARGS)

## A real node (containerd, kubelet, kube-proxy; root): the chart installed, used and broken on it
## (tests/e2e/*_on_node.py, marker `node`; also part of `make test` where the node can run).
node-test: install
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(K8S_CACHE)}" $(VENV)/bin/pytest -m node $(PYTEST_ARGS)

## Bring up the control plane and a node with the local images, to try the chart by hand (Ctrl-C stops).
node-up: install
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(K8S_CACHE)}" $(PY) -m tests.e2e.nodecluster $(ARGS)

## Run every benchmark and print the table (not part of `make test`).
bench: install
	$(PY) -m bench

## Build helm (v3.22.0, from its Go module; needs go) into the test-binaries cache, once: the
## chart's tests (tests/deploy/test_helm.py) find it there, and skip without it.
helm:
	bash deploy/helm/install-helm.sh

## Build the image with docker (when its daemon answers), podman or buildah, the first found.
image:
	@if command -v docker >/dev/null && docker info >/dev/null 2>&1; then set -- docker build; \
	elif command -v podman >/dev/null; then set -- podman build --format docker; \
	elif command -v buildah >/dev/null; then set -- $(BUILDAH) bud --format docker --isolation chroot --network host; \
	else echo "no container builder: start docker, or install podman or buildah (apt-get install -y buildah)" >&2; exit 2; fi; \
	echo "$$* -t $(IMAGE) ."; \
	"$$@" --build-arg PYTHON_IMAGE=$(PYTHON_IMAGE) -t $(IMAGE) .

## ruff on the tree, then mypy on the whole extender package (strict, with stubs/; tests/test_types.py too).
lint: install
	$(VENV)/bin/ruff check extender tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .benchmarks .ruff_cache build dist *.egg-info
