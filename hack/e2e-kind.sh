#!/usr/bin/env bash
# make e2e-kind: the end-to-end suite on a kind cluster, with the operator installed as a user would install it.
# It creates the cluster (kind pinned in hack/tools/kind), installs Flux from its release manifest, builds the
# image with Docker, loads it into kind, deploys config/default with that image, and runs the suite with
# E2E_KUBECONFIG: the suite of make e2e, whose TestNode tests skip (they need the real node of make e2e-node, its
# helpers and the images imported into its containerd). It needs a Docker engine and internet access to Flux's releases, so it cannot run on the
# machines this project is built on; CI runs the same suite on the embedded control plane instead.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export GOTOOLCHAIN=local

IMG=${IMG:-fluxdeployer:e2e}
FLUX_VERSION=${FLUX_VERSION:-2.9.5} # source-/kustomize-controller v1.9.x and helm-controller v1.6.x, as in hack/flux-assets.sh
name=${KIND_CLUSTER:-fluxdeployer-e2e}
kind() { go tool -modfile=hack/tools/kind/go.mod kind "$@"; }
kubeconfig=$(mktemp)
trap '[ -n "${KEEP:-}" ] || kind delete cluster --name "$name"; rm -f "$kubeconfig"' EXIT

command -v docker >/dev/null && docker info >/dev/null 2>&1 || { echo "make e2e-kind needs a running Docker engine" >&2; exit 1; }
kind create cluster --name "$name" --kubeconfig "$kubeconfig" --wait 2m
export KUBECONFIG=$kubeconfig
kubectl apply -f "https://github.com/fluxcd/flux2/releases/download/v$FLUX_VERSION/install.yaml"
kubectl -n flux-system wait deployment --all --for=condition=Available --timeout=5m
make docker-build IMG="$IMG"
kind load docker-image "$IMG" --name "$name"
make deploy IMG="$IMG"
kubectl -n fluxdeployer-system wait deployment/fluxdeployer --for=condition=Available --timeout=3m
# The suite's registry runs on this machine: pods reach it through the kind network's gateway.
gateway=$(docker network inspect kind -f '{{range .IPAM.Config}}{{if .Gateway}}{{.Gateway}} {{end}}{{end}}' | awk '{print $1}')
E2E_KUBECONFIG=$kubeconfig E2E_REGISTRY_HOST=$gateway make e2e
