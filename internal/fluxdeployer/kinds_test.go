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
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestTrimFluxStatusKeepsWhatTheDeployerReads: conditions, observedGeneration and the Services of an inventory
// (the deployment results are read from them) stay, Flux's own records go; of a kind the deployer applies the
// metadata stay (apply compares them) and of the spec only suspend and the names the status reports (release
// name, name suffix). Of a HelmChart, which helm-controller writes, the labels that
// lead to its ArtifactDeployment stay, its spec and annotations go. The deployer's tests run their managers with
// this transform, as the binary does (harness startDeployer).
func TestTrimFluxStatusKeepsWhatTheDeployerReads(t *testing.T) {
	ready := []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason, ObservedGeneration: 3}}
	hr := &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Annotations: map[string]string{appliedDigestAnnotation: "d"}},
		Spec: helmv2.HelmReleaseSpec{ReleaseName: "app", Suspend: true, TargetNamespace: "apps", Interval: metav1.Duration{Duration: time.Minute},
			Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "app", Version: "1.0.0"}}},
		Status: helmv2.HelmReleaseStatus{ObservedGeneration: 3, Conditions: ready, LastAttemptedRevision: "1.0.0",
			History: helmv2.Snapshots{{Name: "app", Version: 1}},
			Inventory: &helmv2.ResourceInventory{Entries: []helmv2.ResourceRef{
				{ID: "apps_app__Service", Version: "v1"}, {ID: "apps_app-config__ConfigMap", Version: "v1"}}}},
	}
	ks := &kustomizev1.Kustomization{
		Spec: kustomizev1.KustomizationSpec{NameSuffix: "-e1mvwibzp5", Path: "./deploy", Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "app"}},
		Status: kustomizev1.KustomizationStatus{ObservedGeneration: 3, Conditions: ready,
			Inventory: &kustomizev1.ResourceInventory{Entries: []kustomizev1.ResourceRef{
				{ID: "default_app_apps_Deployment", Version: "v1"}, {ID: "default_app__Service", Version: "v1"}}}}}
	wantHR := &helmv2.HelmRelease{ObjectMeta: hr.ObjectMeta, Spec: helmv2.HelmReleaseSpec{ReleaseName: "app", Suspend: true},
		Status: helmv2.HelmReleaseStatus{ObservedGeneration: 3, Conditions: ready,
			Inventory: &helmv2.ResourceInventory{Entries: []helmv2.ResourceRef{{ID: "apps_app__Service", Version: "v1"}}}}}
	wantKS := &kustomizev1.Kustomization{Spec: kustomizev1.KustomizationSpec{NameSuffix: "-e1mvwibzp5"},
		Status: kustomizev1.KustomizationStatus{ObservedGeneration: 3, Conditions: ready,
			Inventory: &kustomizev1.ResourceInventory{Entries: []kustomizev1.ResourceRef{{ID: "default_app__Service", Version: "v1"}}}}}
	repo := &sourcev1.OCIRepository{Spec: sourcev1.OCIRepositorySpec{URL: "oci://registry.example.com/app", Suspend: true}}
	wantRepo := &sourcev1.OCIRepository{Spec: sourcev1.OCIRepositorySpec{Suspend: true}}
	chartLabels := map[string]string{helmNameLabel: "app", helmNamespaceLabel: "default"}
	chart := &sourcev1.HelmChart{
		ObjectMeta: metav1.ObjectMeta{Name: "default-app", Labels: chartLabels, Annotations: map[string]string{"reconcile.fluxcd.io/requestedAt": "now"}},
		Spec: sourcev1.HelmChartSpec{Chart: "podinfo", Version: "6.9.1",
			SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: "app"}},
		Status: sourcev1.HelmChartStatus{ObservedGeneration: 3, Conditions: ready, ObservedChartName: "podinfo",
			Artifact: &meta.Artifact{Revision: "6.9.1", Path: "helmchart/default/default-app/podinfo-6.9.1.tgz"}},
	}
	wantChart := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Name: "default-app", Labels: chartLabels},
		Status: sourcev1.HelmChartStatus{ObservedGeneration: 3, Conditions: ready}}

	for _, c := range []struct{ in, want any }{{hr, wantHR}, {ks, wantKS}, {repo, wantRepo}, {chart, wantChart}} {
		got, err := TrimFluxStatus(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, c.want) {
			t.Errorf("trimmed %T:\n%+v\nwant\n%+v", c.in, got, c.want)
		}
	}
}

// TestFluxKindTable checks every entry of the table against the type it names, so that a new kind is complete:
// its constructor is the kind's Go type, both lookups find it, its status accessor reads status.observedGeneration
// and its trim keeps that and the conditions while dropping the rest of the status.
func TestFluxKindTable(t *testing.T) {
	for _, k := range fluxKindTable {
		t.Run(k.gvk.Kind, func(t *testing.T) {
			obj := k.new()
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			m["status"] = map[string]any{
				"observedGeneration": int64(3),
				"conditions": []any{map[string]any{
					"type": meta.ReadyCondition, "status": "True", "reason": meta.SucceededReason, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
				}},
				"lastHandledReconcileAt": "yesterday",
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, obj); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(k.gvk)
			for _, o := range []runtime.Object{obj, u} {
				if got, err := kindOf(o); err != nil || got != k {
					t.Errorf("kindOf(%T) = %v, %v", o, got, err)
				}
			}
			if got := k.observedGeneration(obj); got != 3 {
				t.Errorf("observedGeneration = %d, want 3", got)
			}
			if _, err := TrimFluxStatus(obj); err != nil {
				t.Fatal(err)
			}
			trimmed, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"observedGeneration": int64(3), "conditions": m["status"].(map[string]any)["conditions"]}
			if diff := cmp.Diff(want, trimmed["status"]); diff != "" {
				t.Errorf("trimmed status (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnknownFluxKindIsAnError: an object of a kind outside the table gets a terminal error naming it wherever the
// kind is looked up (the status mapping, the apply, the CRD check), never a panic.
func TestUnknownFluxKindIsAnError(t *testing.T) {
	bucket := &sourcev1.Bucket{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app"}}
	ad := artifactDeployment("default", "app", KustomizeManifestType)
	r := &Reconciler{}
	_, _, observeErr := r.observeFlux(context.Background(), ad, []fluxObject{bucket, &kustomizev1.Kustomization{}})
	_, newErr := newObject(bucket)
	requireErr := (&fluxKinds{}).require([]client.Object{bucket})
	for _, err := range []error{observeErr, newErr, requireErr} {
		assertFailure(t, err, konfidencev1.ApplyFailedReason, true)
		if !strings.Contains(fmt.Sprint(err), "Bucket") {
			t.Errorf("error %q does not name the kind", err)
		}
	}
}
