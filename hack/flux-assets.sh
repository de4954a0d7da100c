#!/usr/bin/env bash
# Builds the real Flux controllers the end-to-end tests and the demo run out of cluster against the embedded
# control plane, into a versioned cache folder outside the clone, and prints that folder:
#   - source-controller and kustomize-controller v1.9.6 (the newest that build with Go 1.26), from the Go module
#     proxy through the tools module hack/tools/flux;
#   - helm-controller v1.6.5 from the Go module proxy where it is served, else from a source snapshot or checkout
#     (main at 0f61a86, with the v1.6.3 fixes; see helm_source below);
#   - the helm CLI the real-node tests and the documents install the chart with: Helm of the version
#     hack/tools/flux selects for the controllers (helm-controller and source-controller are built on Helm's SDK),
#     so that of its packages only the CLI's own compile beyond what the controllers' build compiles.
# When every binary is present it does nothing. Cold, on 2 cores: about 10 minutes for the first two, 5 for
# helm-controller.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=1.9.6
helm_commit=0f61a86
helm_module=v1.6.5
cache=${FLUXDEPLOYER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fluxdeployer}
dir=$cache/flux/$version
# Test packages run in parallel and each may call this script: one builds, the others wait for it.
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9

# Static and -trimpath, as every build of the project (hack/lib/build.sh), and all in one go build, since they
# share most of their packages.
missing=()
for controller in source-controller kustomize-controller; do
  [ -x "$dir/$controller" ] || missing+=("github.com/fluxcd/$controller")
done
[ -x "$dir/helm" ] || missing+=(helm.sh/helm/v4/cmd/helm)
if [ ${#missing[@]} -gt 0 ]; then
  mkdir -p "$dir"
  tmp=$(mktemp -d "$dir/.build.XXXXXX")
  echo "building ${missing[*]##*/} into $dir (first run only, about 6 to 10 minutes)" >&2
  (cd "$root/hack/tools/flux" && CGO_ENABLED=0 go build -trimpath -o "$tmp/" "${missing[@]}") >&2 ||
    { rm -rf "$tmp"; exit 1; }
  mv "$tmp"/* "$dir/" && rmdir "$tmp"
fi

# helm_source prints a directory holding helm-controller's go.mod (writable: the build may complete its go.sum).
# Tried in order:
#   1. the module github.com/fluxcd/helm-controller@$helm_module from the Go module proxy (most proxies serve it);
#   2. HELM_CONTROLLER_SRC: a checkout of fluxcd/helm-controller at $helm_commit, or the snapshot tarball;
#   3. the snapshot helm-controller-$helm_commit.tar.gz in a shared/third_party/helm-controller folder beside this
#      checkout or beside its parent folder.
helm_source() {
  local work=$dir/helm-controller-src module
  rm -rf "$work" && mkdir -p "$work"
  if module=$(cd "$work" && go mod download -json "github.com/fluxcd/helm-controller@$helm_module" 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') &&
    [ -n "$module" ] && [ -f "$module/go.mod" ]; then
    cp -R "$module" "$work/helm-controller" && chmod -R u+w "$work/helm-controller"
    echo "$work/helm-controller"; return 0
  fi
  echo "helm-controller@$helm_module is not served by this Go proxy ($(go env GOPROXY)); using a source snapshot" >&2
  local candidates=() c
  [ -n "${HELM_CONTROLLER_SRC:-}" ] && candidates+=("$HELM_CONTROLLER_SRC")
  for c in "$root/../shared/third_party/helm-controller" "$root/../../shared/third_party/helm-controller"; do
    candidates+=("$c"/helm-controller-"$helm_commit".tar.gz)
  done
  for c in "${candidates[@]}"; do
    if [ -f "$c/go.mod" ]; then echo "$c"; return 0; fi
    if [ -f "$c" ]; then
      tar -xzf "$c" -C "$work"
      echo "$work/helm-controller"; return 0
    fi
  done
  {
    echo "helm-controller: no source found. The Go proxy does not serve github.com/fluxcd/helm-controller@$helm_module;"
    echo "  set HELM_CONTROLLER_SRC to a checkout of github.com/fluxcd/helm-controller at $helm_commit"
    echo "  (git clone https://github.com/fluxcd/helm-controller && git -C helm-controller checkout $helm_commit),"
    echo "  or to the snapshot tarball helm-controller-$helm_commit.tar.gz. Looked in: ${candidates[*]}"
  } >&2
  return 1
}

# align_with_flux makes helm-controller's build select, for each module it shares with source- and
# kustomize-controller, the newer of its own version and the one hack/tools/flux selects: a local module that
# requires what the tools module requires joins its module graph, and minimal version selection takes the higher
# of the two, as for any module depending on both. The Go build cache keys a package by its whole dependency
# closure, so only then do the packages the controllers and the operator share (the Kubernetes client,
# controller-runtime, Flux's runtime and APIs) compile once for all of them.
align_with_flux() {
  local src=$1 versions=$1/../flux-versions
  mkdir -p "$versions"
  { echo "module fluxdeployer.local/flux-versions"; sed -n '/^go /p; /^require (/,/^)/p' "$root/hack/tools/flux/go.mod"; } >"$versions/go.mod"
  (cd "$src" && go mod edit -replace=fluxdeployer.local/flux-versions=../flux-versions &&
    go get fluxdeployer.local/flux-versions@v0.0.0) >&2
}

out=$dir/helm-controller
if [ ! -x "$out" ]; then
  src=$(helm_source)
  align_with_flux "$src"
  mkdir -p "$dir"
  echo "building helm-controller from $src into $dir (first run only, about 5 minutes)" >&2
  (cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$out.tmp" .) >&2
  mv "$out.tmp" "$out"
  rm -rf "$dir/helm-controller-src"
fi
echo "$dir"
