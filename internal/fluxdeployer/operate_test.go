package fluxdeployer

import (
	"context"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// testOperating: suspending an ArtifactDeployment suspends its Flux objects and writes nothing else, not even its
// status; resuming lifts it; a reconcile request is handled (status.lastHandledReconcileAt) and passed on to the
// Flux objects, once. The status names the Flux kind and the release or suffix.
func testOperating(t *testing.T, h *harness) {
	for _, tc := range []struct {
		name, manifestType, resourceType, access string
		source, deployer                         client.Object
		check                                    func(*testing.T, *konfidencev1.ArtifactDeployment)
	}{
		{"helm", HelmManifestType, "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3"),
			&sourcev1.HelmRepository{}, &helmv2.HelmRelease{}, func(t *testing.T, ad *konfidencev1.ArtifactDeployment) {
				if ad.Status.FluxKind != helmv2.HelmReleaseKind || ad.Status.ReleaseName != ad.Name || ad.Status.NameSuffix != "" {
					t.Errorf("status names %s, release %q, suffix %q", ad.Status.FluxKind, ad.Status.ReleaseName, ad.Status.NameSuffix)
				}
			}},
		{"kustomize", KustomizeManifestType, "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3"),
			&sourcev1.OCIRepository{}, &kustomizev1.Kustomization{}, func(t *testing.T, ad *konfidencev1.ArtifactDeployment) {
				if ad.Status.FluxKind != kustomizev1.KustomizationKind || ad.Status.NameSuffix != "-1-2-3-build-5-e1mvwibzp5" || ad.Status.ReleaseName != "" {
					t.Errorf("status names %s, release %q, suffix %q", ad.Status.FluxKind, ad.Status.ReleaseName, ad.Status.NameSuffix)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "operate-" + tc.name
			h.namespace(t, ns)
			h.configMap(t, ns, nil)
			r, _ := h.direct(ns)
			requests := &testenv.RequestRecorder{}
			recorded, err := client.New(requests.Wrap(h.env.Config), client.Options{Scheme: h.env.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			r.client, r.apiReader = recorded, recorded
			ad := artifactDeployment(ns, "app-1-2-3-e1mvwibzp5", tc.manifestType, resource("artifact", tc.resourceType, tc.access))
			h.create(t, ad)
			got, err := h.reconcile(t, r, ad)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, got)

			// reconcile runs one reconcile and returns the writes it made.
			reconcile := func() (*konfidencev1.ArtifactDeployment, []string) {
				t.Helper()
				requests.Take()
				got, err := h.reconcile(t, r, ad)
				if err != nil {
					t.Fatal(err)
				}
				var writes []string
				for _, req := range requests.Take() {
					if testenv.Writes([]string{req}) == 1 {
						writes = append(writes, req)
					}
				}
				return got, writes
			}
			// assertFlux checks spec.suspend and the reconcile request on both Flux objects.
			assertFlux := func(suspend bool, requested string) {
				t.Helper()
				for _, obj := range []client.Object{tc.source, tc.deployer} {
					h.get(t, ns, ad.Name, obj)
					if suspended(obj) != suspend || obj.GetAnnotations()[meta.ReconcileRequestAnnotation] != requested {
						t.Errorf("%T: suspend %v, requestedAt %q; want %v, %q", obj, suspended(obj), obj.GetAnnotations()[meta.ReconcileRequestAnnotation], suspend, requested)
					}
				}
			}
			mutate := func(f func(*konfidencev1.ArtifactDeployment)) {
				t.Helper()
				h.get(t, ns, ad.Name, ad)
				f(ad)
				if err := h.env.Client.Update(context.Background(), ad); err != nil {
					t.Fatal(err)
				}
			}
			request := func(token string) func(*konfidencev1.ArtifactDeployment) {
				return func(ad *konfidencev1.ArtifactDeployment) { ad.Annotations[meta.ReconcileRequestAnnotation] = token }
			}

			mutate(func(ad *konfidencev1.ArtifactDeployment) { ad.Spec.Suspend = true })
			suspendedAD, writes := reconcile()
			assertFlux(true, "")
			if len(writes) != 2 || suspendedAD.ResourceVersion != ad.ResourceVersion {
				t.Errorf("suspending wrote %q (want the 2 Flux objects only); resourceVersion %s → %s", writes, ad.ResourceVersion, suspendedAD.ResourceVersion)
			}
			if _, writes := reconcile(); len(writes) != 0 {
				t.Errorf("a suspended ArtifactDeployment's reconcile wrote %q", writes)
			}
			mutate(request("while-suspended"))
			got, _ = reconcile()
			assertFlux(true, "while-suspended")
			if got.Status.LastHandledReconcileAt != "" {
				t.Errorf("a suspended ArtifactDeployment recorded request %q as handled", got.Status.LastHandledReconcileAt)
			}

			mutate(func(ad *konfidencev1.ArtifactDeployment) { ad.Spec.Suspend = false })
			got, _ = reconcile()
			assertFlux(false, "while-suspended")
			if got.Status.LastHandledReconcileAt != "while-suspended" || got.Status.ObservedGeneration != got.Generation {
				t.Errorf("resumed: lastHandledReconcileAt %q, observedGeneration %d of %d", got.Status.LastHandledReconcileAt,
					got.Status.ObservedGeneration, got.Generation)
			}

			mutate(request("now"))
			got, writes = reconcile()
			assertFlux(false, "now")
			if got.Status.LastHandledReconcileAt != "now" || len(writes) != 3 {
				t.Errorf("request: lastHandledReconcileAt %q, writes %q (want the 2 Flux objects and the status)", got.Status.LastHandledReconcileAt, writes)
			}
			if _, writes := reconcile(); len(writes) != 0 {
				t.Errorf("a handled request was passed on again: %q", writes)
			}
		})
	}
}
