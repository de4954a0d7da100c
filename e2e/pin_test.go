package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestVerifiedVectorKeepsItsContent: a VectorDeployment requiring a signature deploys a signed vector whose
// artifact pins its kustomize bundle by digest; the OCIRepository is pinned to that digest. The bundle's tag is then
// pushed again with other content and Flux is asked to reconcile: the real source-controller keeps the verified
// content and kustomize-controller keeps the verified ConfigMap; the VectorDeployment, asked to verify again, reports
// DigestMismatch without touching what runs.
func TestVerifiedVectorKeepsItsContent(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	bundle, err := ocmtest.PushKustomizeBundle(ctx, reg.Host, "bundles/pinned", "0.4.0", ocmtest.ConfigBundle)
	if err != nil {
		t.Fatal(err)
	}
	verified, err := ocmtest.ManifestDigest(ctx, bundle)
	if err != nil {
		t.Fatal(err)
	}
	artifact := ocmtest.Artifact("acme.org/artifacts/pinned", "0.4.0", "cloud.konfidence.flux.kustomize", true)
	artifact.Resources[1] = ocmtest.BundleResource("0.4.0", bundle).WithOCIDigest(verified)

	startFluxdeployer(t, nil)
	ns := newNamespace(t, "pinned")
	vd := deployVerified(t, reg, ns, artifact)
	waitReady(t, 3*time.Minute, vd)

	name := adName(t, artifact, nil)
	key2 := client.ObjectKey{Namespace: ns, Name: name}
	repo := &sourcev1.OCIRepository{}
	if err := env.Client.Get(ctx, key2, repo); err != nil {
		t.Fatal(err)
	}
	if repo.Spec.Reference == nil || repo.Spec.Reference.Digest != verified || repo.Spec.Reference.Tag != "" {
		t.Fatalf("OCIRepository ref = %+v, want digest %s", repo.Spec.Reference, verified)
	}
	configMap := func() string {
		t.Helper()
		list := &corev1.ConfigMapList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{konfidencev1.ArtifactDeploymentLabel: name}); err != nil || len(list.Items) != 1 {
			t.Fatalf("ConfigMaps of %s: %v, %d", name, err, len(list.Items))
		}
		return list.Items[0].Data["greeting"]
	}
	if got := configMap(); got != "hello" {
		t.Fatalf("greeting %q before the tag moved", got)
	}

	// The tag now names other content.
	tampered := maps.Clone(ocmtest.ConfigBundle)
	tampered["configmap.yaml"] = strings.Replace(tampered["configmap.yaml"], "hello", "tampered", 1)
	if _, err := ocmtest.PushKustomizeBundle(ctx, reg.Host, "bundles/pinned", "0.4.0", tampered); err != nil {
		t.Fatal(err)
	}
	if moved, err := ocmtest.ManifestDigest(ctx, bundle); err != nil || moved == verified {
		t.Fatalf("the tag did not move: %s, %v", moved, err)
	}
	token := metav1.Now().Format(time.RFC3339Nano)
	ad := &konfidencev1.ArtifactDeployment{}
	if err := env.Client.Get(ctx, key2, ad); err != nil {
		t.Fatal(err)
	}
	before := ad.DeepCopy()
	ad.Annotations[meta.ReconcileRequestAnnotation] = token
	if err := env.Client.Patch(ctx, ad, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func() error {
		repo := &sourcev1.OCIRepository{}
		ks := &kustomizev1.Kustomization{}
		if err := env.Client.Get(ctx, key2, repo); err != nil {
			return err
		}
		if err := env.Client.Get(ctx, key2, ks); err != nil {
			return err
		}
		switch {
		case repo.Status.LastHandledReconcileAt != token || ks.Status.LastHandledReconcileAt != token:
			return fmt.Errorf("reconcile request %s not handled yet: OCIRepository %q, Kustomization %q", token, repo.Status.LastHandledReconcileAt, ks.Status.LastHandledReconcileAt)
		case repo.Status.Artifact == nil || !strings.Contains(repo.Status.Artifact.Revision, verified):
			return fmt.Errorf("OCIRepository artifact %+v, want revision of %s", repo.Status.Artifact, verified)
		}
		return nil
	})
	if got := configMap(); got != "hello" {
		t.Errorf("greeting %q after the tag moved: Flux deployed content the signature does not cover", got)
	}

	// Asked to reconcile, the VectorDeployment verifies again against the registry: the bundle's tag no longer
	// names the signed digest. It reports so, and its ArtifactDeployment keeps running the pinned content.
	latest := &konfidencev1.VectorDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), latest); err != nil {
		t.Fatal(err)
	}
	beforeVD := latest.DeepCopy()
	if latest.Annotations == nil {
		latest.Annotations = map[string]string{}
	}
	latest.Annotations[meta.ReconcileRequestAnnotation] = token
	if err := env.Client.Patch(ctx, latest, client.MergeFrom(beforeVD)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), latest); err != nil {
			return err
		}
		if c := conditions.Get(latest, konfidencev1.ReadyCondition); c == nil || c.Reason != konfidencev1.DigestMismatchReason {
			return fmt.Errorf("VectorDeployment Ready = %+v, want reason %s", c, konfidencev1.DigestMismatchReason)
		}
		return nil
	})
	if err := env.Client.Get(ctx, key2, ad); err != nil || !conditions.IsReady(ad) {
		t.Errorf("ArtifactDeployment %s after the failed re-verification: %v, Ready %+v", name, err, conditions.Get(ad, konfidencev1.ReadyCondition))
	}
	if got := configMap(); got != "hello" {
		t.Errorf("greeting %q after the re-verification", got)
	}
}

