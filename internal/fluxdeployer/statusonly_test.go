package fluxdeployer

import (
	"context"
	"slices"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestStatusOnlyReconcile: when only a Flux object's status changed since the last reconcile, a reconcile reads
// the ArtifactDeployment, the ConfigMap's version, the Flux objects and the deployment results, and writes the
// status: the configuration is not parsed, nor the Flux objects built, claimed, applied or passed on again. The
// reconciler reads the API server directly, so that every read is a request. A change of the configuration, a
// reconcile request or a change of a Flux object's spec has it decide everything again.
func TestStatusOnlyReconcile(t *testing.T) {
	h := testHarness(t)
	ns := "status-only"
	h.namespace(t, ns)
	h.configMap(t, ns, nil)
	requests := &testenv.RequestRecorder{}
	c, err := client.New(requests.Wrap(h.env.Config), client.Options{Scheme: h.env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := h.directVia(ns, c)
	// The answers of whether Secrets exist are shared for presenceTTL; the clock stands still here, so that
	// the reconciles share them however long the test takes.
	now := time.Now()
	r.secrets.now = func() time.Time { return now }
	ad := artifactDeployment(ns, "backend-1-2-3-e1mvwibzp5", KustomizeManifestType,
		resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3")))
	h.create(t, ad)
	if _, err := h.reconcile(t, r, ad); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: ad.Name}
	repo := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ad.Name}}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ad.Name}}
	testenv.SetFluxStatus(t, h.env.Client, repo, cond(meta.ReadyCondition, True, meta.SucceededReason, "stored artifact"))
	testenv.SetFluxStatus(t, h.env.Client, ks,
		cond(meta.ReadyCondition, True, meta.ReconciliationSucceededReason, "Applied revision: 1.2.3"),
		cond(meta.HealthyCondition, True, meta.SucceededReason, "Health check passed"))

	requests.Take()
	got, err := h.reconcile(t, r, ad)
	if err != nil {
		t.Fatal(err)
	}
	assertCondition(t, got, meta.ReadyCondition, True, meta.SucceededReason)
	objects := "/namespaces/" + ns + "/"
	want := []string{
		"GET /apis/konfidence.cloud/v1alpha1" + objects + "artifactdeployments/" + key.Name,
		"GET /api/v1/namespaces/" + configNamespace + "/configmaps/" + ns,
		"GET /apis/source.toolkit.fluxcd.io/v1" + objects + "ocirepositories/" + key.Name,
		"GET /apis/kustomize.toolkit.fluxcd.io/v1" + objects + "kustomizations/" + key.Name,
		"GET /api/v1" + objects + "services",
		"PATCH /apis/konfidence.cloud/v1alpha1" + objects + "artifactdeployments/" + key.Name + "/status",
	}
	if diff := cmp.Diff(want, requests.Take()); diff != "" {
		t.Errorf("requests of a status-only reconcile (-want +got):\n%s", diff)
	}

	// Each of these changes what decides the Flux objects: the reconcile decides and passes them on again, which
	// reads every kind the deployer writes (a HelmRelease, for a Kustomization's ArtifactDeployment).
	passOnRead := "GET /apis/helm.toolkit.fluxcd.io/v2" + objects + "helmreleases/" + key.Name
	for _, change := range []struct {
		name  string
		obj   client.Object
		patch string
	}{
		{"configuration", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: configNamespace, Name: ns}}, `{"data":{"interval":"7m"}}`},
		{"reconcile request", ad, `{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":"now"}}}`},
		{"Flux object spec", ks, `{"spec":{"prune":false}}`},
	} {
		t.Run(change.name, func(t *testing.T) {
			if err := h.env.Client.Patch(context.Background(), change.obj, client.RawPatch(types.MergePatchType, []byte(change.patch))); err != nil {
				t.Fatal(err)
			}
			requests.Take()
			if _, err := h.reconcile(t, r, ad); err != nil {
				t.Fatal(err)
			}
			if got := requests.Take(); !slices.Contains(got, passOnRead) {
				t.Errorf("after a change of the %s, the reconcile did not decide the Flux objects again: %q", change.name, got)
			}
		})
	}
}
