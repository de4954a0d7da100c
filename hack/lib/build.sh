# Sourced by the asset scripts: what they share to build Kubernetes' programs from the tools modules under
# hack/tools/ into a cache folder outside the clone. The sourcing script sets root (the checkout) and dir (its
# cache folder) first.

kube_version=1.36.4

# The version a Kubernetes program reports. An unstamped build reports v0.0.0-master+$Format:%H$: clients fail to
# parse it, and Helm refuses every chart with a kubeVersion constraint (most public charts carry one) against an
# API server that reports it.
kube_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_minor=${kube_version#*.}
  kube_ldflags+=" -X $pkg.gitVersion=v$kube_version -X $pkg.gitMajor=${kube_version%%.*}"
  kube_ldflags+=" -X $pkg.gitMinor=${kube_minor%%.*} -X $pkg.gitTreeState=clean"
done

# build module-dir expected-time ldflags name=package...: builds the named programs not yet in $dir, all in one
# go build, since programs of one module share most of their packages and one build keeps both cores compiling
# while another program links. Static and -trimpath, as every other build of the project (the Makefile), so that
# they share the Go build cache: a cgo-enabled net package alone changes every package above it.
build() {
  local module=$1 expected=$2 ldflags=$3 entry tmp i
  shift 3
  local names=() packages=()
  for entry in "$@"; do
    [ -x "$dir/${entry%%=*}" ] && continue
    names+=("${entry%%=*}")
    packages+=("${entry#*=}")
  done
  [ ${#packages[@]} -eq 0 ] && return 0
  mkdir -p "$dir"
  tmp=$(mktemp -d "$dir/.build.XXXXXX")
  echo "building ${names[*]} into $dir (first run only, about $expected on 2 cores)" >&2
  (cd "$root/hack/tools/$module" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${packages[@]}") >&2 ||
    { rm -rf "$tmp"; return 1; }
  for i in "${!names[@]}"; do
    mv "$tmp/$(program_name "${packages[$i]}")" "$dir/${names[$i]}"
  done
  rmdir "$tmp"
}

# program_name is the file name go build gives a package's program: its last path element, or the one before it
# when that is a major version (go.etcd.io/etcd/server/v3 is "server").
program_name() {
  local path=$1 last=${1##*/}
  if [[ $last =~ ^v[0-9]+$ ]]; then
    path=${path%/*}
    last=${path##*/}
  fi
  echo "$last"
}
