package fluxdeployer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestFluxObjectsOfOthersAreNotTakenOver: a Flux object of the name an ArtifactDeployment's objects take that
// someone else created (owned by nothing, or controlled by another object) is neither applied to nor, at the
// ArtifactDeployment's teardown, deleted: the ArtifactDeployment is Ready=False/Stalled FluxObjectNotOwned with a
// Warning event naming the object, nothing of it is applied (not even its objects that do not clash), and the
// object stays as its owner wrote it after the ArtifactDeployment is gone. One that the ArtifactDeployment controls,
// applied by another field manager (Konfidence's deployer, or an earlier release), is taken over as before. Before,
// the forced apply rewrote the other's object into the ArtifactDeployment's, made it its controller, and the
// teardown deleted it.
func TestFluxObjectsOfOthersAreNotTakenOver(t *testing.T) {
	h := testHarness(t)
	ctx := context.Background()
	const ns = "not-owned"
	h.namespace(t, ns)
	h.configMap(t, ns, nil)
	r, recorder := h.direct(ns)
	interval := metav1.Duration{Duration: 7 * time.Minute}
	chart := resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3"))
	bundle := resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/config:0.4.0"))
	// The other object a case's foreign object may be controlled by.
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-release"}}
	h.create(t, other)
	otherRef := []metav1.OwnerReference{*metav1.NewControllerRef(other, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}

	for _, tc := range []struct {
		name, adName, manifest string
		resource               konfidencev1.Resource
		// foreign is the object someone else created under the ArtifactDeployment's name; clean is a kind the
		// ArtifactDeployment applies whose name is free.
		foreign, clean fluxObject
		owners         []metav1.OwnerReference
	}{{
		name: "HelmRelease owned by nothing", adName: "frontend-1-2-3-aaaaaaaaa1", manifest: HelmManifestType, resource: chart,
		foreign: &helmv2.HelmRelease{Spec: helmv2.HelmReleaseSpec{Interval: interval, Chart: &helmv2.HelmChartTemplate{
			Spec: helmv2.HelmChartTemplateSpec{Chart: "team-chart", SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "team"}}}}},
		clean: &sourcev1.HelmRepository{},
	}, {
		name: "HelmRepository controlled by another object", adName: "backend-1-2-3-aaaaaaaaa2", manifest: HelmManifestType, resource: chart,
		foreign: &sourcev1.HelmRepository{Spec: sourcev1.HelmRepositorySpec{Type: sourcev1.HelmRepositoryTypeOCI, URL: "oci://team.example.com/charts", Interval: interval}},
		clean:   &helmv2.HelmRelease{}, owners: otherRef,
	}, {
		name: "Kustomization owned by nothing", adName: "config-0-4-0-aaaaaaaaa3", manifest: KustomizeManifestType, resource: bundle,
		foreign: &kustomizev1.Kustomization{Spec: kustomizev1.KustomizationSpec{Interval: interval, Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "team"}}},
		clean: &sourcev1.OCIRepository{},
	}, {
		name: "OCIRepository controlled by another object", adName: "settings-0-4-0-aaaaaaaaa4", manifest: KustomizeManifestType, resource: bundle,
		foreign: &sourcev1.OCIRepository{Spec: sourcev1.OCIRepositorySpec{URL: "oci://team.example.com/bundles/settings", Interval: interval}},
		clean:   &kustomizev1.Kustomization{}, owners: otherRef,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.foreign.SetNamespace(ns)
			tc.foreign.SetName(tc.adName)
			tc.foreign.SetOwnerReferences(tc.owners)
			h.create(t, tc.foreign)
			written := tc.foreign.GetResourceVersion()
			kind := kindName(t, tc.foreign)

			ad := artifactDeployment(ns, tc.adName, tc.manifest, tc.resource)
			h.create(t, ad)
			drainEvents(recorder)
			got, err := h.reconcile(t, r, ad)
			if err != nil { // stalled: reported in the status, not retried with backoff
				t.Fatal(err)
			}
			assertCondition(t, got, meta.ReadyCondition, False, konfidencev1.FluxObjectNotOwnedReason)
			assertCondition(t, got, meta.StalledCondition, True, konfidencev1.FluxObjectNotOwnedReason)
			named := kind + " " + ns + "/" + tc.adName
			if msg := conditionOf(got, meta.ReadyCondition).Message; !strings.Contains(msg, named) {
				t.Errorf("Ready message %q does not name %s", msg, named)
			}
			events := drainEvents(recorder)
			assertEvent(t, events, corev1.EventTypeWarning, konfidencev1.FluxObjectNotOwnedReason)
			if !strings.Contains(strings.Join(events, "\n"), named) {
				t.Errorf("events %q do not name %s", events, named)
			}
			unchanged := func(when string) {
				t.Helper()
				live := tc.foreign.DeepCopyObject().(fluxObject)
				h.get(t, ns, tc.adName, live)
				if live.GetResourceVersion() != written {
					t.Errorf("%s: the foreign %s was written (resourceVersion %s, was %s): owners %v", when, kind, live.GetResourceVersion(), written, live.GetOwnerReferences())
				}
			}
			unchanged("after the reconcile")
			if err := h.env.Client.Get(ctx, client.ObjectKeyFromObject(tc.foreign), tc.clean); !apierrors.IsNotFound(err) {
				t.Errorf("%s applied though another object of the ArtifactDeployment is not its (get: %v)", kindName(t, tc.clean), err)
			}

			if err := h.env.Client.Delete(ctx, got); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)}); err != nil {
				t.Fatal(err)
			}
			if err := h.env.Client.Get(ctx, client.ObjectKeyFromObject(ad), &konfidencev1.ArtifactDeployment{}); !apierrors.IsNotFound(err) {
				t.Errorf("the ArtifactDeployment outlived its teardown (get: %v)", err)
			}
			unchanged("after the teardown")
		})
	}

	t.Run("created within the cache's lag", func(t *testing.T) {
		// The reconciler's cache has not seen the foreign object yet (its lag behind the API server, made long):
		// the API server is asked before the first apply. Before, the forced apply took the object over.
		lagged, lagRecorder := h.directVia(ns, lagging{h.env.Client})
		lagged.apiReader = h.env.Client
		ad := artifactDeployment(ns, "lagged-1-2-3-aaaaaaaaa6", HelmManifestType, chart)
		foreign := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ad.Name},
			Spec: helmv2.HelmReleaseSpec{Interval: interval, Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
				Chart: "team-chart", SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "team"}}}}}
		h.create(t, foreign, ad)
		written := foreign.GetResourceVersion()
		got, err := h.reconcile(t, lagged, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, meta.ReadyCondition, False, konfidencev1.FluxObjectNotOwnedReason)
		assertEvent(t, drainEvents(lagRecorder), corev1.EventTypeWarning, konfidencev1.FluxObjectNotOwnedReason)
		h.get(t, ns, ad.Name, foreign)
		if foreign.GetResourceVersion() != written {
			t.Errorf("the foreign HelmRelease was written (resourceVersion %s, was %s): owners %v", foreign.GetResourceVersion(), written, foreign.GetOwnerReferences())
		}
	})

	t.Run("controlled by the ArtifactDeployment, applied by another manager", func(t *testing.T) {
		ad := artifactDeployment(ns, "cache-7-0-0-aaaaaaaaa5", HelmManifestType, chart)
		h.create(t, ad)
		taken := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ad.Name,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ad, konfidencev1.GroupVersion.WithKind("ArtifactDeployment"))}},
			Spec: helmv2.HelmReleaseSpec{Interval: interval, Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
				Chart: "frontend", SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: ad.Name}}}}}
		h.create(t, taken)
		if _, err := h.reconcile(t, r, ad); err != nil {
			t.Fatal(err)
		}
		h.get(t, ns, ad.Name, taken)
		if taken.Spec.Interval == interval {
			t.Errorf("the HelmRelease the ArtifactDeployment controls was not taken over: interval %s", taken.Spec.Interval.Duration)
		}
	})
}

// kindName is the Flux kind of obj, from the scheme.
func kindName(t *testing.T, obj fluxObject) string {
	t.Helper()
	k, err := kindOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	return k.gvk.Kind
}

// lagging is a cache that has not seen any Flux object yet: every Flux kind is not found, other reads are served.
type lagging struct{ client.Client }

func (l lagging) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, err := kindOf(obj); err == nil {
		return apierrors.NewNotFound(schema.GroupResource{Resource: fmt.Sprintf("%T", obj)}, key.Name)
	}
	return l.Client.Get(ctx, key, obj, opts...)
}
