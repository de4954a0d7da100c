package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSetFluxStatus: the conditions and status.observedGeneration are written for the object's current
// generation, as a Flux controller writes them, and the spec stays.
func TestSetFluxStatus(t *testing.T) {
	ctx := context.Background()
	repo := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fake-status"},
		Spec:       sourcev1.OCIRepositorySpec{URL: "oci://registry.example.com/app", Interval: metav1.Duration{Duration: time.Minute}},
	}
	if err := env.Client.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	repo.Spec.URL = "oci://registry.example.com/app2" // generation 2
	if err := env.Client.Update(ctx, repo); err != nil {
		t.Fatal(err)
	}
	SetFluxStatus(t, env.Client, &sourcev1.OCIRepository{ObjectMeta: repo.ObjectMeta},
		metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason, Message: "stored"})

	got := &sourcev1.OCIRepository{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(repo), got); err != nil {
		t.Fatal(err)
	}
	want := sourcev1.OCIRepositoryStatus{ObservedGeneration: 2, Conditions: []metav1.Condition{
		{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason, Message: "stored", ObservedGeneration: 2},
	}}
	if diff := cmp.Diff(want, got.Status, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(repo.Spec.URL, got.Spec.URL); diff != "" {
		t.Errorf("spec.url (-want +got):\n%s", diff)
	}
}
