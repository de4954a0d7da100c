package fluxdeployer

import (
	"context"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestOperating: suspending an ArtifactDeployment suspends its Flux objects and writes nothing else, not even its
// status; resuming lifts it; a reconcile request is handled (status.lastHandledReconcileAt) and passed on to the
// Flux objects, once. The status names the Flux kind and the release or suffix.
func TestOperating(t *testing.T) {
	h := testHarness(t)
	for _, tc := range []struct {
		name, manifestType, resourceType, access string
		source, deployer                         client.Object
		workload                                 workload
	}{
		{"helm", HelmManifestType, "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3"),
			&sourcev1.HelmRepository{}, &helmv2.HelmRelease{}, workload{FluxKind: helmv2.HelmReleaseKind, ReleaseName: "app-1-2-3-e1mvwibzp5"}},
		{"kustomize", KustomizeManifestType, "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3"),
			&sourcev1.OCIRepository{}, &kustomizev1.Kustomization{}, workload{FluxKind: kustomizev1.KustomizationKind, NameSuffix: "-1-2-3-build-5-e1mvwibzp5"}},
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
			if diff := cmp.Diff(tc.workload, workload{got.Status.FluxKind, got.Status.ReleaseName, got.Status.NameSuffix}); diff != "" {
				t.Errorf("status names (-want +got):\n%s", diff)
			}

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
				type operating struct {
					Suspend     bool
					RequestedAt string
				}
				for _, obj := range []client.Object{tc.source, tc.deployer} {
					h.get(t, ns, ad.Name, obj)
					got := operating{suspended(obj), obj.GetAnnotations()[meta.ReconcileRequestAnnotation]}
					if diff := cmp.Diff(operating{suspend, requested}, got); diff != "" {
						t.Errorf("%T (-want +got):\n%s", obj, diff)
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
			type outcome struct {
				Writes          int
				ResourceVersion string
			}
			if diff := cmp.Diff(outcome{2, ad.ResourceVersion}, outcome{len(writes), suspendedAD.ResourceVersion}); diff != "" {
				t.Errorf("suspending wrote %q, want the 2 Flux objects only and no status (-want +got):\n%s", writes, diff)
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
			type handled struct {
				LastHandledReconcileAt string
				ObservedGeneration     int64
			}
			if diff := cmp.Diff(handled{"while-suspended", got.Generation}, handled{got.Status.LastHandledReconcileAt, got.Status.ObservedGeneration}); diff != "" {
				t.Errorf("resumed (-want +got):\n%s", diff)
			}

			mutate(request("now"))
			got, writes = reconcile()
			assertFlux(false, "now")
			type passedOn struct {
				LastHandledReconcileAt string
				Writes                 int
			}
			if diff := cmp.Diff(passedOn{"now", 3}, passedOn{got.Status.LastHandledReconcileAt, len(writes)}); diff != "" {
				t.Errorf("request: writes %q, want the 2 Flux objects and the status (-want +got):\n%s", writes, diff)
			}
			if _, writes := reconcile(); len(writes) != 0 {
				t.Errorf("a handled request was passed on again: %q", writes)
			}
		})
	}
}

// workload is what the status names of the Flux object that deploys an artifact.
type workload struct{ FluxKind, ReleaseName, NameSuffix string }
