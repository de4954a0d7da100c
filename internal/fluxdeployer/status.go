package fluxdeployer

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// fluxObject is a Flux object whose status the deployer reads.
type fluxObject interface {
	client.Object
	conditions.Getter
}

// fluxView is what a Flux object says, as far as it concerns the current spec.
type fluxView struct {
	kind string
	key  types.NamespacedName
	obj  fluxObject // nil while the object does not exist (yet)
}

// mirror sets condition target of ad from condition t of the Flux object: conditions.SetMirror for Ready (the only
// condition it mirrors), a copy of status, reason and message otherwise. The library has no generation check, so
// it is made here first (see current): a condition written for an older generation of the Flux object says nothing
// about the current spec, and reads as Unknown like a missing object or condition, where SetMirror would copy it as
// current.
func (v fluxView) mirror(ad *konfidencev1.ArtifactDeployment, target, t string) {
	waiting := func(format string, args ...any) {
		conditions.MarkUnknown(ad, target, meta.ProgressingReason, format, args...)
	}
	switch {
	case v.obj == nil:
		waiting("waiting for %s %s to be created", v.kind, v.key)
	case !v.current(conditions.Get(v.obj, t)):
		waiting("waiting for %s %s to reconcile generation %d", v.kind, v.key, v.obj.GetGeneration())
	case !conditions.Has(v.obj, t):
		waiting("waiting for %s %s to report %s", v.kind, v.key, t)
	case t == meta.ReadyCondition:
		conditions.SetMirror(ad, target, v.obj)
	default:
		c := conditions.Get(v.obj, t)
		setCondition(ad, target, metav1.Condition{Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
}

// current tells whether a condition of the object speaks of its current spec: the status was written for this
// generation, or the condition itself says it was (Flux stamps each condition's observedGeneration).
// helm-controller leaves status.observedGeneration behind while it retries a failing install, yet its Ready
// condition already reports the failure of this generation; that failure is what the ArtifactDeployment must
// show.
func (v fluxView) current(c *metav1.Condition) bool {
	g := v.obj.GetGeneration()
	return observedGeneration(v.obj) == g || (c != nil && c.ObservedGeneration == g)
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
		Message: fmt.Sprintf("%s %s: %s", v.kind, v.key, c.Message)}
}

func observedGeneration(obj fluxObject) int64 {
	switch o := obj.(type) {
	case *sourcev1.OCIRepository:
		return o.Status.ObservedGeneration
	case *sourcev1.HelmChart:
		return o.Status.ObservedGeneration
	case *helmv2.HelmRelease:
		return o.Status.ObservedGeneration
	case *kustomizev1.Kustomization:
		return o.Status.ObservedGeneration
	}
	panic(fmt.Sprintf("no observedGeneration for %T", obj))
}

func (r *Reconciler) view(ctx context.Context, kind string, key types.NamespacedName, obj fluxObject) (fluxView, error) {
	v := fluxView{kind: kind, key: key}
	switch err := r.client.Get(ctx, key, obj); {
	case err == nil:
		v.obj = obj
	case !apierrors.IsNotFound(err):
		return v, fmt.Errorf("reading %s %s: %w", kind, key, err)
	}
	return v, nil
}

// observeFlux copies Flux's view of the rollout into ArtifactFetched, ArtifactDeployed and AppHealthy, from the
// Flux objects as applied (the source and the deployment, in build's order):
//   - fetched: the OCIRepository, or the HelmChart helm-controller creates for chart.spec (named
//     <namespace>-<name>, in the HelmRepository's namespace, read from the cache) since an OCI HelmRepository has
//     no status;
//   - deployed: the Kustomization or HelmRelease Ready;
//   - healthy: Kustomization Healthy (absent without wait: then Ready says it all), HelmRelease Released.
//
// It returns a Stalled condition when a Flux object reports one.
func (r *Reconciler) observeFlux(ctx context.Context, ad *konfidencev1.ArtifactDeployment, applied []fluxObject) (*metav1.Condition, error) {
	key := types.NamespacedName{Namespace: ad.Namespace, Name: ad.Name}
	source := fluxView{kind: sourcev1.OCIRepositoryKind, key: key, obj: applied[0]}
	if _, helmChartSource := applied[0].(*sourcev1.HelmRepository); helmChartSource {
		chartKey := types.NamespacedName{Namespace: ad.Namespace, Name: ad.Namespace + "-" + ad.Name}
		var err error
		if source, err = r.view(ctx, sourcev1.HelmChartKind, chartKey, &sourcev1.HelmChart{}); err != nil {
			return nil, err
		}
	}
	deployment := fluxView{kind: helmv2.HelmReleaseKind, key: key, obj: applied[1]}
	healthy := helmv2.ReleasedCondition
	if ad.Spec.Manifest.Type == KustomizeManifestType {
		deployment.kind, healthy = kustomizev1.KustomizationKind, meta.HealthyCondition
	}

	source.mirror(ad, konfidencev1.ArtifactFetchedCondition, meta.ReadyCondition)
	deployment.mirror(ad, konfidencev1.ArtifactDeployedCondition, meta.ReadyCondition)
	if conditions.IsTrue(ad, konfidencev1.ArtifactDeployedCondition) && !conditions.Has(deployment.obj, healthy) {
		conditions.MarkTrue(ad, konfidencev1.AppHealthyCondition, meta.SucceededReason, "applied without health checks (wait is disabled)")
	} else {
		deployment.mirror(ad, konfidencev1.AppHealthyCondition, healthy)
	}

	for _, v := range []fluxView{deployment, source} {
		if s := v.stalled(); s != nil {
			return s, nil
		}
	}
	return nil, nil
}

// setCondition sets c as condition t; conditions.Set stamps the generation and keeps the transition time while
// status, reason and message stay the same, which keeps a steady-state status patch empty.
func setCondition(ad *konfidencev1.ArtifactDeployment, t string, c metav1.Condition) {
	c.Type = t
	conditions.Set(ad, &c)
}

// summarize sets Ready, Reconciling and Stalled for kstatus: Ready is True when the artifact is deployed, healthy
// and its results are collected; otherwise it carries the first failing step (False before Unknown), so its
// reason says what to look at. Not conditions.SetSummary: its merge ranks True above Unknown, so steps still
// waiting next to finished ones would summarize to Ready=True.
func summarize(ad *konfidencev1.ArtifactDeployment, stalled *metav1.Condition) {
	steps := []string{
		konfidencev1.ArtifactFetchedCondition, konfidencev1.ArtifactDeployedCondition,
		konfidencev1.AppHealthyCondition, konfidencev1.DeploymentResultCreatedCondition,
	}
	var first *metav1.Condition
	for _, status := range []metav1.ConditionStatus{metav1.ConditionFalse, metav1.ConditionUnknown} {
		for _, t := range steps {
			if c := conditions.Get(ad, t); c != nil && c.Status == status && first == nil {
				first = c
			}
		}
	}
	switch {
	case first == nil:
		setCondition(ad, meta.ReadyCondition, metav1.Condition{Status: metav1.ConditionTrue, Reason: meta.SucceededReason,
			Message: fmt.Sprintf("Deployed %s:%s", ad.Spec.Component.Name, ad.Spec.Component.Version)})
		conditions.Delete(ad, meta.ReconcilingCondition)
		conditions.Delete(ad, meta.StalledCondition)
	case stalled != nil:
		setCondition(ad, meta.ReadyCondition, metav1.Condition{Status: metav1.ConditionFalse, Reason: stalled.Reason, Message: stalled.Message})
		setCondition(ad, meta.StalledCondition, *stalled)
		conditions.Delete(ad, meta.ReconcilingCondition)
	default:
		setCondition(ad, meta.ReadyCondition, metav1.Condition{Status: first.Status, Reason: first.Reason, Message: first.Message})
		reason := meta.ProgressingReason
		if first.Status == metav1.ConditionFalse {
			reason = meta.ProgressingWithRetryReason // Flux retries and remediates on its own
		}
		conditions.MarkReconciling(ad, reason, "waiting for %s", first.Type)
		conditions.Delete(ad, meta.StalledCondition)
	}
}
