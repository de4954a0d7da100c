#!/usr/bin/env bash
# Builds the real Flux source-controller and kustomize-controller (v1.9.6, the newest that build with Go 1.26)
# from the Go module proxy into a versioned cache folder outside the clone, and prints that folder. The end-to-end
# tests run them out of cluster against envtest. helm-controller's main module is not served, so it is not here.
# When both binaries are present it does nothing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=1.9.6
cache=${FLUXDEPLOYER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fluxdeployer}
dir=$cache/flux/$version

for controller in source-controller kustomize-controller; do
  out=$dir/$controller
  [ -x "$out" ] && continue
  mkdir -p "$dir"
  echo "building $controller into $dir (first run only)" >&2
  (cd "$root/hack/tools/flux" && go build -trimpath -o "$out.tmp" "github.com/fluxcd/$controller") >&2
  mv "$out.tmp" "$out"
done
echo "$dir"
