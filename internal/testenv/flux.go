package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FluxObject is a Flux object whose status a test writes in place of its controller.
type FluxObject interface {
	client.Object
	conditions.Setter
}

// SetFluxStatus writes conditions on a Flux object's status subresource as its controller would: each condition
// and status.observedGeneration for the object's current generation. No Flux controller runs in envtest, and the
// deployer reads only these fields. It waits until the object exists (the deployer creates it) and writes again
// when another writer changed the object in between, for up to a minute.
func SetFluxStatus(t testing.TB, c client.Client, obj FluxObject, conds ...metav1.Condition) {
	t.Helper()
	Eventually(t, time.Minute, func() error {
		return UpdateFluxStatus(context.Background(), c, obj, nil, conds...)
	})
}

// UpdateFluxStatus reads obj and writes its status subresource once, as its controller would: what record sets
// (the rest of the status a Flux controller keeps, such as a HelmRelease's history or a source's artifact; nil:
// nothing), each condition and status.observedGeneration for the object's current generation. It fails when obj
// does not exist or another writer changed it in between.
func UpdateFluxStatus(ctx context.Context, c client.Client, obj FluxObject, record func(), conds ...metav1.Condition) error {
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return err
	}
	if record != nil {
		record()
	}
	for _, cond := range conds {
		cond.ObservedGeneration = obj.GetGeneration()
		cond.LastTransitionTime = metav1.Now()
		conditions.Set(obj, &cond)
	}
	if err := observeGeneration(obj); err != nil {
		return err
	}
	return c.Status().Update(ctx, obj)
}

// observeGeneration sets status.observedGeneration, which every Flux kind has, to the object's generation.
func observeGeneration(obj client.Object) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	if err := unstructured.SetNestedField(m, obj.GetGeneration(), "status", "observedGeneration"); err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, obj)
}
