package fluxdeployer

import (
	"context"
	"errors"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kuberecorder "k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
	"github.com/fluxdeployer/fluxdeployer/pkg/allowlist"
)

// Reconciler reconciles ArtifactDeployments of the Flux manifest types.
type Reconciler struct {
	client    client.Client // reads from the manager's cache
	apiReader client.Reader // reads from the API server, for what the cache cannot answer
	secrets   *objectPresence
	// serviceAccounts answers whether the ServiceAccount the Flux objects run as exists.
	serviceAccounts *objectPresence
	config          *configSource
	serviceReader   client.Reader // holds only Services labelled with an ArtifactDeployment
	claims          client.Reader // ArtifactDeployments of every shard, indexed by workloadNameIndex (see trimToClaim)
	scheme          *runtime.Scheme
	recorder        kuberecorder.EventRecorder
	metrics         operating.ReconcileMetrics
	kinds           *fluxKinds    // the Flux kinds the API server serves; nil: all
	remote          RemoteOptions // bounds remote calls and each reconcile
	applied         lastApplies   // what each ArtifactDeployment's last full reconcile applied
	schemas         *specSchemas  // the Flux kinds' spec schemas, for the defaults of the fields taken back
	// allowedRegistries are the hosts Flux may pull artifacts from (--allowed-registries); empty: every host.
	allowedRegistries allowlist.Hosts
}

// Reconcile brings the Flux objects of one ArtifactDeployment in line with it and reports their state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start := time.Now()
	ad := &konfidencev1.ArtifactDeployment{}
	if err := r.client.Get(ctx, req.NamespacedName, ad); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Other deployers own other manifest types.
	if !handled(ad) {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if !ad.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return r.teardown(ctx, ad)
	}
	// As in Flux, nothing of a suspended ArtifactDeployment is written, not even its status; only its Flux objects
	// are suspended with it, so that helm-controller and kustomize-controller stop too.
	if ad.Spec.Suspend {
		ctrl.LoggerFrom(ctx).V(1).Info("reconciliation is suspended for this object")
		r.applied.forget(req.NamespacedName)
		r.metrics.Record(ctx, ad, start, true)
		return ctrl.Result{}, r.passOn(ctx, ad)
	}
	// The finalizer is in place before any Flux object exists, so a deletion always waits for the teardown.
	if err := r.addFinalizer(ctx, ad); err != nil {
		return ctrl.Result{}, err
	}
	original := ad.DeepCopy()
	defer r.metrics.Record(ctx, ad, start, false)
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
	if err != nil && !outcome.Stalls(err) {
		result = ctrl.Result{} // retried with backoff; a stalled step's result (a requeue for input not watched) stands
	}
	return result, r.finalize(ctx, original, ad, err)
}

