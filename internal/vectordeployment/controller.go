// Package vectordeployment holds the VectorDeployment reconciler: it reads a vector and creates one
// ArtifactDeployment per artifact, under a name that is a pure function of the artifact's identity and a
// collision counter persisted in the VectorDeployment's status.
package vectordeployment

import (
	"context"
	"errors"
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
	// Credentials says which registry credentials each VectorDeployment's reads present.
	Credentials RegistryCredentials
	Recorder    record.EventRecorder
	Metrics     operating.ReconcileMetrics
	// RequeueDependency, when set, reconciles a VectorDeployment again this soon while its ArtifactDeployments are
	// on their way, as Flux requeues an object whose dependencies are not ready. Their watch usually comes first;
	// this bounds the wait when an event is missed.
	RequeueDependency time.Duration
	// TrustDefault is the platform's verification requirement, which every VectorDeployment must satisfy besides
	// its own spec.verify.
	TrustDefault TrustDefault

	// hashLength is naming.HashLength; tests shorten it so that names collide on their own.
	hashLength int
	// maxArtifacts is konfidencev1.MaxArtifactsPerVector; tests lower it so that a small vector exceeds it.
	maxArtifacts int
}

// +kubebuilder:rbac:groups=konfidence.cloud,resources=vectordeployments,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=konfidence.cloud,resources=vectordeployments/status,verbs=patch
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
		return r.teardown(ctx, vd)
	}
	defer func() { r.Metrics.Record(ctx, vd, start, vd.Spec.Suspend) }()
	// As in Flux, a suspended object is left exactly as it is: no registry read, no write, not even to status.
	if vd.Spec.Suspend {
		ctrl.LoggerFrom(ctx).V(1).Info("reconciliation is suspended for this object")
		return ctrl.Result{}, nil
	}
	// Before any ArtifactDeployment exists, and before the status write's optimistic lock is taken.
	if err := r.addFinalizer(ctx, vd); err != nil {
		return ctrl.Result{}, err
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
	creds, err := r.Credentials.forVectorDeployment(ctx, r.APIReader, vd)
	if serr := (*secretError)(nil); errors.As(err, &serr) {
		r.fail(vd, serr.reason, false, serr.Error()) // retried: the Secret may yet be created or fixed
		return ctrl.Result{}, err
	} else if err != nil {
		return ctrl.Result{}, err
	}
	artifacts, err := r.resolve(ocm.WithCredentials(ctx, creds), vd)
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
	registrySecrets            []string
	registrySecretsHosts       []string
	insecureRegistryCredsHosts []string
	allowedRegistries          []string
	registryHostConcurrency    int
	requireSignatures          bool
	signatureKeys              string
	requiredSignatures         []string
	// Resolver reads the vectors; nil builds an OCM client from the flags. Tests and benchmarks pass one so that
	// several managers share its cache, as one process shares it across restarts of its manager.
	Resolver *ocm.Client
}

// BindFlags registers the reconciler's flags.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.registrySecrets, "registry-secrets", nil,
		"namespace/name of kubernetes.io/dockerconfigjson Secrets with the operator's credentials for OCM registries, "+
			"used only for the hosts --registry-secrets-hosts lists (read at every reconcile)")
	fs.StringSliceVar(&o.registrySecretsHosts, "registry-secrets-hosts", nil,
		"registry hosts (host[:port]) the credentials of --registry-secrets are presented to on any VectorDeployment's "+
			"behalf; other hosts are read with the VectorDeployment's own spec.secretRef, or anonymously")
	fs.StringSliceVar(&o.insecureRegistryCredsHosts, "insecure-registry-credentials-hosts", nil,
		"registry hosts (host[:port]) credentials may be sent to over plain HTTP (http:// references); to others they are sent over TLS only")
	fs.StringSliceVar(&o.allowedRegistries, "allowed-registries", nil,
		"registry hosts (host[:port]) VectorDeployments may name; a reference to another host is refused (RegistryNotAllowed). Empty allows every host")
	fs.IntVar(&o.registryHostConcurrency, "registry-host-concurrency", ocm.DefaultHostConcurrency,
		"vectors read at once from one registry host; a further read waits up to 10s, then is retried (RegistryBusy). "+
			"Keep it below --concurrent, so that a registry that never answers cannot hold every worker")
	fs.BoolVar(&o.requireSignatures, "require-signatures", false,
		"deploy only vectors whose OCM signatures verify with the keys of --signature-keys-secret, for every VectorDeployment: "+
			"a VectorDeployment's spec.verify is required in addition and cannot replace it")
	fs.StringVar(&o.signatureKeys, "signature-keys-secret", "fluxdeployer-signature-keys",
		"Secret of PEM public keys or certificates by signature name, for --require-signatures: a name in the operator's namespace (RUNTIME_NAMESPACE) or namespace/name; read on every reconcile")
	fs.StringSliceVar(&o.requiredSignatures, "required-signatures", nil,
		"signature names --require-signatures requires; empty: every signature with a key must verify, at least one must")
}

func (o *Options) trustDefault() (TrustDefault, error) {
	if !o.requireSignatures {
		return TrustDefault{}, nil
	}
	secret, err := secretKey(o.signatureKeys)
	return TrustDefault{Require: true, Secret: secret, Signatures: o.requiredSignatures}, err
}

// SetupWithManager registers the reconciler with the manager.
func (o *Options) SetupWithManager(mgr ctrl.Manager, shared operating.Options) error {
	secrets, err := parseSecretKeys(o.registrySecrets)
	if err != nil {
		return err
	}
	recorder, err := shared.NewEventRecorder(mgr, "vectordeployment-controller")
	if err != nil {
		return err
	}
	trust, err := o.trustDefault()
	if err != nil {
		return err
	}
	resolver := o.Resolver
	if resolver == nil {
		resolver = ocm.NewClient(ocm.Options{
			InsecureCredentialHosts: o.insecureRegistryCredsHosts,
			AllowedHosts:            o.allowedRegistries,
			HostConcurrency:         o.registryHostConcurrency,
		})
	}
	r := &Reconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Source:            ocmSource{resolver: resolver},
		Credentials:       RegistryCredentials{Secrets: secrets, Hosts: o.registrySecretsHosts},
		Recorder:          recorder,
		Metrics:           shared.ReconcileMetrics(mgr, "VectorDeployment"),
		RequeueDependency: shared.RequeueDependency,
		TrustDefault:      trust,
		hashLength:        naming.HashLength,
		maxArtifacts:      konfidencev1.MaxArtifactsPerVector,
	}
	return r.setupWithManager(mgr, shared.ControllerOptions())
}

// componentIndex indexes ArtifactDeployments by their component annotation, so that one created by Konfidence,
// which carries the annotations but not the identity label, is found without reading the whole namespace.
const componentIndex = "metadata.annotations." + konfidencev1.ArtifactComponentAnnotation

func (r *Reconciler) setupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if err := indexIdentity(mgr); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &konfidencev1.ArtifactDeployment{}, componentIndex,
		func(obj client.Object) []string {
			return []string{obj.GetAnnotations()[konfidencev1.ArtifactComponentAnnotation]}
		}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&konfidencev1.VectorDeployment{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}))).
		Watches(&konfidencev1.ArtifactDeployment{}, artifactDeploymentChanges()).
		WithOptions(opts).
		Complete(r)
}
