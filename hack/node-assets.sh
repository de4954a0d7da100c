#!/usr/bin/env bash
# Builds what a real node needs besides the control plane of hack/test-assets.sh, into a versioned cache folder
# outside the clone, and prints that folder (the node suite's NODE_ASSETS):
#   - kubelet, kube-scheduler and kube-proxy from the tools module hack/tools/kube, stamped with their version
#     (hack/lib/build.sh);
#   - containerd 2.3, its runc shim and ctr from the tools module hack/tools/containerd (Kubernetes 1.36's kubelet
#     needs containerd 2.x; 2.3 is the newest on Kubernetes 1.36's libraries, as the rest of the project, so that
#     a first run compiles those once: hack/align-modules.sh);
#   - runc, the CNI plugins (bridge, host-local, loopback) and the iptables and conntrack tools kube-proxy runs,
#     installed from Debian's packages when missing.
# When everything is present it does nothing. Cold, on 2 cores, after hack/test-assets.sh: about 2 minutes for the
# kubelet, kube-scheduler and kube-proxy (they share most packages with the control plane), 3 for containerd, under
# a minute for the rest.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib/build.sh
source "$root/hack/lib/build.sh"
containerd_version=2.3.6
cache=${FLUXDEPLOYER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fluxdeployer}
dir=$cache/node/$kube_version-containerd$containerd_version
# Test packages run in parallel and each may call this script: one builds, the others wait for it.
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9

build kube "2 minutes after hack/test-assets.sh" "$kube_ldflags" kubelet=k8s.io/kubernetes/cmd/kubelet \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler kube-proxy=k8s.io/kubernetes/cmd/kube-proxy
# Without cgo containerd needs no C headers (its btrfs snapshotter is left out; overlayfs is used).
containerd_ldflags="-X github.com/containerd/containerd/v2/version.Version=v$containerd_version"
build containerd "3 minutes" "$containerd_ldflags" containerd=github.com/containerd/containerd/v2/cmd/containerd \
  containerd-shim-runc-v2=github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  ctr=github.com/containerd/containerd/v2/cmd/ctr

# runc, the CNI plugins and kube-proxy's tools come from the distribution, where containerd, the kubelet and
# kube-proxy expect them.
packages=(runc containernetworking-plugins iptables conntrack)
if [ ! -x /usr/sbin/runc ] || [ ! -x /usr/lib/cni/bridge ] || [ ! -x /usr/sbin/iptables-restore ] ||
  [ ! -x /usr/sbin/conntrack ]; then
  echo "installing ${packages[*]} from Debian (first run only, about 30 seconds)" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -q --no-install-recommends "${packages[@]}" ||
    { apt-get update -q && apt-get install -y -q --no-install-recommends "${packages[@]}"; }; } >&2
fi
echo "$dir"
