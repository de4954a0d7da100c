// Package fluxdeployer turns ArtifactDeployments into Flux objects (HelmRepository or OCIRepository with a
// HelmRelease, or OCIRepository with a Kustomization) named exactly like the ArtifactDeployment, and reports
// Flux's view of the rollout back on it.
package fluxdeployer

import (
	"context"
	"errors"
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kuberecorder "k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
)

// Reconciler reconciles ArtifactDeployments of the Flux manifest types.
type Reconciler struct {
	client        client.Client // reads from the manager's cache
	apiReader     client.Reader // reads from the API server, for what the cache cannot answer
	secrets       *secretPresence
	configReader  client.Reader // holds only the configuration ConfigMap
	serviceReader client.Reader // holds only Services labelled with an ArtifactDeployment
	claims        client.Reader // ArtifactDeployments indexed by workloadNameIndex (the manager's cache)
	scheme        *runtime.Scheme
	recorder      kuberecorder.EventRecorder
	metrics       operating.ReconcileMetrics
	configKey     types.NamespacedName
	kinds         *fluxKinds    // the Flux kinds the API server serves; nil: all
	remote        RemoteOptions // bounds remote calls and each reconcile
}

// Reconcile brings the Flux objects of one ArtifactDeployment in line with it and reports their state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	ad := &konfidencev1.ArtifactDeployment{}
	if err := r.client.Get(ctx, req.NamespacedName, ad); err != nil {
		if apierrors.IsNotFound(err) {
			r.metrics.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Other deployers own other manifest types.
	if !handled(ad) {
		r.metrics.Forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if !ad.DeletionTimestamp.IsZero() {
		r.metrics.Forget(req.NamespacedName)
		return r.teardown(ctx, ad)
	}
	// As in Flux, nothing of a suspended ArtifactDeployment is written, not even its status; only its Flux objects
	// are suspended with it, so that helm-controller and kustomize-controller stop too.
	if ad.Spec.Suspend {
		ctrl.LoggerFrom(ctx).V(1).Info("reconciliation is suspended for this object")
		r.metrics.Record(ctx, ad, start, true)
		return ctrl.Result{}, r.passOn(ctx, ad)
	}
	// The finalizer is in place before any Flux object exists, so a deletion always waits for the teardown.
	if err := r.addFinalizer(ctx, ad); err != nil {
		return ctrl.Result{}, err
	}
	original := ad.DeepCopy()
	defer func() {
		retErr = errors.Join(retErr, r.finalizeStatus(ctx, original, ad))
		r.metrics.Record(ctx, ad, start, false)
	}()
	// A reconcile request is handled by this reconcile, whatever its outcome: it is retried (also when Stalled) and
	// passed on to the Flux objects.
	requested, ok := meta.ReconcileAnnotationValue(ad.GetAnnotations())
	// A reconcile a user asked for reads Secrets afresh, e.g. one the user just created.
	fresh := ok && requested != ad.Status.GetLastHandledReconcileRequest()
	if ok {
		ad.Status.SetLastHandledReconcileRequest(requested)
	}

	// The steps run under a deadline, so that a remote target that never answers frees the worker; the status is
	// still written afterwards, under the manager's context.
	stepsCtx, cancel := context.WithTimeout(ctx, r.remote.reconcileTimeout())
	defer cancel()
	result, err := r.reconcile(stepsCtx, ad, fresh)
	if err != nil {
		return r.fail(ad, err, result)
	}
	return result, nil
}

// reconcile runs the steps of one reconcile in order; the first failure ends it.
func (r *Reconciler) reconcile(ctx context.Context, ad *konfidencev1.ArtifactDeployment, fresh bool) (ctrl.Result, error) {
	cfg, err := loadConfig(ctx, r.configReader, r.configKey)
	if err != nil {
		return ctrl.Result{}, err
	}
	objects, refs, err := desiredObjects(ad, cfg, r.observe(ctx, ad, fresh))
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.checkTarget(ctx, ad, refs.target); err != nil {
		// Refused, as for a claim below: Flux objects applied before (e.g. before an upgrade that made remote
		// targets opt-in) stop acting on the target, suspended, not deleted. Secrets are not watched: looked at
		// again every interval.
		if asStepError(err, "").stalled {
			if suspendErr := r.passOnSuspend(ctx, ad, true); suspendErr != nil {
				return ctrl.Result{}, suspendErr
			}
		}
		return ctrl.Result{RequeueAfter: cfg.interval}, err
	}
	if err := r.checkClaim(ctx, cfg, ad, refs.target); err != nil {
		// Flux objects applied before the clash arose (e.g. before targetNamespace was set) stop acting on the
		// other's workloads: suspended, not deleted, since deleting would uninstall what they share.
		if suspendErr := r.passOnSuspend(ctx, ad, true); suspendErr != nil {
			return ctrl.Result{}, suspendErr
		}
		return ctrl.Result{}, err
	}
	if err := r.kinds.require(objects); err != nil {
		return ctrl.Result{}, err
	}
	applied := make([]fluxObject, len(objects))
	for i, obj := range objects {
		outcome, live, err := r.apply(ctx, obj)
		if err != nil {
			return ctrl.Result{}, err
		}
		r.recordApply(ad, obj, outcome)
		applied[i] = live
	}
	// After the apply: on resume it finds the objects as applied before the suspension and lifts their suspend.
	if err := r.passOn(ctx, ad); err != nil {
		return ctrl.Result{}, err
	}
	recordWorkload(ad, objects)
	ad.Status.ObservedGeneration = ad.Generation

	// With a HelmRepository, helm-controller creates a HelmChart, and that is what reports the fetch.
	stalled, err := r.observeFlux(ctx, ad, applied)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.results(ctx, ad, refs.target); err != nil {
		// Stalled on a kubeconfig Secret (refused as unsafe, say), which is not watched: looked at again every
		// interval, so that the tenant's fix is taken up.
		return ctrl.Result{RequeueAfter: cfg.interval}, err
	}
	summarize(ad, stalled)
	// As Flux's controllers, look again every interval: Secrets are not watched (see resolveReferences), nor
	// can the Services of a remote target be.
	return ctrl.Result{RequeueAfter: cfg.interval}, nil
}

// observe reads the cluster state the Flux objects of ad depend on: whether Secrets exist from the API server (see
// resolveReferences; answers are shared for secretPresenceTTL unless fresh), the HelmRelease from the cache.
func (r *Reconciler) observe(ctx context.Context, ad *konfidencev1.ArtifactDeployment, fresh bool) observed {
	return observed{
		secretExists: r.secrets.lookup(ctx, ad.Namespace, fresh),
		helmRelease: func() (*helmv2.HelmRelease, error) {
			hr := &helmv2.HelmRelease{}
			err := r.client.Get(ctx, client.ObjectKeyFromObject(ad), hr)
			if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
				return nil, nil
			}
			if err != nil {
				return nil, transient(konfidencev1.ApplyFailedReason, fmt.Errorf("reading HelmRelease %s/%s: %w", ad.Namespace, ad.Name, err))
			}
			return hr, nil
		},
	}
}

// desiredObjects decides the Flux objects of ad and what they refer to, from ad, the configuration and what is
// observed of the cluster; it reads nothing else, so `fluxdeployer render` builds with it too.
func desiredObjects(ad *konfidencev1.ArtifactDeployment, cfg config, cluster observed) ([]client.Object, references, error) {
	if err := checkName(ad.Name); err != nil {
		return nil, references{}, err
	}
	resource, err := selectResource(ad)
	if err != nil {
		return nil, references{}, err
	}
	a, err := resolveAccess(resource)
	if err != nil {
		return nil, references{}, err
	}
	refs, err := resolveReferences(cfg, ad, a, cluster.secretExists)
	if err != nil {
		return nil, references{}, err
	}
	if err := a.checkCredentialsTLS(cfg, refs.pullSecret); err != nil {
		return nil, references{}, err
	}
	if ad.Spec.Manifest.Type == KustomizeManifestType {
		objects, err := buildKustomize(ad, a, refs, cfg)
		return objects, refs, err
	}
	// Only a name too long for Helm (a Konfidence install taken over) takes its release name from the live
	// HelmRelease; reading it for every other name would fail while the HelmRelease CRD is missing.
	var live *helmv2.HelmRelease
	if len(ad.Name) > maxReleaseNameLength {
		if live, err = cluster.helmRelease(); err != nil {
			return nil, references{}, err
		}
	}
	release, err := releaseName(ad, live)
	if err != nil {
		return nil, references{}, err
	}
	objects, err := buildHelm(ad, a, refs, cfg, release)
	return objects, refs, err
}

// results collects the deployment results once Flux reports the artifact deployed; until then the previous ones
// stand, since a rollout in progress leaves the old Services serving.
func (r *Reconciler) results(ctx context.Context, ad *konfidencev1.ArtifactDeployment, t target) error {
	if !conditions.IsTrue(ad, konfidencev1.ArtifactDeployedCondition) {
		conditions.MarkUnknown(ad, konfidencev1.DeploymentResultCreatedCondition, meta.ProgressingReason, "waiting for the deployment")
		return nil
	}
	err := r.collectResults(ctx, ad, t)
	if err != nil {
		se := asStepError(err, konfidencev1.DeploymentResultFailedReason)
		conditions.MarkFalse(ad, konfidencev1.DeploymentResultCreatedCondition, se.reason, "%s", se.err)
	}
	return err
}

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

// recordApply emits an event when the deployer changed a Flux object that existed: drift corrected, or a new
// configuration applied, which a person may want to know of. Creating the objects of a new ArtifactDeployment is
// what it is for, so that is no event (events are only for what a person acts on); its status says it.
func (r *Reconciler) recordApply(ad *konfidencev1.ArtifactDeployment, obj client.Object, outcome applyOutcome) {
	if outcome == updated {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		r.event(ad, corev1.EventTypeNormal, konfidencev1.FluxObjectUpdatedReason, "updated %s %s/%s", kind, obj.GetNamespace(), obj.GetName())
	}
}

// event records an event on ad for Kubernetes and notification-controller, with the component version as the
// revision.
func (r *Reconciler) event(ad *konfidencev1.ArtifactDeployment, eventtype, reason, messageFmt string, args ...any) {
	operating.Event(r.recorder, ad, ad.Spec.Component.Version, eventtype, reason, messageFmt, args...)
}