// reconcile runs the steps of one reconcile in order; the first failure ends it. When only the Flux objects'
// status can have changed since the last full reconcile (statusOnly), it only reports their status.
func (r *Reconciler) reconcile(ctx context.Context, ad *konfidencev1.ArtifactDeployment, fresh bool) (ctrl.Result, error) {
	if last, applied, ok := r.statusOnly(ctx, ad); ok {
		return r.report(ctx, ad, last.target, time.Until(last.at.Add(last.interval)), applied)
	}
	// What the last full reconcile applied tells apply which Flux objects are still as it left them; forgotten
	// until this one succeeds, so that a failure leaves no record for statusOnly.
	previous, _ := r.applied.get(client.ObjectKeyFromObject(ad))
	r.applied.forget(client.ObjectKeyFromObject(ad))
	cfg, err := r.config.load(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	secrets := map[string]bool{}
	objects, refs, err := desiredObjects(ad, cfg, recordingLookups(r.observe(ctx, ad, fresh), secrets))
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.checkRegistry(ad, refs.registry); err != nil {
		// Flux objects applied before (e.g. before the host was taken off the list) stop pulling from it:
		// suspended, not deleted. The list is the operator's flag: nothing to look at again until a restart.
		if suspendErr := r.passOnSuspend(ctx, ad, true); suspendErr != nil {
			return ctrl.Result{}, suspendErr
		}
		return ctrl.Result{}, err
	}
	if err := r.checkTarget(ctx, ad, refs.target); err != nil {
		// Refused, as for a claim below: Flux objects applied before (e.g. before an upgrade that made remote
		// targets opt-in) stop acting on the target, suspended, not deleted. Secrets are not watched: looked at
		// again every interval.
		if outcome.Stalls(err) {
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
	if err := r.checkServiceAccount(ctx, ad, cfg, refs.target, fresh); err != nil {
		return ctrl.Result{RequeueAfter: serviceAccountRecheck}, err
	}
	if err := r.kinds.require(objects); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.checkOwnership(ctx, ad, objects); err != nil {
		// Not watched: an object of another's without a reference to ad wakes no reconcile of it when it goes.
		return ctrl.Result{RequeueAfter: cfg.interval}, err
	}
	applied := make([]fluxObject, len(objects))
	for i, obj := range objects {
		result, live, err := r.apply(ctx, obj, previous)
		if err != nil {
			return ctrl.Result{}, err
		}
		r.recordApply(ad, obj, result)
		applied[i] = live
	}
	if err := r.pruneSources(ctx, ad, objects); err != nil {
		return ctrl.Result{}, err
	}
	// After the apply: on resume it finds the objects as applied before the suspension and lifts their suspend.
	if err := r.passOn(ctx, ad); err != nil {
		return ctrl.Result{}, err
	}
	if err := recordWorkload(ad, applied); err != nil {
		return ctrl.Result{}, err
	}
	ad.Status.ObservedGeneration = ad.Generation
	if err := r.rememberApply(ad, cfg, refs.target, secrets, applied); err != nil {
		return ctrl.Result{}, err
	}
	// As Flux's controllers, look again every interval: Secrets are not watched (see resolveReferences), nor
	// can the Services of a remote target be.
	return r.report(ctx, ad, refs.target, cfg.interval, applied)
}

// report sets the status from what the applied Flux objects say, the workloads of a rollout in progress and the
// deployment results, and has ad reconciled again after interval, or sooner while the rollout is in progress (see
// workloadRecheck). A Flux object that stalls stalls ad, unless it is Ready anyway.
func (r *Reconciler) report(ctx context.Context, ad *konfidencev1.ArtifactDeployment, t target, interval time.Duration, applied []fluxObject) (ctrl.Result, error) {
	var previous metav1.Condition // AppHealthy as the last reconcile left it, before observeFlux sets it anew
	if c := conditions.Get(ad, konfidencev1.AppHealthyCondition); c != nil {
		previous = *c
	}
	deployment, stalled, err := r.observeFlux(ctx, ad, applied)
	if err != nil {
		return ctrl.Result{}, err
	}
	if r.observeWorkloads(ctx, ad, t, deployment, previous) {
		interval = min(interval, workloadRecheck)
	}
	if err := r.results(ctx, ad, t, deployment.obj); err != nil {
		// Stalled on a kubeconfig Secret (refused as unsafe, say), which is not watched: looked at again every
		// interval, so that the tenant's fix is taken up.
		return ctrl.Result{RequeueAfter: interval}, err
	}
	summarize(ad)
	if stalled != nil && !conditions.IsTrue(ad, meta.ReadyCondition) {
		return ctrl.Result{RequeueAfter: interval}, outcome.Stalling(stalled.Reason, errors.New(stalled.Message))
	}
	return ctrl.Result{RequeueAfter: interval}, nil
}

// forget drops what the reconciler keeps of an ArtifactDeployment that is gone or no longer its to reconcile.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.metrics.Forget(key)
	r.applied.forget(key)
}

// event records an event on ad for Kubernetes and notification-controller, with the component version as the
// revision.
func (r *Reconciler) event(ad *konfidencev1.ArtifactDeployment, eventtype, reason, messageFmt string, args ...any) {
	operating.Event(r.recorder, ad, ad.Spec.Component.Version, eventtype, reason, messageFmt, args...)
}

// checkRegistry refuses an ArtifactDeployment whose artifact is pulled from a host outside --allowed-registries,
// before any Flux object names it. A tenant may create an ArtifactDeployment directly, with any access: without
// this, source-controller would pull from whatever address it names, cloud metadata endpoints included, from
// outside the operator's network policy.
func (r *Reconciler) checkRegistry(ad *konfidencev1.ArtifactDeployment, registry string) error {
	if r.allowedRegistries.Allows(registry) {
		return nil
	}
	return outcome.Stallingf(konfidencev1.RegistryNotAllowedReason,
		"component %s:%s is pulled from %s, which is not among the allowed registries (--allowed-registries)",
		ad.Spec.Component.Name, ad.Spec.Component.Version, remoteText(registry))
}
