#!/usr/bin/env bash
# Makes the tools modules that build Kubernetes' programs, etcd, containerd, controller-gen, kustomize and promtool
# select, for every module they share with the operator's module or hack/tools/flux, at least the version those
# select (minimal version selection takes the newer of the two), then tidies them. The Go build cache compiles a package
# once only when every build agrees on its version and on its dependencies' versions: k8s.io/api alone is a minute
# of compiling, and with kube-apiserver one patch release apart from the operator's libraries a first run compiled
# it twice, with client-go, apimachinery, grpc and golang.org/x under it. hack/modules' test fails when the builds
# disagree.
#
# hack/tools/flux holds the union of the operator's versions and the Flux controllers'. After raising a version in
# one tools module, raise it in hack/tools/flux too (and in the operator's go.mod where the operator compiles that
# module), then run this.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
requires=$(sed -n '/^require (/,/^)/p' "$root/go.mod" "$root/hack/tools/flux/go.mod" | grep -v -e '^require (' -e '^)$')
for tool in kube etcd containerd controller-gen kustomize prometheus; do
  printf '\nrequire (\n%s\n)\n' "$requires" >>"$root/hack/tools/$tool/go.mod"
  (cd "$root/hack/tools/$tool" && go mod tidy)
done
