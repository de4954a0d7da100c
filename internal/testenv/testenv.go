// Package testenv starts a real kube-apiserver and etcd (controller-runtime's envtest, through
// internal/controlplane) with the project's CRDs installed, for tests of behaviour the API server decides:
// validation, CEL rules, conflicts, subresources, RBAC and owner-reference admission.
//
// The binaries come from KUBEBUILDER_ASSETS; when it is unset, hack/test-assets.sh builds them (once, into a
// cache outside the clone) and says where.
package testenv

import (
	"fmt"
	"os"
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
)

// Env is a running API server with an admin client for it.
type Env = controlplane.APIServer

// RepoRoot is the root of the fluxdeployer module.
func RepoRoot() string { return controlplane.RepoRoot() }

// Start starts envtest with the project's CRDs and any extra CRD directories, and stops it when the test ends.
func Start(t testing.TB, extraCRDDirs ...string) *Env {
	t.Helper()
	env, err := start(extraCRDDirs...)
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	stopWhenDone(t, env)
	return env
}

func stopWhenDone(t testing.TB, env *Env) {
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
}

// StartAudited is Start with the API server's audit log of every request of user (see
// controlplane.StartAuditedAPIServer).
func StartAudited(t testing.TB, user string, extraCRDDirs ...string) (*Env, *controlplane.AuditLog) {
	t.Helper()
	assets, err := controlplane.KubeAssets(os.Stderr)
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	env, audit, err := controlplane.StartAuditedAPIServer(assets, user, extraCRDDirs...)
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	stopWhenDone(t, env)
	return env, audit
}

// Main starts one API server for a whole test binary: call it from TestMain. It hands the server to use, runs
// the tests, stops the server and exits.
func Main(m *testing.M, use func(*Env), extraCRDDirs ...string) {
	env, err := start(extraCRDDirs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		os.Exit(1)
	}
	use(env)
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		code = 1
	}
	os.Exit(code)
}

func start(extraCRDDirs ...string) (*Env, error) {
	assets, err := controlplane.KubeAssets(os.Stderr)
	if err != nil {
		return nil, err
	}
	return controlplane.StartAPIServer(assets, extraCRDDirs...)
}