// TestVerifiedChartKeepsItsContent: in the default configuration (helmSource helmRepository, which selects a chart
// by its tag), a signed vector's chart whose access names its tag and its digest is deployed by the digest. The
// chart's tag was pushed again with other content before Flux ever fetched it: verification checks the digest the
// access names and passes, and the real source- and helm-controller install the signed chart, not what the tag
// names, through an OCIRepository pinned to the digest and the HelmRelease's chartRef.
func TestVerifiedChartKeepsItsContent(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	signed := ocmtest.WebChart("pinned-web", "1.0.0")
	chart, err := ocmtest.PushPinnedChart(ctx, reg.Host, "charts", signed)
	if err != nil {
		t.Fatal(err)
	}
	verified := "sha256:" + chart.Digest.Value
	chart.Access = map[string]string{"type": "ociArtifact", "imageReference": chart.Access.(map[string]string)["imageReference"] + "@" + verified}
	tampered := ocmtest.WebChart(signed.Name, signed.Version)
	tampered.Files = maps.Clone(signed.Files)
	tampered.Files["values.yaml"] = "greeting: tampered\n"
	if _, err := ocmtest.PushHelmChart(ctx, reg.Host, "charts", tampered); err != nil {
		t.Fatal(err)
	}
	artifact := ocmtest.Artifact("acme.org/artifacts/pinned-web", "1.0.0", helmType, true)
	artifact.Resources[1] = chart

	startFluxdeployer(t, nil)
	ns := newNamespace(t, "pinned-chart")
	vd := deployVerified(t, reg, ns, artifact)
	waitReady(t, 3*time.Minute, vd)

	name := adName(t, artifact, nil)
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-config"}, cm); err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["greeting"]; got != "hello" {
		t.Errorf("greeting %q: Flux installed the chart the tag names, which the signature does not cover", got)
	}
	repo := &sourcev1.OCIRepository{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, repo); err != nil {
		t.Fatal(err)
	}
	if repo.Spec.Reference == nil || repo.Spec.Reference.Digest != verified || repo.Spec.Reference.Tag != "" {
		t.Errorf("OCIRepository ref = %+v, want digest %s", repo.Spec.Reference, verified)
	}
	hr := &helmv2.HelmRelease{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hr); err != nil {
		t.Fatal(err)
	}
	if hr.Spec.ChartRef == nil || hr.Spec.ChartRef.Kind != sourcev1.OCIRepositoryKind || hr.Spec.Chart != nil {
		t.Errorf("HelmRelease chart %+v, chartRef %+v: want chartRef to the OCIRepository", hr.Spec.Chart, hr.Spec.ChartRef)
	}
}

// deployVerified pushes artifact and a vector of it signed with a new key, and creates in ns a VectorDeployment of
// the vector that requires the signature, the key in a Secret of ns.
func deployVerified(t *testing.T, reg *ocmtest.Registry, ns string, artifact ocmtest.ComponentVersion) *konfidencev1.VectorDeployment {
	t.Helper()
	ctx := context.Background()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	vector := ocmtest.Vector(strings.Replace(artifact.Name, "/artifacts/", "/vectors/", 1), "1.0.0", artifact)
	vector.Signers = []ocmtest.Signer{{Name: "release", Key: key}}
	reg.Push(t, "", artifact, vector)
	if err := env.Client.Create(ctx, ocmtest.KeysSecret(t, ns, "vector-keys", map[string]*rsa.PublicKey{"release": &key.PublicKey})); err != nil {
		t.Fatal(err)
	}
	vd := &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pinned"},
		Spec: konfidencev1.VectorDeploymentSpec{
			Vector: reg.Ref("", vector.Name, vector.Version),
			Verify: &konfidencev1.VectorVerification{Signatures: []string{"release"}, SecretRef: meta.LocalObjectReference{Name: "vector-keys"}},
		},
	}
	if err := env.Client.Create(ctx, vd); err != nil {
		t.Fatal(err)
	}
	return vd
}
