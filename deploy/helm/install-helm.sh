#!/usr/bin/env bash
# install-helm.sh - build helm v3 from its Go module into the test-binaries cache, once.
#
#   bash deploy/helm/install-helm.sh        # prints the path of the helm binary (last line)
#
# Where: ${XDG_CACHE_HOME:-$HOME/.cache}/k8s-test-binaries/helm-<HELM_VERSION>/helm, beside the
# control-plane binaries of ../shared/tools/k8s-test-binaries.sh; tests/deploy/test_helm.py
# looks there (or on PATH, or at $HELM). Idempotent: when the binary is there and reports the
# wanted version it exits at once; a lock keeps two concurrent runs from building twice.
# Needs: go (1.26 or newer for helm v3.22) and a Go module proxy (the machine's own go env says which;
# nothing is set here). Time: about 2-4 minutes on 2 cores from an empty Go cache.
# env:   HELM_VERSION (v3.22.0)   GO (go)
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
GO="${GO:-go}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/k8s-test-binaries"
DEST="$CACHE/helm-$HELM_VERSION"
HELM="$DEST/helm"

version_ok() {  # the wanted version, built by this script (the stamp: with the ldflags below)
  [ -x "$HELM" ] && [ -f "$DEST/.built" ] \
    && [ "$("$HELM" version --template '{{.Version}}' 2>/dev/null)" = "$HELM_VERSION" ]
}

if version_ok; then
  echo "$HELM"
  exit 0
fi
command -v "$GO" >/dev/null || { echo "install-helm.sh: no go on PATH (set GO=...)" >&2; exit 2; }
mkdir -p "$DEST"
exec 9>"$DEST/.lock"
flock 9
if ! version_ok; then
  echo "install-helm.sh: building helm $HELM_VERSION into $DEST (go install, a few minutes) ..." >&2
  # The linker sets what helm's own Makefile sets: its version (else `helm version` says only
  # "v3.22") and the Kubernetes version that `helm template` and `helm lint` assume (else 1.20,
  # below the chart's kubeVersion), which is the minor of the client-go helm is built with.
  gomod="$("$GO" mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
  k8s_minor="$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod")"
  [ -n "$k8s_minor" ] || { echo "install-helm.sh: no k8s.io/client-go version in $gomod" >&2; exit 1; }
  ldflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in pkg/chartutil pkg/lint/rules; do
    ldflags="$ldflags -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
  done
  rm -f "$DEST/.built"
  GOBIN="$DEST" CGO_ENABLED=0 "$GO" install -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  echo "$ldflags" >"$DEST/.built"
  version_ok || { echo "install-helm.sh: $HELM does not report $HELM_VERSION:" \
    "$("$HELM" version 2>&1)" >&2; exit 1; }
fi
echo "$HELM"
