package fluxdeployer

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// fluxView is what a Flux object says, as far as it concerns the current spec.
type fluxView struct {
	kind *fluxKind
	key  types.NamespacedName
	obj  fluxObject // nil while the object does not exist (yet)
}

// mirror sets condition target of ad from condition t of the Flux object: conditions.SetMirror for Ready (the only
// condition it mirrors), a copy of status, reason and message otherwise. The library has no generation check, so
// it is made here first (see current): a condition written for an older generation of the Flux object says nothing
// about the current spec, and reads as Unknown like a missing object or condition, where SetMirror would copy it as
// current. A target that is True stays True while the Flux object, done with its current generation, reconciles
// again (its condition Unknown, "reconciliation in progress"): a routine reconcile at Flux's interval is no change
// of health, and reporting it as one would flip every healthy VectorDeployment to not Ready each interval.
func (v fluxView) mirror(ad *konfidencev1.ArtifactDeployment, target, t string) {
	waiting := func(format string, args ...any) {
		conditions.MarkUnknown(ad, target, meta.ProgressingReason, format, args...)
	}
	switch {
	case v.reconcilesAgain(t) && conditions.IsTrue(ad, target):
		// Kept as it is.
	case v.obj == nil:
		waiting("waiting for %s %s to be created", v.kind.gvk.Kind, v.key)
	case !v.current(conditions.Get(v.obj, t)):
		waiting("waiting for %s %s to reconcile generation %d", v.kind.gvk.Kind, v.key, v.obj.GetGeneration())
	case !conditions.Has(v.obj, t):
		waiting("waiting for %s %s to report %s", v.kind.gvk.Kind, v.key, t)
	case t == meta.ReadyCondition:
		conditions.SetMirror(ad, target, v.obj)
	default:
		c := conditions.Get(v.obj, t)
		setCondition(ad, target, metav1.Condition{Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
}

// reconcilesAgain tells whether the object's condition t is Unknown while its status is that of its current
// generation: a reconcile of a spec it has reconciled before.
func (v fluxView) reconcilesAgain(t string) bool {
	return v.obj != nil && conditions.IsUnknown(v.obj, t) && v.kind.observedGeneration(v.obj) == v.obj.GetGeneration()
}

// current tells whether a condition of the object speaks of its current spec: the status was written for this
// generation, or the condition itself says it was (Flux stamps each condition's observedGeneration).
// helm-controller leaves status.observedGeneration behind while it retries a failing install, yet its Ready
// condition already reports the failure of this generation; that failure is what the ArtifactDeployment must
// show.
func (v fluxView) current(c *metav1.Condition) bool {
	g := v.obj.GetGeneration()
	return v.kind.observedGeneration(v.obj) == g || (c != nil && c.ObservedGeneration == g)
}

func (v fluxView) stalled() *metav1.Condition {
	if v.obj == nil || !conditions.IsStalled(v.obj) {
		return nil
	}
	c := conditions.Get(v.obj, meta.StalledCondition)
	if !v.current(c) {
		return nil
	}
	return &metav1.Condition{Type: meta.StalledCondition, Status: metav1.ConditionTrue, Reason: c.Reason,
		Message: fmt.Sprintf("%s %s: %s", v.kind.gvk.Kind, v.key, c.Message)}
}

// view reads the object of kind name and key from the cache; a missing object is a view without one.
func (r *Reconciler) view(ctx context.Context, name string, key types.NamespacedName) (fluxView, error) {
	k := kindNamed(name)
	if k == nil {
		return fluxView{}, unknownKind(name)
	}
	v := fluxView{kind: k, key: key}
	obj := k.new()
	switch err := r.client.Get(ctx, key, obj); {
	case err == nil:
		v.obj = obj
	case !apierrors.IsNotFound(err):
		return v, fmt.Errorf("reading %s %s: %w", name, key, err)
	}
	return v, nil
}

// observeFlux copies Flux's view of the rollout into ArtifactFetched, ArtifactDeployed and AppHealthy, from the
// Flux objects as applied (a source and a deployment):
//   - fetched: the source's Ready, or, for a source without a status (an OCI HelmRepository), the Ready of the
//     object that reports its fetch (read from the cache; see fluxKind.statusFrom);
//   - deployed: the deployment's Ready;
//   - healthy: the deployment's healthy condition (a Kustomization's Healthy is absent without wait: then Ready
//     says it all).
//
// It returns the deployment's view, and a Stalled condition when a Flux object reports one.
func (r *Reconciler) observeFlux(ctx context.Context, ad *konfidencev1.ArtifactDeployment, applied []fluxObject) (fluxView, *metav1.Condition, error) {
	var source, deployment fluxView
	for _, obj := range applied {
		k, err := kindOf(obj)
		if err != nil {
			return fluxView{}, nil, err
		}
		v := fluxView{kind: k, key: client.ObjectKeyFromObject(obj), obj: obj}
		switch {
		case k.healthy != "":
			deployment = v
		case k.statusFrom != nil:
			name, key := k.statusFrom(v.key)
			if source, err = r.view(ctx, name, key); err != nil {
				return fluxView{}, nil, err
			}
		default:
			source = v
		}
	}
	if source.kind == nil || deployment.kind == nil {
		return fluxView{}, nil, outcome.Stallingf(konfidencev1.ApplyFailedReason, "the Flux objects of %s/%s are not a source and a deployment", ad.Namespace, ad.Name)
	}

	source.mirror(ad, konfidencev1.ArtifactFetchedCondition, meta.ReadyCondition)
	deployment.mirror(ad, konfidencev1.ArtifactDeployedCondition, meta.ReadyCondition)
	if ready := conditions.Get(deployment.obj, meta.ReadyCondition); ready != nil && deployment.current(ready) && deployment.kind.waitsForSource(ready) {
		// Progress, and so no Warning event: whether the fetch fails is ArtifactFetched's to say.
		conditions.MarkUnknown(ad, konfidencev1.ArtifactDeployedCondition, meta.ProgressingReason,
			"%s %s waits for its source: %s", deployment.kind.gvk.Kind, deployment.key, ready.Message)
	}
	if conditions.IsTrue(ad, konfidencev1.ArtifactDeployedCondition) && !conditions.Has(deployment.obj, deployment.kind.healthy) {
		conditions.MarkTrue(ad, konfidencev1.AppHealthyCondition, meta.SucceededReason, "applied without health checks (wait is disabled)")
	} else {
		deployment.mirror(ad, konfidencev1.AppHealthyCondition, deployment.kind.healthy)
	}

	for _, v := range []fluxView{deployment, source} {
		if s := v.stalled(); s != nil {
			return deployment, s, nil
		}
	}
	return deployment, nil, nil
}

// recordWorkload names, for the printer columns, the Flux object that deploys the artifact and the name its
// workloads are found by: the Helm release, or the suffix of every object a Kustomization renders.
func recordWorkload(ad *konfidencev1.ArtifactDeployment, applied []fluxObject) error {
	for _, obj := range applied {
		k, err := kindOf(obj)
		if err != nil {
			return err
		}
		if k.workload != nil {
			k.workload(ad, obj)
		}
	}
	return nil
}
