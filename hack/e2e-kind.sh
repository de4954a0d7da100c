#!/usr/bin/env bash
# make e2e-kind: the end-to-end tests on a kind cluster, with Flux and the operator installed as a user installs
# them. It creates the cluster (kind pinned in hack/tools/kind), installs Flux from its release manifest, builds
# the operator's image without a container engine (make image), loads it into kind (kind load image-archive),
# applies the installer written for it (make build-installer, dist/install.yaml) and runs ./e2e with
# E2E_KUBECONFIG and E2E_KIND_CLUSTER: the suite of make e2e and the TestNode tests of make e2e-node, which load
# the images they build (the workload image, the operator's next version) with kind load image-archive too.
# kind needs a running Docker engine, and the script internet access to Flux's releases: it cannot run on the
# machines this project is built on, and the project's CI does not run it (it runs the same tests on the embedded
# control plane and on the real node).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export GOTOOLCHAIN=local

# The image make build-installer names by default, the one the TestNode tests roll out a next version of.
IMG=${IMG:-ghcr.io/fluxdeployer/fluxdeployer:$(cat VERSION)}
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
make image IMG="$IMG"
kind load image-archive dist/image.tar --name "$name"
make build-installer IMG="$IMG"
kubectl apply -f dist/install.yaml
kubectl -n fluxdeployer-system wait deployment/fluxdeployer --for=condition=Available --timeout=3m
# The suite's registry runs on this machine: pods reach it through the kind network's (IPv4) gateway.
gateway=$(docker network inspect kind -f '{{range .IPAM.Config}}{{if .Gateway}}{{.Gateway}} {{end}}{{end}}' | tr ' ' '\n' | grep -m1 -E '^[0-9.]+$')
mkdir -p bin/test-artifacts
E2E_KUBECONFIG=$kubeconfig E2E_REGISTRY_HOST=$gateway E2E_KIND_CLUSTER=$name CHROMIUM=$(hack/browser-assets.sh) \
	go test ./e2e -count=1 -v -timeout 60m -artifacts -outputdir "$PWD/bin/test-artifacts"
