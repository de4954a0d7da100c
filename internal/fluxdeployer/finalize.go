package fluxdeployer

import (
	"context"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// fail records a failed step on Ready (and Stalled when only a change of the input helps). A terminal failure
// is not retried: the watches requeue the ArtifactDeployment when its input or the configuration changes, and
// stalled, the step's result (a requeue for input that is not watched) stands.
func (r *Reconciler) fail(ad *konfidencev1.ArtifactDeployment, err error, stalled ctrl.Result) (ctrl.Result, error) {
	se := asStepError(err, meta.ReconciliationFailedReason)
	conditions.MarkFalse(ad, meta.ReadyCondition, se.reason, "%s", se.err)
	if se.stalled {
		conditions.MarkStalled(ad, se.reason, "%s", se.err)
		conditions.Delete(ad, meta.ReconcilingCondition)
		ad.Status.ObservedGeneration = ad.Generation
		return stalled, nil
	}
	conditions.MarkReconciling(ad, meta.ProgressingWithRetryReason, "%s", se.err)
	conditions.Delete(ad, meta.StalledCondition)
	return ctrl.Result{}, se
}

// finalizeStatus patches the status when it changed, in one request, and emits an event when Ready changed: a
// warning for every new failure reason, a normal event when the artifact became ready.
//
// One merge patch of the whole status rather than Flux's patch helper, which sends the conditions and the rest of
// the status in two requests (2.3 status writes per artifact were measured with it). The deployer is the only writer
// of an ArtifactDeployment's status, so replacing its conditions list as a whole takes nothing from anyone.
func (r *Reconciler) finalizeStatus(ctx context.Context, original, ad *konfidencev1.ArtifactDeployment) error {
	before := conditions.Get(original, meta.ReadyCondition)
	if ready := conditions.Get(ad, meta.ReadyCondition); ready != nil &&
		(before == nil || before.Status != ready.Status || before.Reason != ready.Reason || before.Message != ready.Message) {
		switch ready.Status {
		case metav1.ConditionFalse:
			r.event(ad, corev1.EventTypeWarning, ready.Reason, "%s", ready.Message)
		case metav1.ConditionTrue:
			r.event(ad, corev1.EventTypeNormal, ready.Reason, "%s", ready.Message)
		}
	}
	// Compared as the JSON the patch would send, not as Go values: a deployment result's spec is raw JSON, which
	// the API server stores with its keys sorted, so equal results read back as different bytes.
	// The patch is computed once for both: computing it twice cost 0.5 s of CPU per 1,000 artifacts.
	data, err := client.MergeFrom(original).Data(ad)
	if err != nil || string(data) == "{}" {
		return err
	}
	return r.client.Status().Patch(ctx, ad, client.RawPatch(types.MergePatchType, data), client.FieldOwner(FieldManager))
}
