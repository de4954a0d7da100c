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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	return buildOperatorImage(ctx, controlplane.RepoRoot(), c.path("images/fluxdeployer.tar"), ref, c.ImportArchive, versionFlag(version)...)
}

// versionFlag is hack/image's -version for version, none when it is empty (the VERSION file's).
func versionFlag(version string) []string {
	if version == "" {
		return nil
	}
	return []string{"-version", version}
}

// BuildReleaseImage builds the operator's image ref from the tree of the release rel extracted into src
// (ExtractTree) with that tree's own hack/image, as `make image` at the release's commit does: stamped with its
// VERSION, its commit and the commit's time, which `make image` takes from git and the extracted tree has no git
// for. It imports the image.
func (c *Cluster) BuildReleaseImage(ctx context.Context, src string, rel Release, ref string) error {
	return buildOperatorImage(ctx, src, c.path("images/fluxdeployer.tar"), ref, c.ImportArchive,
		"-version", rel.Version, "-commit", rel.Commit, "-created", rel.Created)
}

// buildOperatorImage writes the operator's image ref, built from the source tree src by its hack/image as `make
// image` builds it, with the further flags of hack/image args, to the archive (docker save format), hands it to
// load and removes it.
func buildOperatorImage(ctx context.Context, src, archive, ref string, load func(context.Context, string) error, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./hack/image", "-img", ref, "-tarball", archive}, args...)...)
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the operator's image in %s: %w\n%s", src, err, out)
	}
	defer func() { _ = os.Remove(archive) }()
	return load(ctx, archive)
}

// Installer renders what `make build-installer IMG=ref` writes to dist/install.yaml (the same script), into the
// cluster's directory, and returns its path.
func (c *Cluster) Installer(ctx context.Context, ref string) (string, error) {
	return c.InstallerFrom(ctx, controlplane.RepoRoot(), ref)
}

// InstallerFrom renders what `make build-installer IMG=ref` writes to dist/install.yaml in the source tree src,
// with that tree's script and config/, and writes it to src's dist/install.yaml, as the make target does there.
// For this repository's own tree it writes into the cluster's directory instead, leaving the clone's dist/ alone.
func (c *Cluster) InstallerFrom(ctx context.Context, src, ref string) (string, error) {
	out, err := RenderFrom(ctx, src, ref, "config/default")
	if err != nil {
		return "", err
	}
	path := filepath.Join(src, "dist", "install.yaml")
	if src == controlplane.RepoRoot() {
		path = c.path("install.yaml")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, out, 0o600)
}

// Render builds a kustomization of config/ (config/default, config/sharding) with the manager's image set to ref,
// with the script `make build-installer` renders dist/install.yaml with, so that what a test applies runs the image
// the cluster was given.
func Render(ctx context.Context, ref, dir string) ([]byte, error) {
	return RenderFrom(ctx, controlplane.RepoRoot(), ref, dir)
}

// RenderFrom is Render in the source tree src, with its own hack/kustomize-with-image.sh and config/. A tree whose
// script takes no directory (releases up to 0.1.0) renders config/default whatever dir says.
func RenderFrom(ctx context.Context, src, ref, dir string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(src, "hack", "kustomize-with-image.sh"), ref, dir)
	cmd.Dir = src
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("rendering %s of %s for %s: %w\n%s", dir, src, ref, err, stderr.String())
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
	return c.ApplyInstallerFrom(ctx, controlplane.RepoRoot(), ref)
}

// ApplyInstallerFrom renders the installer of the source tree src for the image ref (InstallerFrom) and applies
// it as `kubectl apply --server-side -f install.yaml` does: every object, by one field manager, forced, so that
// fields a later installer no longer has are removed and objects it no longer has stay. managerArgs are added to
// the operator's command line first, as a user's overlay of install.yaml adds flags (--allowed-target-hosts, say):
// part of every apply that wants them, since the next apply without them takes them away again.
func (c *Cluster) ApplyInstallerFrom(ctx context.Context, src, ref string, managerArgs ...string) error {
	path, err := c.InstallerFrom(ctx, src, ref)
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
	if err := appendManagerArgs(objs, managerArgs); err != nil {
		return fmt.Errorf("the installer of %s: %w", src, err)
	}
	return controlplane.Apply(ctx, c.Client, objs)
}

// operatorDeployment and managerContainer name the operator's Deployment and its container in every installer
// (config/manager).
const (
	operatorDeployment = "fluxdeployer"
	managerContainer   = "manager"
)

// appendManagerArgs appends args to the arguments of the manager container of the operator's Deployment among the
// installer's objects; with none it changes nothing. An installer without that container is an error, so that a
// flag meant for the operator is never dropped silently.
func appendManagerArgs(objs []*unstructured.Unstructured, args []string) error {
	if len(args) == 0 {
		return nil
	}
	for _, u := range objs {
		if u.GetKind() != "Deployment" || u.GetName() != operatorDeployment {
			continue
		}
		containers, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		if err != nil {
			return err
		}
		for i, c := range containers {
			container, ok := c.(map[string]any)
			if !ok || container["name"] != managerContainer {
				continue
			}
			have, _, err := unstructured.NestedStringSlice(container, "args")
			if err != nil {
				return err
			}
			all := make([]any, 0, len(have)+len(args))
			for _, a := range append(have, args...) {
				all = append(all, a)
			}
			container["args"] = all
			containers[i] = container
			return unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
		}
	}
	return fmt.Errorf("no container %s in a Deployment %s to give the arguments %v", managerContainer, operatorDeployment, args)
}

// WaitAvailable waits until the Deployment's pods of its current template are all updated and ready; the error
// tells the state of its pods and the kubelet's last lines.
func (c *Cluster) WaitAvailable(ctx context.Context, timeout time.Duration, namespace, name string) error {
	return c.waitFor(ctx, timeout, fmt.Sprintf("Deployment %s/%s Available", namespace, name), func() error {
		return c.deploymentAvailable(ctx, namespace, name)
	}, kubelet)
}
