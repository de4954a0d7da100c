package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// process is a program the test runs against the API server, with its output kept for failure reports.
type process struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *process) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(p.out.String()), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// start runs a program with KUBECONFIG pointing at the test's API server; it is stopped with the test, and its
// last lines are logged if the test failed.
func start(t *testing.T, kubeconfig, name string, args ...string) *process {
	t.Helper()
	p := &process{name: filepath.Base(name)}
	p.cmd = exec.Command(name, args...)
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", p.name, p.tail(40))
		}
	})
	return p
}

func writeKubeconfig(t *testing.T, env *testenv.Env) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, env.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// fluxAssets returns the folder with source-controller and kustomize-controller, building them on first use.
func fluxAssets(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("FLUX_ASSETS"); dir != "" {
		return dir
	}
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "flux-assets.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("building the Flux controllers: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// kubeAssets returns the folder with kube-apiserver, etcd and kube-controller-manager.
func kubeAssets(t *testing.T) string {
	t.Helper()
	dir, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// buildFluxdeployer builds the operator binary the way a release would.
func buildFluxdeployer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fluxdeployer")
	cmd := exec.CommandContext(context.Background(), "go", "build", "-o", bin, "./cmd/fluxdeployer")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building fluxdeployer: %v\n%s", err, out)
	}
	return bin
}

// startFlux runs the real source-controller and kustomize-controller out of cluster, as Flux's own e2e would
// in a cluster: source-controller serves artifacts on loopback, where kustomize-controller fetches them.
func startFlux(t *testing.T, kubeconfig string) {
	t.Helper()
	assets := fluxAssets(t)
	storage := testenv.FreeAddr(t)
	start(t, kubeconfig, filepath.Join(assets, "source-controller"),
		"--storage-path="+t.TempDir(), "--storage-addr="+storage, "--storage-adv-addr="+storage,
		"--metrics-addr=0", "--health-addr="+testenv.FreeAddr(t), "--log-level=info")
	start(t, kubeconfig, filepath.Join(assets, "kustomize-controller"),
		"--metrics-addr=0", "--health-addr="+testenv.FreeAddr(t), "--log-level=info")
}

func startFluxdeployer(t *testing.T, kubeconfig string) {
	t.Helper()
	start(t, kubeconfig, buildFluxdeployer(t), "run", "--metrics-addr=0", "--health-addr="+testenv.FreeAddr(t),
		"--flux-deployer-config-namespace=default", fmt.Sprintf("--log-level=%s", "info"))
}
