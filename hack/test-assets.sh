#!/usr/bin/env bash
# Builds the real kube-apiserver and etcd that envtest runs (and kube-controller-manager for garbage collection), from the Go module proxy, into a versioned cache
# folder outside the clone, and prints that folder (use it as KUBEBUILDER_ASSETS). A cold build takes about
# 7 minutes on 2 cores; when both binaries are already present it does nothing.
#
# The versions are pinned by the tools modules under hack/tools/ (kept out of the project's go.mod, since
# k8s.io/kubernetes drags in hundreds of modules the operator never uses).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kube_version=1.36.3
etcd_version=3.6.16
cache=${FLUXDEPLOYER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fluxdeployer}
dir=$cache/k8s/$kube_version-etcd$etcd_version
# Test packages run in parallel and each may call this script: one builds, the others wait for it.
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9

build() { # module-dir package binary expected-time
  local out=$dir/$3
  [ -x "$out" ] && return 0
  mkdir -p "$dir"
  echo "building $3 into $dir (first run only, about $4 on 2 cores)" >&2
  (cd "$root/hack/tools/$1" && go build -trimpath -o "$out.tmp" "$2") >&2
  mv "$out.tmp" "$out"
}

build kube k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "7 to 14 minutes"
# Garbage collection of owned objects is kube-controller-manager's job: the owner-reference tests run it.
build kube k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager "3 minutes"
build etcd go.etcd.io/etcd/server/v3 etcd "2 minutes"
echo "$dir"
