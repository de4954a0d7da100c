package vectordeployment

import (
	"context"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestTeardownSparesAnArtifactDeploymentAdoptedMeanwhile: a VectorDeployment being deleted decides to delete a
// reusable ArtifactDeployment it alone owns, and another VectorDeployment adopts it between that read and the
// delete (a hook on the real API server's client makes the race happen every time). The delete, conditioned on
// the ArtifactDeployment's resourceVersion, is refused; read again, the ArtifactDeployment is shared, so it is only
// disowned, and its workload is neither uninstalled nor installed again.
func TestTeardownSparesAnArtifactDeploymentAdoptedMeanwhile(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	leaving := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leaving",
		Finalizers: []string{konfidencev1.TeardownFinalizer}}, Spec: konfidencev1.VectorDeploymentSpec{Vector: "registry.example.com//acme.org/vectors/shop:1.0.0"}}
	adopter := createVectorDeployment(t, ns, "adopter", "registry.example.com//acme.org/vectors/shop:1.0.0")
	if err := env.Client.Create(ctx, leaving); err != nil {
		t.Fatal(err)
	}
	shared := createSquatter(t, ns, "frontend-1-0-0-e1mvwibzp5")
	shared.OwnerReferences = []metav1.OwnerReference{ownerReference(leaving)}
	if err := env.Client.Update(ctx, shared); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, leaving); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(leaving), leaving); err != nil {
		t.Fatal(err)
	}

	// The adoption lands right before the first delete of the ArtifactDeployment reaches the API server.
	var once sync.Once
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	hooked := interceptor.NewClient(base, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*konfidencev1.ArtifactDeployment); ok {
				once.Do(func() { adopt(t, shared, adopter) })
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	r := &Reconciler{Client: hooked, APIReader: env.Client, Recorder: record.NewFakeRecorder(10)}
	if _, err := r.teardown(ctx, leaving); err != nil {
		t.Fatal(err)
	}

	got := &konfidencev1.ArtifactDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(shared), got); apierrors.IsNotFound(err) {
		t.Fatal("the ArtifactDeployment another VectorDeployment adopted was deleted")
	} else if err != nil {
		t.Fatal(err)
	}
	if !got.DeletionTimestamp.IsZero() {
		t.Errorf("the ArtifactDeployment another VectorDeployment adopted is being deleted (%s)", got.DeletionTimestamp)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != adopter.UID {
		t.Errorf("owners %+v, want the adopter alone", got.OwnerReferences)
	}
	// Nothing left to wait for: the deleted VectorDeployment's finalizer is removed, and it is gone.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(leaving), &konfidencev1.VectorDeployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted VectorDeployment is still there (%v)", err)
	}
}

// ownerReference is the non-controlling owner reference a VectorDeployment has on a reusable ArtifactDeployment.
func ownerReference(vd *konfidencev1.VectorDeployment) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: konfidencev1.GroupVersion.String(), Kind: "VectorDeployment", Name: vd.Name, UID: vd.UID}
}

// adopt adds vd to the owners of ad as another VectorDeployment's reconciler does, with an optimistic lock.
func adopt(t *testing.T, ad *konfidencev1.ArtifactDeployment, vd *konfidencev1.VectorDeployment) {
	t.Helper()
	latest := &konfidencev1.ArtifactDeployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ad), latest); err != nil {
		t.Error(err)
		return
	}
	before := latest.DeepCopy()
	latest.OwnerReferences = append(latest.OwnerReferences, ownerReference(vd))
	if err := env.Client.Patch(context.Background(), latest, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Error(err)
	}
}
