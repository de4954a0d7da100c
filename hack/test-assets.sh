#!/usr/bin/env bash
# Builds the real kube-apiserver and etcd that envtest runs, kube-controller-manager for garbage collection and
# kubectl, from the Go module proxy, into a versioned cache folder outside the clone, and prints that folder (use
# it as KUBEBUILDER_ASSETS). A cold build takes about 10 minutes on 2 cores; when every program is already present
# it does nothing.
#
# The versions are pinned by the tools modules under hack/tools/ (kept out of the project's go.mod, since
# k8s.io/kubernetes drags in hundreds of modules the operator never uses).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib/build.sh
source "$root/hack/lib/build.sh"
etcd_version=3.6.14
cache=${FLUXDEPLOYER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fluxdeployer}
# "stamped": the control plane reports its real version (hack/lib/build.sh); an earlier, unstamped build in the
# same cache is left behind rather than reused.
dir=$cache/k8s/$kube_version-etcd$etcd_version-stamped
# Test packages run in parallel and each may call this script: one builds, the others wait for it.
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9

# Garbage collection of owned objects is kube-controller-manager's job: the owner-reference tests run it. kubectl
# is the one the documents' commands run, of the control plane's version, as in envtest's own assets.
build kube "8 to 16 minutes" "$kube_ldflags" kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager kubectl=k8s.io/kubernetes/cmd/kubectl
build etcd "2 minutes" "" etcd=go.etcd.io/etcd/server/v3
echo "$dir"
