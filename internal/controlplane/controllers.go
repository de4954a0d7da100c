package controlplane

import (
	"fmt"
	"net"
	"path/filepath"
)

// StartControllerManager runs kube-controller-manager with only the controllers the operator relies on:
// the garbage collector (owner references), the namespace controller (deleting a namespace deletes what is in
// it, waiting for Flux's finalizers) and the clusterrole-aggregation controller (config/rbac's tenant roles reach
// the cluster's view, edit and admin roles through it).
func StartControllerManager(kubeconfig, kubeAssets string) (*Process, error) {
	return StartProcess(kubeconfig, nil, filepath.Join(kubeAssets, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig, "--controllers=garbage-collector-controller,namespace-controller,clusterrole-aggregation-controller",
		"--leader-elect=false", "--secure-port=0")
}

// StartFlux runs the real source-controller, kustomize-controller and helm-controller out of cluster, as Flux's
// own e2e would in a cluster: source-controller serves artifacts on loopback, where the other two fetch them.
// storageDir holds source-controller's artifacts.
func StartFlux(kubeconfig, fluxAssets, storageDir string) ([]*Process, error) {
	storage, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	runs := [][]string{
		{"source-controller", "--storage-path=" + storageDir, "--storage-addr=" + storage, "--storage-adv-addr=" + storage},
		{"kustomize-controller"},
		{"helm-controller"},
	}
	var procs []*Process
	for _, run := range runs {
		health, err := FreeAddr()
		if err != nil {
			return procs, err
		}
		args := append(run[1:], "--metrics-addr=0", "--health-addr="+health, "--log-level=info")
		p, err := StartProcess(kubeconfig, nil, filepath.Join(fluxAssets, run[0]), args...)
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// FreeAddr returns a loopback address that nothing listened on a moment ago.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	addr := l.Addr().String()
	return addr, l.Close()
}
