package fluxdeployer

import (
	"context"
	"fmt"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
)

// addFinalizer puts the teardown finalizer on ad.
func (r *Reconciler) addFinalizer(ctx context.Context, ad *konfidencev1.ArtifactDeployment) error {
	return operating.AddFinalizer(ctx, r.client, ad, konfidencev1.TeardownFinalizer, client.FieldOwner(FieldManager))
}

// teardown runs the finalizer of a deleted ArtifactDeployment: it deletes the Flux objects and keeps the
// ArtifactDeployment until they are gone, which is when helm-controller has uninstalled the release or
// kustomize-controller has pruned what it applied (their own finalizers). The wait is bounded by
// teardownTimeout, counted from the Flux objects' deletion, so an operator that was down when the deletion
// came still waits the full time once it is back.
func (r *Reconciler) teardown(ctx context.Context, ad *konfidencev1.ArtifactDeployment) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ad, konfidencev1.TeardownFinalizer) {
		return ctrl.Result{}, nil
	}
	remaining, since, err := r.deleteFluxObjects(ctx, ad)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(remaining) == 0 {
		return ctrl.Result{}, r.removeFinalizer(ctx, ad)
	}
	if ad.Annotations[konfidencev1.SkipTeardownWaitAnnotation] == "true" {
		r.event(ad, corev1.EventTypeWarning, konfidencev1.TearingDownReason, "not waiting for %s (annotation %s)",
			strings.Join(remaining, ", "), konfidencev1.SkipTeardownWaitAnnotation)
		return ctrl.Result{}, r.removeFinalizer(ctx, ad)
	}
	timeout := r.teardownTimeout(ctx)
	waited := time.Since(since)
	if waited >= timeout {
		r.event(ad, corev1.EventTypeWarning, konfidencev1.TeardownTimeoutReason,
			"gave up after %s waiting for %s to be gone; they are deleted and finish under their controllers' finalizers",
			timeout, strings.Join(remaining, ", "))
		return ctrl.Result{}, r.removeFinalizer(ctx, ad)
	}
	msg := fmt.Sprintf("waiting for %s to be gone (uninstall or prune; at most %s)", strings.Join(remaining, ", "), timeout)
	original := ad.DeepCopy()
	conditions.MarkFalse(ad, meta.ReadyCondition, konfidencev1.TearingDownReason, "%s", msg)
	conditions.MarkReconciling(ad, konfidencev1.TearingDownReason, "%s", msg)
	if err := r.finalizeStatus(ctx, original, ad); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The Owns watches requeue ad when a Flux object goes; this requeue is for the time limit.
	return ctrl.Result{RequeueAfter: timeout - waited}, nil
}

// deleteFluxObjects deletes the Flux objects ad controls and returns those still there and when the earliest
// of them was deleted.
func (r *Reconciler) deleteFluxObjects(ctx context.Context, ad *konfidencev1.ArtifactDeployment) (remaining []string, since time.Time, err error) {
	since = time.Now()
	for _, o := range []struct {
		kind string
		obj  client.Object
	}{
		{helmv2.HelmReleaseKind, &helmv2.HelmRelease{}}, {kustomizev1.KustomizationKind, &kustomizev1.Kustomization{}},
		{sourcev1.HelmRepositoryKind, &sourcev1.HelmRepository{}}, {sourcev1.OCIRepositoryKind, &sourcev1.OCIRepository{}},
	} {
		kind, obj, key := o.kind, o.obj, client.ObjectKeyFromObject(ad)
		if err := r.client.Get(ctx, key, obj); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, since, fmt.Errorf("reading %s %s: %w", kind, key, err)
		}
		if !metav1.IsControlledBy(obj, ad) {
			continue
		}
		if deleted := obj.GetDeletionTimestamp(); deleted != nil {
			since = minTime(since, deleted.Time)
		} else if err := r.client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return nil, since, fmt.Errorf("deleting %s %s: %w", kind, key, err)
		}
		remaining = append(remaining, kind+" "+key.String())
	}
	return remaining, since, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// teardownTimeout is the configured bound; an unreadable configuration must not keep a deletion waiting, so the
// default applies then.
func (r *Reconciler) teardownTimeout(ctx context.Context) time.Duration {
	cfg, err := loadConfig(ctx, r.configReader, r.configKey)
	if err != nil {
		return defaultConfig().teardownTimeout
	}
	return cfg.teardownTimeout
}

func (r *Reconciler) removeFinalizer(ctx context.Context, ad *konfidencev1.ArtifactDeployment) error {
	before := ad.DeepCopy()
	controllerutil.RemoveFinalizer(ad, konfidencev1.TeardownFinalizer)
	err := r.client.Patch(ctx, ad, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizer %s: %w", konfidencev1.TeardownFinalizer, err)
	}
	return nil
}
