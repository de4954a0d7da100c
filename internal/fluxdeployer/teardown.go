package fluxdeployer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// addFinalizer puts the teardown finalizer on ad.
func (r *Reconciler) addFinalizer(ctx context.Context, ad *konfidencev1.ArtifactDeployment) error {
	return operating.AddFinalizer(ctx, r.client, ad, konfidencev1.TeardownFinalizer, client.FieldOwner(FieldManager))
}

// teardown runs the finalizer of a deleted ArtifactDeployment: it deletes the Flux objects and keeps the
// ArtifactDeployment until they are gone, which is when helm-controller has uninstalled the release or
// kustomize-controller has pruned what it applied (their own finalizers). The wait is bounded by
// teardownTimeout, counted from the Flux objects' deletion, so an operator that was down when the deletion
// came still waits the full time once it is back. Whatever fails, the deletion ends: a Flux object that cannot be
// read or deleted is retried until teardownTimeout after the ArtifactDeployment's own deletion, and then left.
func (r *Reconciler) teardown(ctx context.Context, ad *konfidencev1.ArtifactDeployment) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ad, konfidencev1.TeardownFinalizer) {
		return ctrl.Result{}, nil
	}
	// Read before any step that can fail: the escape hatch must work whatever else does.
	skipWait := ad.Annotations[konfidencev1.SkipTeardownWaitAnnotation] == "true"
	remaining, since, err := r.deleteFluxObjects(ctx, ad)
	switch {
	case skipWait:
		r.event(ad, corev1.EventTypeWarning, konfidencev1.TearingDownReason, "not waiting for %s (annotation %s)",
			pending(remaining, err), konfidencev1.SkipTeardownWaitAnnotation)
		return ctrl.Result{}, r.removeFinalizer(ctx, ad)
	case err != nil:
		return r.teardownFailed(ctx, ad, err)
	case len(remaining) == 0:
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
	if err := r.finalize(ctx, original, ad, nil); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The Owns watches requeue ad when a Flux object goes; this requeue is for the time limit.
	return ctrl.Result{RequeueAfter: timeout - waited}, nil
}

// teardownFailed retries a teardown whose Flux objects could not all be read or deleted, with backoff, until
// teardownTimeout after the ArtifactDeployment's deletion; then it lets the ArtifactDeployment go, with a
// TeardownTimeout event naming the failure, so that no error (a refused request, say) keeps a namespace from being
// deleted.
func (r *Reconciler) teardownFailed(ctx context.Context, ad *konfidencev1.ArtifactDeployment, err error) (ctrl.Result, error) {
	timeout := r.teardownTimeout(ctx)
	if time.Since(ad.DeletionTimestamp.Time) < timeout {
		return ctrl.Result{}, err
	}
	r.event(ad, corev1.EventTypeWarning, konfidencev1.TeardownTimeoutReason,
		"gave up after %s: %v; what was not deleted is left to Kubernetes' garbage collector", timeout, err)
	return ctrl.Result{}, r.removeFinalizer(ctx, ad)
}

// pending names what a teardown that does not wait leaves behind.
func pending(remaining []string, err error) string {
	what := "nothing"
	if len(remaining) > 0 {
		what = strings.Join(remaining, ", ")
	}
	if err != nil {
		what += fmt.Sprintf(", nor for what could not be deleted (%v)", err)
	}
	return what
}

