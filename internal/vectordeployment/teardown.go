package vectordeployment

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
)

// addFinalizer puts the teardown finalizer on vd.
func (r *Reconciler) addFinalizer(ctx context.Context, vd *konfidencev1.VectorDeployment) error {
	return operating.AddFinalizer(ctx, r, vd, konfidencev1.TeardownFinalizer)
}

// teardown runs the finalizer of a deleted VectorDeployment, so that `kubectl delete --wait` returns when its
// workloads are gone: it deletes the ArtifactDeployments it alone owns and keeps the VectorDeployment until they
// are gone (each waits for its Flux objects, bounded); from a shared one still owned by another VectorDeployment
// it only removes its owner reference, and that one stays.
func (r *Reconciler) teardown(ctx context.Context, vd *konfidencev1.VectorDeployment) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(vd, konfidencev1.TeardownFinalizer) {
		return ctrl.Result{}, nil
	}
	// The namespace may hold thousands of ArtifactDeployments of other VectorDeployments: they are read from the
	// cache as they are, and only vd's own are copied, since release changes them.
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := r.List(ctx, list, client.InNamespace(vd.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing ArtifactDeployments: %w", err)
	}
	var waiting []string
	for i := range list.Items {
		if !IsOwnedBy(&list.Items[i], vd) {
			continue
		}
		ad := list.Items[i].DeepCopy()
		wait, err := r.release(ctx, ad, vd, true)
		if err != nil {
			return ctrl.Result{}, err
		}
		if wait {
			waiting = append(waiting, ad.Name)
		}
	}
	if len(waiting) > 0 && vd.Annotations[konfidencev1.SkipTeardownWaitAnnotation] != "true" {
		return ctrl.Result{RequeueAfter: r.RequeueDependency}, r.reportTeardown(ctx, vd, waiting)
	}
	before := vd.DeepCopy()
	controllerutil.RemoveFinalizer(vd, konfidencev1.TeardownFinalizer)
	if err := r.Patch(ctx, vd, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("removing finalizer %s: %w", konfidencev1.TeardownFinalizer, err)
	}
	return ctrl.Result{}, nil
}

// release lets go of an ArtifactDeployment vd owned when ad was read, and says whether vd waits for it to go: one
// another VectorDeployment owns too is only disowned, one vd alone owns is deleted. The deletion has ad's UID and
// resourceVersion as preconditions, so the API server refuses it (Conflict) when ad changed since it was read,
// e.g. when another VectorDeployment adopted it a moment ago: deleting a shared ArtifactDeployment on a stale read
// would uninstall a workload that the adopter needs, and the adopter would install it again. On a conflict, ad is
// read afresh from the API server and decided on again, once; a further conflict is retried with backoff.
func (r *Reconciler) release(ctx context.Context, ad *konfidencev1.ArtifactDeployment, vd *konfidencev1.VectorDeployment, rereadOnConflict bool) (wait bool, err error) {
	shared, err := r.ownedByAnother(ctx, ad, vd)
	if err != nil {
		return false, err
	}
	if shared {
		return false, r.disown(ctx, ad, vd)
	}
	if !ad.DeletionTimestamp.IsZero() {
		return true, nil
	}
	err = r.Delete(ctx, ad, client.Preconditions{UID: &ad.UID, ResourceVersion: &ad.ResourceVersion})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	case !apierrors.IsConflict(err) || !rereadOnConflict:
		return false, fmt.Errorf("deleting ArtifactDeployment %s: %w", ad.Name, err)
	}
	fresh := &konfidencev1.ArtifactDeployment{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ad), fresh); apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("reading ArtifactDeployment %s again after it changed: %w", ad.Name, err)
	}
	if !IsOwnedBy(fresh, vd) {
		return false, nil
	}
	return r.release(ctx, fresh, vd, false)
}

// ownedByAnother tells whether a VectorDeployment other than vd owns ad and is not being deleted itself: only
// then does ad outlive vd. Two owners deleted together both wait for it.
func (r *Reconciler) ownedByAnother(ctx context.Context, ad *konfidencev1.ArtifactDeployment, vd *konfidencev1.VectorDeployment) (bool, error) {
	for _, ref := range ad.OwnerReferences {
		if ref.UID == vd.UID || ref.Kind != "VectorDeployment" || ref.APIVersion != konfidencev1.GroupVersion.String() {
			continue
		}
		// From the API server: a VectorDeployment that adopted ad a moment ago may not be in the cache yet.
		other := &konfidencev1.VectorDeployment{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: vd.Namespace, Name: ref.Name}, other)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return false, fmt.Errorf("reading VectorDeployment %s, an owner of %s: %w", ref.Name, ad.Name, err)
		case other.UID == ref.UID && other.DeletionTimestamp.IsZero():
			return true, nil
		}
	}
	return false, nil
}

// disown removes vd's owner reference from a shared ArtifactDeployment, with an optimistic lock so that another
// VectorDeployment's concurrent adoption or disowning is not lost.
func (r *Reconciler) disown(ctx context.Context, ad *konfidencev1.ArtifactDeployment, vd *konfidencev1.VectorDeployment) error {
	before := ad.DeepCopy()
	ad.OwnerReferences = slices.DeleteFunc(ad.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == vd.UID })
	if err := r.Patch(ctx, ad, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing VectorDeployment %s from the owners of %s: %w", vd.Name, ad.Name, err)
	}
	return nil
}

// reportTeardown records what the deletion waits for, once per change.
func (r *Reconciler) reportTeardown(ctx context.Context, vd *konfidencev1.VectorDeployment, waiting []string) error {
	original := vd.DeepCopy()
	msg := fmt.Sprintf("waiting for ArtifactDeployments %s to be torn down", strings.Join(sorted(waiting), ", "))
	if c := conditions.Get(vd, konfidencev1.ReadyCondition); c == nil || c.Reason != konfidencev1.TearingDownReason || c.Message != msg {
		r.event(vd, corev1.EventTypeNormal, konfidencev1.TearingDownReason, "%s", msg)
	}
	conditions.MarkFalse(vd, konfidencev1.ReadyCondition, konfidencev1.TearingDownReason, "%s", msg)
	conditions.MarkReconciling(vd, meta.ProgressingReason, "%s", msg)
	return client.IgnoreNotFound(r.status().Finalize(ctx, original, vd, nil))
}
