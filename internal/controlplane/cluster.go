package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Cluster is an API server with the operator's CRDs, RBAC and namespace installed, kube-controller-manager and
// the three Flux controllers: everything of a cluster fluxdeployer needs, except fluxdeployer.
type Cluster struct {
	*APIServer
	// Dir holds the kubeconfigs and source-controller's storage.
	Dir string
	// AdminKubeconfig is the path of a system:masters kubeconfig, for kubectl and Flux's controllers.
	AdminKubeconfig string
	// OperatorKubeconfig is the path of the operator ServiceAccount's kubeconfig.
	OperatorKubeconfig string
	// Processes are kube-controller-manager and the Flux controllers.
	Processes []*Process
}

// StartCluster builds (first run only, printing progress) and starts the control plane and Flux in a new
// temporary directory. Stop ends everything it started.
func StartCluster(ctx context.Context, progress io.Writer) (*Cluster, error) {
	return startCluster(ctx, progress, true)
}

// StartOperatorCluster is StartCluster without kube-controller-manager and Flux's controllers: the API server with
// the operator's CRDs, RBAC and ServiceAccount kubeconfig, and the Flux CRDs. Benchmarks of fluxdeployer alone use
// it, where Flux reconciling thousands of objects would only compete for the CPU.
func StartOperatorCluster(ctx context.Context, progress io.Writer) (*Cluster, error) {
	return startCluster(ctx, progress, false)
}

func startCluster(ctx context.Context, progress io.Writer, withControllers bool) (_ *Cluster, err error) {
	kubeAssets, err := KubeAssets(progress)
	if err != nil {
		return nil, fmt.Errorf("building kube-apiserver, etcd and kube-controller-manager: %w", err)
	}
	dir, err := os.MkdirTemp("", "fluxdeployer-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	if c.APIServer, err = StartAPIServer(kubeAssets, FluxCRDDirs()...); err != nil {
		return c, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	if err := InstallOperator(ctx, c.Client); err != nil {
		return c, err
	}
	if c.AdminKubeconfig, err = WriteKubeconfig(dir, "admin.kubeconfig", c.Kubeconfig); err != nil {
		return c, err
	}
	operator, err := c.ServiceAccountKubeconfig(ctx, OperatorNamespace, OperatorServiceAccount)
	if err != nil {
		return c, err
	}
	if c.OperatorKubeconfig, err = WriteKubeconfig(dir, "fluxdeployer.kubeconfig", operator); err != nil {
		return c, err
	}
	if !withControllers {
		return c, nil
	}
	fluxAssets, err := FluxAssets(progress)
	if err != nil {
		return c, fmt.Errorf("building the Flux controllers: %w", err)
	}
	kcm, err := StartControllerManager(c.AdminKubeconfig, kubeAssets)
	if err != nil {
		return c, err
	}
	c.Processes = append(c.Processes, kcm)
	storage := filepath.Join(dir, "source-controller")
	if err := os.Mkdir(storage, 0o750); err != nil {
		return c, err
	}
	flux, err := StartFlux(c.AdminKubeconfig, fluxAssets, storage)
	c.Processes = append(c.Processes, flux...)
	return c, err
}

// StartFluxdeployer runs the operator binary as the operator's ServiceAccount, in its namespace (RUNTIME_NAMESPACE,
// as the Deployment sets it), with leader election on as in config/manager.
func (c *Cluster) StartFluxdeployer(bin string, args ...string) (*Process, error) {
	health, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	args = append([]string{"run", "--enable-leader-election", "--metrics-addr=0", "--health-addr=" + health}, args...)
	return StartProcess(c.OperatorKubeconfig, []string{"RUNTIME_NAMESPACE=" + OperatorNamespace}, bin, args...)
}

// Stop ends the processes, the API server and etcd, and removes Dir.
func (c *Cluster) Stop() error {
	for i := len(c.Processes) - 1; i >= 0; i-- {
		c.Processes[i].Stop()
	}
	var err error
	if c.APIServer != nil {
		err = c.APIServer.Stop()
	}
	return errors.Join(err, os.RemoveAll(c.Dir))
}

// BuildFluxdeployer builds the operator binary into dir the way `make build` does, and returns its path.
func BuildFluxdeployer(dir string) (string, error) {
	bin := filepath.Join(dir, "fluxdeployer")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/fluxdeployer")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building fluxdeployer: %w\n%s", err, out)
	}
	return bin, nil
}
