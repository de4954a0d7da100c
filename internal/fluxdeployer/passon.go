package fluxdeployer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// passOn brings the ArtifactDeployment's suspend and reconcile request to the Flux objects it owns, as `flux
// suspend` and `flux reconcile --with-source` would set them there: helm-controller and kustomize-controller stop
// while the ArtifactDeployment is suspended, and reconcile when it is asked to. It patches only what differs, so a
// steady-state reconcile writes nothing. The fields are merge-patched, not part of the server-side apply: a
// suspended ArtifactDeployment is not built again, and its Flux objects stay as they were applied.
func (r *Reconciler) passOn(ctx context.Context, ad *konfidencev1.ArtifactDeployment) error {
	return r.passOnSuspend(ctx, ad, ad.Spec.Suspend)
}

// passOnSuspend is passOn with the suspend to set, which a refusal to deploy may impose.
func (r *Reconciler) passOnSuspend(ctx context.Context, ad *konfidencev1.ArtifactDeployment, suspend bool) error {
	requested, _ := meta.ReconcileAnnotationValue(ad.GetAnnotations())
	for _, k := range ownedFluxKinds() {
		obj := k.new()
		key := types.NamespacedName{Namespace: ad.Namespace, Name: ad.Name}
		// A kind whose CRD is not installed has no objects to pass anything on to.
		if err := r.client.Get(ctx, key, obj); apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			continue
		} else if err != nil {
			return outcome.Retrying(konfidencev1.ApplyFailedReason, fmt.Errorf("reading %T %s: %w", obj, key, err))
		}
		if !metav1.IsControlledBy(obj, ad) {
			continue
		}
		patch := operatingPatch(obj, suspend, requested)
		if patch == nil {
			continue
		}
		if err := r.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
			return outcome.Retrying(konfidencev1.ApplyFailedReason, fmt.Errorf("passing suspend and reconcile request on to %T %s: %w", obj, key, err))
		}
	}
	return nil
}

// operatingPatch is the merge patch that gives obj spec.suspend and the reconcile request, or nil when it has
// them. Resuming removes spec.suspend rather than setting false, so the object reads as one never suspended.
func operatingPatch(obj client.Object, suspend bool, requested string) []byte {
	patch := map[string]any{}
	if suspended(obj) != suspend {
		var value any // null removes the field
		if suspend {
			value = true
		}
		patch["spec"] = map[string]any{"suspend": value}
	}
	if requested != "" && obj.GetAnnotations()[meta.ReconcileRequestAnnotation] != requested {
		patch["metadata"] = map[string]any{"annotations": map[string]string{meta.ReconcileRequestAnnotation: requested}}
	}
	if len(patch) == 0 {
		return nil
	}
	raw, _ := json.Marshal(patch) // maps of strings, bools and nil always marshal
	return raw
}

// suspended reads spec.suspend, which every Flux kind has. A typed object always converts; were it not to, it
// would read as not suspended and be patched once more, which is harmless.
func suspended(obj client.Object) bool {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false
	}
	suspend, _, _ := unstructured.NestedBool(m, "spec", "suspend")
	return suspend
}
