package node

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
)

// SourceControllerIP is the ClusterIP of source-controller's Service, fixed because there is no cluster DNS:
// source-controller advertises its artifacts' URLs there, and kustomize- and helm-controller fetch them there.
const SourceControllerIP = "10.96.0.20"

// FluxNamespace is where Flux's controllers run.
const FluxNamespace = "flux-system"

// fluxManifest installs Flux's three controllers as Flux's own install manifests do (see its header).
//
//go:embed manifests/flux.yaml
var fluxManifest string

// fluxImages are the images fluxManifest names, each holding a binary the test assets built.
var fluxImages = map[string]string{
	"source-controller":    "ghcr.io/fluxcd/source-controller:v1.9.6",
	"kustomize-controller": "ghcr.io/fluxcd/kustomize-controller:v1.9.6",
	"helm-controller":      "ghcr.io/fluxcd/helm-controller:0f61a86",
}

// caBundle is where Debian keeps the machine's CA certificates, and where Go's TLS looks for them first.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// InstallFlux imports images of the Flux controllers the test assets built (building them on first use, printing
// progress), installs Flux's CRDs and applies Flux's install manifests, and waits until the three Deployments
// are Available.
func (c *Cluster) InstallFlux(ctx context.Context, progress io.Writer) error {
	begin := time.Now()
	fluxAssets, err := controlplane.FluxAssets(progress)
	if err != nil {
		return fmt.Errorf("building the Flux controllers: %w", err)
	}
	for name, ref := range fluxImages {
		bin := "/usr/local/bin/" + name
		im := Image{Ref: ref, Files: map[string]string{bin: filepath.Join(fluxAssets, name)}, Entrypoint: []string{bin}, User: "65534:65534"}
		// Flux's images carry a CA bundle, so that source-controller reaches registries over HTTPS: these carry
		// this machine's, as the operator's image does (hack/image).
		if _, err := os.Stat(caBundle); err == nil {
			im.Files[caBundle] = caBundle
		}
		if err := c.ImportImage(ctx, im); err != nil {
			return err
		}
	}
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: controlplane.FluxCRDDirs(), ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing Flux's CRDs: %w", err)
	}
	objs, err := controlplane.Decode([]byte(strings.ReplaceAll(fluxManifest, "SOURCE_CONTROLLER_IP", SourceControllerIP)))
	if err != nil {
		return err
	}
	if err := controlplane.Apply(ctx, c.Client, objs); err != nil {
		return err
	}
	for name := range fluxImages {
		if err := c.WaitAvailable(ctx, 3*time.Minute, FluxNamespace, name); err != nil {
			return err
		}
	}
	c.Started = append(c.Started, fmt.Sprintf("Flux installed and Available in %s", time.Since(begin).Round(10*time.Millisecond)))
	return nil
}

// StartInstalled starts a node and installs on it Flux from its install manifests and the operator from its
// installer, with images built here, as a user installs them; it stops the node if an install fails.
func StartInstalled(ctx context.Context, progress io.Writer) (*Cluster, error) {
	c, err := Start(ctx, progress)
	if err != nil {
		return nil, err
	}
	ref, err := OperatorImage()
	if err == nil {
		err = c.InstallFlux(ctx, progress)
	}
	if err == nil {
		err = c.InstallOperator(ctx, ref)
	}
	if err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// OperatorImage is the operator's release image, as `make build-installer` names it by default: tagged with the
// release tag, the VERSION file's version with a v.
func OperatorImage() (string, error) {
	version, err := os.ReadFile(filepath.Join(controlplane.RepoRoot(), "VERSION"))
	if err != nil {
		return "", err
	}
	return "ghcr.io/fluxdeployer/fluxdeployer:v" + strings.TrimSpace(string(version)), nil
}

// BuildOperatorImage builds the operator's image ref with hack/image, as `make image` does, and imports it; the
// binary reports version, or the VERSION file's when it is empty.
func (c *Cluster) BuildOperatorImage(ctx context.Context, ref, version string) error {
	return buildOperatorImage(ctx, c.path("images/fluxdeployer.tar"), ref, version, c.ImportArchive)
}

// buildOperatorImage writes the operator's image ref, built by hack/image as `make image` builds it, to the
// archive (docker save format), hands it to load and removes it; the binary reports version, or the VERSION
// file's when it is empty.
func buildOperatorImage(ctx context.Context, archive, ref, version string, load func(context.Context, string) error) error {
	args := []string{"run", "./hack/image", "-img", ref, "-tarball", archive}
	if version != "" {
		args = append(args, "-version", version)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = controlplane.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the operator's image: %w\n%s", err, out)
	}
	defer func() { _ = os.Remove(archive) }()
	return load(ctx, archive)
}

// Installer renders what `make build-installer IMG=ref` writes to dist/install.yaml (the same script), into the
// cluster's directory, and returns its path.
func (c *Cluster) Installer(ctx context.Context, ref string) (string, error) {
	out, err := Render(ctx, ref, "config/default")
	if err != nil {
		return "", err
	}
	path := c.path("install.yaml")
	return path, os.WriteFile(path, out, 0o600)
}

// Render builds a kustomization of config/ (config/default, config/sharding) with the manager's image set to ref,
// with the script `make build-installer` renders dist/install.yaml with, so that what a test applies runs the image
// the cluster was given.
func Render(ctx context.Context, ref, dir string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(controlplane.RepoRoot(), "hack", "kustomize-with-image.sh"), ref, dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("rendering %s for %s: %w\n%s", dir, ref, err, stderr.String())
	}
	return out, nil
}

// InstallOperator builds and imports the operator's image ref, applies the installer rendered for it, as a user
// applies dist/install.yaml, and waits until the operator's Deployment is Available.
func (c *Cluster) InstallOperator(ctx context.Context, ref string) error {
	begin := time.Now()
	if err := c.BuildOperatorImage(ctx, ref, ""); err != nil {
		return err
	}
	if err := c.ApplyInstaller(ctx, ref); err != nil {
		return err
	}
	if err := c.WaitAvailable(ctx, 2*time.Minute, controlplane.OperatorNamespace, "fluxdeployer"); err != nil {
		return err
	}
	c.Started = append(c.Started, fmt.Sprintf("operator installed and Available in %s", time.Since(begin).Round(10*time.Millisecond)))
	return nil
}

// ApplyInstaller renders the installer for the image ref and applies it.
func (c *Cluster) ApplyInstaller(ctx context.Context, ref string) error {
	path, err := c.Installer(ctx, ref)
	if err != nil {
		return err
	}
	manifest, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := controlplane.Decode(manifest)
	if err != nil {
		return err
	}
	return controlplane.Apply(ctx, c.Client, objs)
}

// WaitAvailable waits until the Deployment's pods of its current template are all updated and ready; the error
// tells the state of its pods and the kubelet's last lines.
func (c *Cluster) WaitAvailable(ctx context.Context, timeout time.Duration, namespace, name string) error {
	return c.waitFor(ctx, timeout, fmt.Sprintf("Deployment %s/%s Available", namespace, name), func() error {
		return c.deploymentAvailable(ctx, namespace, name)
	}, kubelet)
}
