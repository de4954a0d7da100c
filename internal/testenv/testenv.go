// Package testenv starts a real kube-apiserver and etcd (controller-runtime's envtest) with the project's CRDs
// installed, for tests of behaviour the API server decides: validation, CEL rules, conflicts, subresources.
//
// The binaries come from KUBEBUILDER_ASSETS; when it is unset, hack/test-assets.sh builds them (once, into a
// cache outside the clone) and says where.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// Env is a running API server with a client for it.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *kruntime.Scheme
	// Kubeconfig authenticates a member of system:masters, for programs the tests run as processes.
	Kubeconfig []byte
}

// RepoRoot is the root of the fluxdeployer module, found from this file so tests run from any package.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Start starts envtest with the project's CRDs and any extra CRD directories, and stops it when the test ends.
func Start(t testing.TB, extraCRDDirs ...string) *Env {
	t.Helper()
	env, stop, err := start(extraCRDDirs...)
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	return env
}

// Main starts one API server for a whole test binary: call it from TestMain. It hands the server to use, runs
// the tests, stops the server and exits.
func Main(m *testing.M, use func(*Env), extraCRDDirs ...string) {
	env, stop, err := start(extraCRDDirs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		os.Exit(1)
	}
	use(env)
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		code = 1
	}
	os.Exit(code)
}

func start(extraCRDDirs ...string) (_ *Env, stop func() error, err error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, nil, err
	}
	scheme := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := konfidencev1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, extraCRDDirs...),
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			_ = te.Stop()
		}
	}()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	admin, err := te.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, nil, err
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return nil, nil, err
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, Kubeconfig: kubeconfig}, te.Stop, nil
}

// AssetsDir is the folder with kube-apiserver, etcd and kube-controller-manager: KUBEBUILDER_ASSETS, or what
// hack/test-assets.sh builds.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "test-assets.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}
