# Sourced by the asset scripts: what they share to build Kubernetes' programs from the tools modules under
# hack/tools/ into a cache folder outside the clone. The sourcing script sets root (the checkout) and dir (its
# cache folder) first.

kube_version=1.36.3

# The version a Kubernetes program reports. An unstamped build reports v0.0.0-master+$Format:%H$: clients fail to
# parse it, and Helm refuses every chart with a kubeVersion constraint (most public charts carry one) against an
# API server that reports it.
kube_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_minor=${kube_version#*.}
  kube_ldflags+=" -X $pkg.gitVersion=v$kube_version -X $pkg.gitMajor=${kube_version%%.*}"
  kube_ldflags+=" -X $pkg.gitMinor=${kube_minor%%.*} -X $pkg.gitTreeState=clean"
done

build() { # module-dir package binary expected-time [ldflags]
  local out=$dir/$3
  [ -x "$out" ] && return 0
  mkdir -p "$dir"
  echo "building $3 into $dir (first run only, about $4 on 2 cores)" >&2
  (cd "$root/hack/tools/$1" && go build -trimpath -ldflags "${5:-}" -o "$out.tmp" "$2") >&2
  mv "$out.tmp" "$out"
}
