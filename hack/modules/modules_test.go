// Package modules checks that the builds of a first run agree on the version of every module they share.
//
// A first run on a fresh machine compiles the operator, its tests, the Flux controllers, Kubernetes' programs and
// the tools from source, nearly all of its time on 2 cores. The Go build cache compiles a package once only when
// every build agrees on its version and on the versions of everything under it, so one module a patch release
// apart (golang.org/x/net, say) compiles every package above it again: with kube-apiserver built on other versions
// of k8s.io/api, client-go and grpc than the operator's, a first run compiled them twice. hack/align-modules.sh
// makes the tools modules agree with hack/tools/flux; this test fails when a change made them disagree again.
package modules

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// build is one go build (or go test) of a first run: the module it runs in and what it compiles.
type build struct {
	name, dir string
	args      []string
}

// builds are the builds whose shared modules must agree. Not among them: golangci-lint, which pins its own
// analysis libraries and shares little else.
var builds = []build{
	{"the operator and its tests", ".", []string{"-test", "./..."}},
	{"the Flux controllers, helm, cosign and the chart's tests", "hack/tools/flux", []string{"-test",
		"github.com/fluxcd/source-controller", "github.com/fluxcd/kustomize-controller",
		"helm.sh/helm/v4/cmd/helm", "github.com/sigstore/cosign/v3/cmd/cosign", "./chart"}},
	{"Kubernetes' programs", "hack/tools/kube", []string{
		"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager",
		"k8s.io/kubernetes/cmd/kubectl", "k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-scheduler",
		"k8s.io/kubernetes/cmd/kube-proxy"}},
	{"etcd", "hack/tools/etcd", []string{"go.etcd.io/etcd/server/v3"}},
	{"containerd", "hack/tools/containerd", []string{"github.com/containerd/containerd/v2/cmd/containerd",
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2", "github.com/containerd/containerd/v2/cmd/ctr"}},
	{"controller-gen", "hack/tools/controller-gen", []string{"sigs.k8s.io/controller-tools/cmd/controller-gen"}},
	{"kustomize", "hack/tools/kustomize", []string{"sigs.k8s.io/kustomize/kustomize/v5"}},
	// The tags promtool is built with (internal/monitoring): without the service discoveries' cloud SDKs.
	{"promtool and promql-names", "hack/tools/prometheus", []string{"-tags", "remove_all_sd",
		"github.com/prometheus/prometheus/cmd/promtool", "./promql-names"}},
}

func TestSharedModulesAgree(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// versions[module][version] lists the builds that compile the module at that version.
	versions := map[string]map[string][]string{}
	for _, b := range builds {
		for module, version := range compiledModules(t, filepath.Join(root, b.dir), b.args) {
			if versions[module] == nil {
				versions[module] = map[string][]string{}
			}
			versions[module][version] = append(versions[module][version], b.name)
		}
	}
	for _, module := range slices.Sorted(maps.Keys(versions)) {
		if len(versions[module]) < 2 {
			continue
		}
		var each []string
		for _, v := range slices.Sorted(maps.Keys(versions[module])) {
			each = append(each, v+" ("+strings.Join(versions[module][v], ", ")+")")
		}
		t.Errorf("%s is compiled at %s: raise it to the newest in the modules of the others (in hack/tools/flux, "+
			"and in the operator's go.mod where the operator compiles it, when they compile it), then run "+
			"hack/align-modules.sh", module, strings.Join(each, ", "))
	}
}

// compiledModules returns the version of every module a build in dir compiles a package of, as go list reports
// the build: the module graph as that build resolves it, the packages its arguments name with every dependency,
// and for a module replaced by another version (Kubernetes' staging modules) the version that replaces it.
func compiledModules(t *testing.T, dir string, args []string) map[string]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}"},
		args...)...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v", dir, err)
	}
	modules := map[string]string{}
	for line := range strings.Lines(string(out)) {
		module, version, ok := strings.Cut(strings.TrimSpace(line), " ")
		// The main modules have no version: each is compiled by its own build only.
		if ok && version != "" {
			modules[module] = version
		}
	}
	return modules
}
