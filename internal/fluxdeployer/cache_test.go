package fluxdeployer

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTrimFluxStatusKeepsWhatTheDeployerReads: conditions and observedGeneration stay, Flux's own records go, and
// the spec and metadata are untouched (apply compares them).
func TestTrimFluxStatusKeepsWhatTheDeployerReads(t *testing.T) {
	ready := []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason, ObservedGeneration: 3}}
	hr := &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Annotations: map[string]string{appliedDigestAnnotation: "d"}},
		Spec:       helmv2.HelmReleaseSpec{ReleaseName: "app"},
		Status: helmv2.HelmReleaseStatus{ObservedGeneration: 3, Conditions: ready, LastAttemptedRevision: "1.0.0",
			History: helmv2.Snapshots{{Name: "app", Version: 1}}},
	}
	ks := &kustomizev1.Kustomization{Status: kustomizev1.KustomizationStatus{ObservedGeneration: 3, Conditions: ready,
		Inventory: &kustomizev1.ResourceInventory{Entries: []kustomizev1.ResourceRef{{ID: "default_app_apps_Deployment", Version: "v1"}}}}}
	wantHR := hr.DeepCopy()
	wantHR.Status = helmv2.HelmReleaseStatus{ObservedGeneration: 3, Conditions: ready}
	wantKS := &kustomizev1.Kustomization{Status: kustomizev1.KustomizationStatus{ObservedGeneration: 3, Conditions: ready}}

	for _, c := range []struct{ in, want any }{{hr, wantHR}, {ks, wantKS}} {
		got, err := TrimFluxStatus(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, c.want) {
			t.Errorf("trimmed %T:\n%+v\nwant\n%+v", c.in, got, c.want)
		}
	}
}
