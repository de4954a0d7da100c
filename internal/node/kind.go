package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
)

// Kind is an existing kind cluster (kind.sigs.k8s.io) where the tests of pods run as they do on the node: the
// images are built here as for the node, without a container engine, and loaded into the kind cluster's nodes
// with `kind load image-archive` instead of imported into the node's containerd. Flux and the operator are
// installed on it beforehand (hack/e2e-kind.sh). kind itself needs a container engine (Docker) to run.
type Kind struct {
	API
	// Name is the kind cluster's name (kind create cluster --name).
	Name string
	// RegistryHost is this machine's address as the cluster's pods reach it, e.g. the kind network's gateway.
	RegistryHost string

	dir string
	// command runs kind: the version pinned in hack/tools/kind, run from the repository's root.
	command []string
}

// kindCommand runs the kind of hack/tools/kind, as the Makefile's scripts do.
var kindCommand = []string{"go", "tool", "-modfile=hack/tools/kind/go.mod", "kind"}

// ConnectKind prepares the kind cluster name, whose API is api and whose pods reach this machine at
// registryHost, for the tests of pods: it builds the workload image and loads it into the cluster's nodes.
func ConnectKind(ctx context.Context, name, registryHost string, api API) (*Kind, error) {
	if name == "" || registryHost == "" {
		return nil, fmt.Errorf("a kind cluster needs its name (%q) and the address its pods reach this machine at (%q)", name, registryHost)
	}
	dir, err := os.MkdirTemp("", "fluxdeployer-kind-")
	if err != nil {
		return nil, err
	}
	k := &Kind{API: api, Name: name, RegistryHost: registryHost, dir: dir, command: kindCommand}
	if err := k.loadWorkloadImage(ctx); err != nil {
		return nil, errors.Join(err, k.Stop())
	}
	return k, nil
}

// loadWorkloadImage builds the workload image, as the node does, and loads it into the cluster's nodes.
func (k *Kind) loadWorkloadImage(ctx context.Context) error {
	bin := filepath.Join(k.dir, "bin")
	if err := buildImageBinaries(bin, "workload"); err != nil {
		return err
	}
	return loadImage(ctx, filepath.Join(k.dir, "images"), workloadImage(bin), k.LoadArchive)
}

// BuildOperatorImage builds the operator's image ref with hack/image, as `make image` does, and loads it into
// the cluster's nodes; the binary reports version, or the VERSION file's when it is empty.
func (k *Kind) BuildOperatorImage(ctx context.Context, ref, version string) error {
	return buildOperatorImage(ctx, controlplane.RepoRoot(), filepath.Join(k.dir, "fluxdeployer.tar"), ref, k.LoadArchive, versionFlag(version)...)
}

// LoadArchive loads the images of an archive (OCI or docker save format) into every node of the cluster, where
// the kubelet finds them without a pull.
func (k *Kind) LoadArchive(ctx context.Context, archive string) error {
	cmd := k.loadCommand(ctx, archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", cmd, err, out)
	}
	return nil
}

// loadCommand is `kind load image-archive ARCHIVE --name NAME`, run from the repository's root.
func (k *Kind) loadCommand(ctx context.Context, archive string) *exec.Cmd {
	args := append(k.command[1:len(k.command):len(k.command)], "load", "image-archive", archive, "--name", k.Name)
	cmd := exec.CommandContext(ctx, k.command[0], args...)
	cmd.Dir = controlplane.RepoRoot()
	return cmd
}

// RegistryAddrs are where the test's registry listens, all interfaces (the pods come from kind's network), and
// the host the pods name it by.
func (k *Kind) RegistryAddrs() (listen, host string) { return "0.0.0.0", k.RegistryHost }

// Stop removes the images built for the cluster; the cluster itself is its creator's to delete.
func (k *Kind) Stop() error { return os.RemoveAll(k.dir) }

// NetnsDialer is not offered on kind: its nodes' network namespaces belong to the container engine's containers,
// which this package does not enter. The tests that dial Services from the host skip there.
func (k *Kind) NetnsDialer() (*NetnsDialer, error) {
	return nil, fmt.Errorf("dialing from kind cluster %s's network: %w", k.Name, errors.ErrUnsupported)
}
