#!/usr/bin/env bash
# Prints config/default (or another kustomization under config/, e.g. config/sharding) built by kustomize with the
# manager's image set to the given reference, without touching config/: `kustomize edit set image` runs on a copy.
# `make deploy` and `make build-installer` use it.
#   hack/kustomize-with-image.sh registry.example/fluxdeployer:0.1.0 [config/sharding]
set -euo pipefail
img=${1:?usage: hack/kustomize-with-image.sh IMAGE [config/DIR]}
dir=${2:-config/default}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# go tool -n builds kustomize (cached) and prints its path, so it can run outside the module.
kustomize=$(cd "$root" && go tool -n -modfile=hack/tools/kustomize/go.mod kustomize)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -R "$root/config" "$work/config"
# config/manager names the manager container's image "fluxdeployer" and maps it to the release image.
(cd "$work/config/manager" && "$kustomize" edit set image "fluxdeployer=$img")
"$kustomize" build "$work/$dir"