// deleteFluxObjects deletes the Flux objects ad controls and returns those still there and when the earliest
// of them was deleted. A kind whose CRD is not installed has no objects (a Flux with kustomize-controller only
// serves no HelmRelease); a kind that fails does not keep the others from being deleted.
//
// A suspended object is resumed before it is deleted: helm-controller and kustomize-controller skip the uninstall
// and the prune of a suspended object, so deleting it suspended would leave its workloads behind, unowned and
// unseen. Deleting an ArtifactDeployment means removing what it deployed, suspended or not; only objects the
// deployer suspended on purpose (see suspendedOnPurpose) are deleted as they are, and an event says that their
// workloads stay.
func (r *Reconciler) deleteFluxObjects(ctx context.Context, ad *konfidencev1.ArtifactDeployment) (remaining []string, since time.Time, err error) {
	since = time.Now()
	why := suspendedOnPurpose(ad)
	var errs, resumed, kept []string
	for _, k := range ownedFluxKinds() {
		obj, key := k.new(), client.ObjectKeyFromObject(ad)
		name := k.gvk.Kind + " " + key.String()
		if err := r.client.Get(ctx, key, obj); apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			continue
		} else if err != nil {
			errs = append(errs, fmt.Sprintf("reading %s: %v", name, err))
			continue
		}
		if !metav1.IsControlledBy(obj, ad) {
			continue
		}
		if deleted := obj.GetDeletionTimestamp(); deleted != nil {
			since = minTime(since, deleted.Time)
			remaining = append(remaining, name+underWay(obj))
			continue
		}
		wasSuspended := suspended(obj)
		if err := r.delete(ctx, obj, wasSuspended && why == ""); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		switch {
		case wasSuspended && why == "":
			resumed = append(resumed, name)
		case wasSuspended:
			kept = append(kept, name)
		}
		remaining = append(remaining, name+underWay(obj))
	}
	if len(resumed) > 0 {
		r.event(ad, corev1.EventTypeNormal, konfidencev1.TearingDownReason,
			"resumed the suspended %s before deleting, so that Flux uninstalls or prunes the workloads", strings.Join(resumed, ", "))
	}
	if len(kept) > 0 {
		r.event(ad, corev1.EventTypeWarning, konfidencev1.TearingDownReason,
			"deleted the suspended %s without resuming: %s; their workloads stay", strings.Join(kept, ", "), why)
	}
	if len(errs) > 0 {
		return remaining, since, outcome.Retrying(konfidencev1.TearingDownReason, errors.New(strings.Join(errs, "; ")))
	}
	return remaining, since, nil
}

// delete deletes a Flux object, resuming it first if asked. The resume comes first: deleted while suspended, its
// controller may let it go without uninstalling before a resume arrives.
func (r *Reconciler) delete(ctx context.Context, obj client.Object, resume bool) error {
	if resume {
		patch := client.RawPatch(types.MergePatchType, operatingPatch(obj, false, ""))
		if err := r.client.Patch(ctx, obj, patch, client.FieldOwner(FieldManager)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("resuming before deleting: %w", err)
		}
	}
	if err := r.client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting: %w", err)
	}
	return nil
}

// suspendedOnPurpose says why the deployer suspended ad's Flux objects itself, so that their teardown must not
// resume them, or "" when it did not. Its last status says so: a refusal's, which the teardown has not overwritten
// yet when it deletes them, and a suspended ArtifactDeployment's status is not rewritten.
func suspendedOnPurpose(ad *konfidencev1.ArtifactDeployment) string {
	switch conditions.GetReason(ad, meta.ReadyCondition) {
	case konfidencev1.TargetNameConflictReason:
		return "another ArtifactDeployment holds their workload name in the target namespace, and their uninstall would remove its workloads"
	case konfidencev1.RemoteTargetNotAllowedReason:
		return "their remote target is not allowed (--allowed-target-hosts), so Flux is not sent there"
	}
	return ""
}

// underWay says, for a deleted HelmRelease in the middle of a Helm action, that helm-controller finishes the
// action before it uninstalls (an install of pods that never get ready runs to its timeout), so that a teardown's
// status tells why it takes that long; "" otherwise.
func underWay(obj fluxObject) string {
	if _, ok := obj.(*helmv2.HelmRelease); !ok {
		return ""
	}
	c := conditions.Get(obj, meta.ReconcilingCondition)
	if c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	action, ok := strings.CutPrefix(c.Message, "Running '")
	if !ok {
		return ""
	}
	action, _, _ = strings.Cut(action, "'")
	return fmt.Sprintf(" (its %s is under way: helm-controller uninstalls once it ends, at most after the release's timeout)", action)
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
	cfg, err := r.config.load(ctx)
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
