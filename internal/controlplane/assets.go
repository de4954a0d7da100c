package controlplane

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KubeAssets is the folder with kube-apiserver, etcd, kube-controller-manager and kubectl: KUBEBUILDER_ASSETS, or
// what hack/test-assets.sh builds into the cache on first use (its progress lines go to progress).
func KubeAssets(progress io.Writer) (string, error) {
	return assets("KUBEBUILDER_ASSETS", "test-assets.sh", progress)
}

// FluxAssets is the folder with source-controller, kustomize-controller and helm-controller: FLUX_ASSETS, or what
// hack/flux-assets.sh builds into the cache on first use.
func FluxAssets(progress io.Writer) (string, error) {
	return assets("FLUX_ASSETS", "flux-assets.sh", progress)
}

// NodeAssets is the folder with the kubelet, kube-scheduler, kube-proxy, containerd, its runc shim and ctr:
// NODE_ASSETS, or what hack/node-assets.sh builds into the cache on first use (it also installs runc, the CNI
// plugins and iptables from the distribution's packages when they are missing).
func NodeAssets(progress io.Writer) (string, error) {
	return assets("NODE_ASSETS", "node-assets.sh", progress)
}

func assets(envVar, script string, progress io.Writer) (string, error) {
	if dir := os.Getenv(envVar); dir != "" {
		return dir, nil
	}
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", script))
	cmd.Stderr = progress
	out, err := cmd.Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}
