// Package e2e runs fluxdeployer as a process next to the real Flux source-controller and kustomize-controller,
// all against a real kube-apiserver, with vectors and Flux artifacts in an in-process OCI registry.
package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	root := testenv.RepoRoot()
	testenv.Main(m, func(e *testenv.Env) { env = e },
		filepath.Join(root, "internal", "fluxdeployer", "testdata", "crds"),
		filepath.Join(root, "e2e", "testdata", "crds"))
}

// pushKustomizeBundle pushes a Flux OCI artifact (as `flux push artifact` writes it) holding a kustomization
// with one ConfigMap, and returns its reference with http://, the way an OCM access would name it.
func pushKustomizeBundle(t *testing.T, host, path, tag string) string {
	t.Helper()
	files := map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - configmap.yaml\n",
		"configmap.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\ndata:\n  greeting: hello\n",
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range []string{"kustomization.yaml", "configmap.yaml"} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	repo := &remote.Repository{Reference: registry.Reference{Registry: host, Repository: path}, PlainHTTP: true}
	push := func(mediaType string, data []byte) ocispec.Descriptor {
		desc := content.NewDescriptorFromBytes(mediaType, data)
		if err := repo.Push(ctx, desc, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		return desc
	}
	layer := push("application/vnd.cncf.flux.content.v1.tar+gzip", buf.Bytes())
	config := push("application/vnd.cncf.flux.config.v1+json", []byte("{}"))
	manifest, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		Layers:           []ocispec.Descriptor{layer},
		ConfigDescriptor: &config,
		ManifestAnnotations: map[string]string{
			ocispec.AnnotationCreated:  "2026-11-29T00:00:00Z",
			ocispec.AnnotationSource:   "https://example.org/acme/config",
			ocispec.AnnotationRevision: "main@sha1:0000000000000000000000000000000000000000",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Tag(ctx, manifest, tag); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://%s/%s:%s", host, path, tag)
}

// TestVectorDeploysThroughFlux follows a vector all the way: fluxdeployer reads it from the registry, creates
// the ArtifactDeployment, turns it into an OCIRepository and a Kustomization; the real source-controller pulls
// the bundle, the real kustomize-controller applies it under the deployer's name suffix; readiness flows back
// to the ArtifactDeployment and the VectorDeployment.
func TestVectorDeploysThroughFlux(t *testing.T) {
	ctx := context.Background()
	reg := ocmtest.NewRegistry(t)
	bundle := pushKustomizeBundle(t, reg.Host, "bundles/config", "0.4.0")
	artifact := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", "cloud.konfidence.flux.kustomize", true)
	artifact.Resources[1] = ocmtest.Resource{Name: "bundle", Version: "0.4.0", Type: "kustomize",
		Access: map[string]string{"type": "ociArtifact", "imageReference": bundle}}
	reg.Push(t, "", artifact, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", artifact))

	kubeconfig := writeKubeconfig(t, env)
	startFlux(t, kubeconfig)
	startFluxdeployer(t, kubeconfig)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shop-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	vd := &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "shop"},
		Spec:       konfidencev1.VectorDeploymentSpec{Vector: reg.Ref("", "acme.org/vectors/shop", "1.0.0")},
	}
	if err := env.Client.Create(ctx, vd); err != nil {
		t.Fatal(err)
	}

	name, hash, err := naming.ArtifactDeploymentName(artifact.Name, artifact.Version, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
			return err
		}
		if !conditions.IsReady(vd) {
			return fmt.Errorf("VectorDeployment not ready: %+v", vd.Status.Conditions)
		}
		return nil
	})

	ad := &konfidencev1.ArtifactDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name}, ad); err != nil {
		t.Fatalf("ArtifactDeployment %s: %v", name, err)
	}
	for _, c := range []string{konfidencev1.ArtifactFetchedCondition, konfidencev1.ArtifactDeployedCondition, konfidencev1.AppHealthyCondition} {
		if !conditions.IsTrue(ad, c) {
			t.Errorf("ArtifactDeployment condition %s: %+v", c, conditions.Get(ad, c))
		}
	}
	// kustomize-controller applied the bundle under the deployer's suffix, labelled with the ArtifactDeployment.
	cm := &corev1.ConfigMap{}
	cmName := "app-config-0-4-0-" + hash
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: cmName}, cm); err != nil {
		t.Fatalf("ConfigMap %s from the bundle: %v", cmName, err)
	}
	if cm.Labels[konfidencev1.ArtifactDeploymentLabel] != name || cm.Data["greeting"] != "hello" {
		t.Errorf("ConfigMap %s: labels %v, data %v", cmName, cm.Labels, cm.Data)
	}
}
