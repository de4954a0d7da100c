// Package vectordeployment holds the VectorDeployment reconciler: it reads a vector and creates one
// ArtifactDeployment per artifact, under a name that is a pure function of the artifact's identity and a
// collision counter persisted in the VectorDeployment's status.
package vectordeployment

import (
	"context"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/predicates"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// Reconciler reconciles VectorDeployments.
type Reconciler struct {
	client.Client
	// APIReader reads around the cache, where a stale read would misjudge a name as free or taken.
	APIReader client.Reader
	Source    VectorSource
	Recorder  record.EventRecorder
	Metrics   operating.ReconcileMetrics
	// RequeueDependency, when set, reconciles a VectorDeployment again this soon while its ArtifactDeployments are
	// on their way, as Flux requeues an object whose dependencies are not ready. Their watch usually comes first;
	// this bounds the wait when an event is missed.
	RequeueDependency time.Duration

	// hashLength is naming.HashLength; tests shorten it so that names collide on their own.
	hashLength int
	// maxArtifacts is konfidencev1.MaxArtifactsPerVector; tests lower it so that a small vector exceeds it.
	maxArtifacts int
}

// +kubebuilder:rbac:groups=konfidence.cloud,resources=vectordeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=konfidence.cloud,resources=vectordeployments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=konfidence.cloud,resources=vectordeployments/finalizers,verbs=update
// +kubebuilder:rbac:groups=konfidence.cloud,resources=artifactdeployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Reconcile brings one VectorDeployment's ArtifactDeployments and status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start := time.Now()
	vd := &konfidencev1.VectorDeployment{}
	if err := r.Get(ctx, req.NamespacedName, vd); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !vd.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil // owner references hand the ArtifactDeployments to the garbage collector
	}
	defer func() { r.Metrics.Record(ctx, vd, start, vd.Spec.Suspend) }()
	// As in Flux, a suspended object is left exactly as it is: no registry read, no write, not even to status.
	if vd.Spec.Suspend {
		ctrl.LoggerFrom(ctx).V(1).Info("reconciliation is suspended for this object")
		return ctrl.Result{}, nil
	}
	original := vd.DeepCopy()
	if requested, ok := reconcileRequest(vd); ok {
		// A user asked for this reconcile: read the registry, not the cache, and record that it was handled
		// (with the one status write of this reconcile).
		ctx = ocm.BypassCache(ctx)
		vd.Status.SetLastHandledReconcileRequest(requested)
	}
	result, err := r.reconcile(ctx, vd)
	if writeErr := r.writeStatus(ctx, original, vd); writeErr != nil {
		return ctrl.Result{}, writeErr
	}
	return result, err
}

// forget deletes the metrics of a VectorDeployment that is gone.
func (r *Reconciler) forget(key client.ObjectKey) {
	r.Metrics.Forget(key)
	forgetArtifacts(key)
}

// event records an event on vd for Kubernetes and notification-controller, with the vector as the revision.
func (r *Reconciler) event(vd *konfidencev1.VectorDeployment, eventtype, reason, messageFmt string, args ...any) {
	operating.Event(r.Recorder, vd, vd.Spec.Vector, eventtype, reason, messageFmt, args...)
}

// reconcile runs the steps of a reconcile on vd, recording their outcome in vd's status.
func (r *Reconciler) reconcile(ctx context.Context, vd *konfidencev1.VectorDeployment) (ctrl.Result, error) {
	artifacts, err := r.resolve(ctx, vd)
	if err != nil || artifacts == nil {
		return ctrl.Result{}, err
	}
	slots, err := r.syncArtifacts(ctx, vd, artifacts)
	bumped := recordSlots(vd, slots)
	if err != nil {
		// The slots synced so far are recorded; the rest is retried with backoff.
		conditions.MarkReconciling(vd, meta.ProgressingWithRetryReason, "%s", err)
		return ctrl.Result{}, err
	}
	if bumped {
		// A counter was bumped: the status write that follows persists it (or fails on a stale read), and the
		// next reconcile tries the salted name.
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	r.summarize(vd, artifacts, slots)
	if err := artifactErrors(artifacts); err != nil {
		return ctrl.Result{}, err
	}
	if conditions.IsReconciling(vd) {
		return ctrl.Result{RequeueAfter: r.RequeueDependency}, nil
	}
	return ctrl.Result{}, nil
}

// reconcileRequest returns the value of the reconcile.fluxcd.io/requestedAt annotation when it asks for a
// reconcile not handled yet. A Stalled VectorDeployment is retried by it as well: a request reaches reconcile like
// a change of the spec does.
func reconcileRequest(vd *konfidencev1.VectorDeployment) (string, bool) {
	requested, ok := meta.ReconcileAnnotationValue(vd.GetAnnotations())
	return requested, ok && requested != vd.Status.GetLastHandledReconcileRequest()
}

// Options configure the VectorDeployment reconciler from flags.
type Options struct {
	registrySecrets []string
	// Resolver reads the vectors; nil builds an OCM client with the registry secrets. Tests and benchmarks pass one
	// so that several managers share its cache, as one process shares it across restarts of its manager.
	Resolver ocm.Resolver
}

// BindFlags registers the reconciler's flags.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.registrySecrets, "registry-secrets", nil,
		"namespace/name of kubernetes.io/dockerconfigjson Secrets with credentials for the OCM registries (read at start)")
}

// SetupWithManager registers the reconciler with the manager.
func (o *Options) SetupWithManager(mgr ctrl.Manager, shared operating.Options) error {
	resolver := o.Resolver
	if resolver == nil {
		credentials, err := registryCredentials(context.Background(), mgr.GetAPIReader(), o.registrySecrets)
		if err != nil {
			return err
		}
		resolver = ocm.NewClient(ocm.Options{Credentials: credentials})
	}
	recorder, err := shared.NewEventRecorder(mgr, "vectordeployment-controller")
	if err != nil {
		return err
	}
	r := &Reconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Source:            ocmSource{resolver: resolver},
		Recorder:          recorder,
		Metrics:           shared.ReconcileMetrics(mgr, "VectorDeployment"),
		RequeueDependency: shared.RequeueDependency,
		hashLength:        naming.HashLength,
		maxArtifacts:      konfidencev1.MaxArtifactsPerVector,
	}
	return r.setupWithManager(mgr, shared.ControllerOptions())
}

func (r *Reconciler) setupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if err := indexIdentity(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&konfidencev1.VectorDeployment{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}))).
		Watches(&konfidencev1.ArtifactDeployment{}, artifactDeploymentChanges()).
		WithOptions(opts).
		Complete(r)
}
