// Package vectordeployment holds the VectorDeployment reconciler: it reads a vector and creates one
// ArtifactDeployment per artifact, under a name that is a pure function of the artifact's identity and a
// collision counter persisted in the VectorDeployment's status.
package vectordeployment

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/predicates"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
	"github.com/fluxdeployer/fluxdeployer/internal/stage"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// Reconciler reconciles VectorDeployments.
type Reconciler struct {
	client.Client
	// APIReader reads around the cache, where a stale read would misjudge a name as free or taken.
	APIReader client.Reader
	// peers holds the VectorDeployments of every shard, for checkShardKey.
	peers client.Reader
	// OCM reads and verifies the vectors.
	OCM *ocm.Client
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
	// Finalizers maps each manifest type a deployer of this process handles to the finalizer that deployer tears
	// an ArtifactDeployment down under (see Options.Finalizers).
	Finalizers map[string]string

	// synced holds, per VectorDeployment, what its last full reconcile in this process found (see statusOnly).
	synced sync.Map // of client.ObjectKey to syncedSpec
	// ownWrites holds, per VectorDeployment, the resourceVersion its last status write replaced.
	ownWrites operating.OwnWrites
	// bypass bounds the reconcile requests of each VectorDeployment that read around the cache (see cacheUse).
	bypass operating.CacheBypass

	// reconciled, when set, is called when a reconcile has ended, its writes done: tests count the reconciles of
	// one VectorDeployment with it (controller-runtime's metric counts those of every manager in the process) and
	// assert that a reconcile wrote nothing once it has ended, instead of sleeping for a while.
	reconciled func(client.ObjectKey)

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
	if r.reconciled != nil {
		defer r.reconciled(req.NamespacedName)
	}
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
	if r.ownWrites.Stale(vd) {
		// The cache has not seen this process's own last status write yet: a status computed from it would be sent
		// with a stale resourceVersion and refused (Conflict), a wasted write. The write's event is on its way.
		return ctrl.Result{RequeueAfter: operating.StaleReadRetry}, nil
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
	requested, newRequest := reconcileRequest(vd)
	if newRequest {
		// A user asked for this reconcile: ask the registry, not the cache (see cacheUse), and record that it was
		// handled (with the one status write of this reconcile).
		vd.Status.SetLastHandledReconcileRequest(requested)
	}
	var end ending
	if err := r.checkShardKey(ctx, vd); err != nil {
		r.synced.Delete(req.NamespacedName)
		end = ending{err: err}
	} else if synced, ok := r.statusOnly(vd, newRequest || readFailed(vd)); ok {
		end = r.reconcileStatus(ctx, vd, synced)
	} else {
		end = r.reconcile(ctx, vd, r.cacheUse(vd, newRequest, time.Now()))
	}
	if end.holdsStatus(newRequest) {
		// What the status would say now is only that the new ArtifactDeployments are on their way; their first
		// reports requeue vd, and the one status write tells each one's state.
		return ctrl.Result{RequeueAfter: end.awaiting}, nil
	}
	err := r.status().Finalize(ctx, original, vd, end.err)
	r.ownWrites.Wrote(original, vd)
	if err := errors.Join(err, end.retry); err != nil {
		return ctrl.Result{}, err
	}
	return end.result, nil
}

// status writes the status at the end of a reconcile. The write carries the resourceVersion it was computed from,
// so a status computed from a stale read — in particular a collision counter another replica already bumped —
// fails with a conflict instead of overwriting newer state (the DaemonSet controller's stale-counter guard).
func (r *Reconciler) status() outcome.Status[*konfidencev1.VectorDeployment] {
	return outcome.Status[*konfidencev1.VectorDeployment]{Client: r.Client, Event: r.event, OptimisticLock: true}
}

// forget deletes the metrics of a VectorDeployment that is gone, and what its reconciles found.
func (r *Reconciler) forget(key client.ObjectKey) {
	r.synced.Delete(key)
	r.ownWrites.Forget(key)
	r.bypass.Forget(key)
	r.Metrics.Forget(key)
	forgetArtifacts(key)
}

// event records an event on vd for Kubernetes and notification-controller, with the vector as the revision.
func (r *Reconciler) event(vd *konfidencev1.VectorDeployment, eventtype, reason, messageFmt string, args ...any) {
	operating.Event(r.Recorder, vd, vd.Spec.Vector, eventtype, reason, messageFmt, args...)
}

// ending is how the steps of a reconcile ended.
type ending struct {
	result ctrl.Result
	// err is the outcome the status reports (see outcome.Normalize): a failure of the VectorDeployment as a whole,
	// or an error that kept the reconcile from finishing.
	err error
	// retry are the failures of single artifacts that a retry may heal, retried with backoff whatever the outcome:
	// an artifact that failed for good stalls the VectorDeployment, yet another one may still come.
	retry error
	// awaiting is how much longer the status write waits for the first report of ArtifactDeployments a deployer of
	// this process has taken on (see awaitingFirstReport); 0 when it is written now.
	awaiting time.Duration
}

// holdsStatus tells whether the status write waits for the first reports of the ArtifactDeployments: only while
// nothing failed and no reconcile request is to be recorded as handled, which the status must say at once.
func (e ending) holdsStatus(requested bool) bool {
	return e.awaiting > 0 && e.err == nil && e.retry == nil && !requested
}

// reconcile runs the steps of a reconcile on vd in order, each marking the conditions it decides: the registry
// credentials, the vector, one ArtifactDeployment per artifact, and the summary of their state. cache says how the
// vector's reads use the OCM client's cache (see cacheUse).
func (r *Reconciler) reconcile(ctx context.Context, vd *konfidencev1.VectorDeployment, cache ocm.Read) ending {
	r.synced.Delete(client.ObjectKeyFromObject(vd))
	creds, err := r.Credentials.forVectorDeployment(ctx, r.APIReader, vd)
	if err != nil {
		return ending{err: failVector(vd, err)}
	}
	artifacts, err := r.resolve(ctx, vd, r.read(vd, creds, cache))
	if err != nil {
		return ending{err: err}
	}
	slots, err := r.syncArtifacts(ctx, vd, artifacts)
	if bumped := recordSlots(vd, slots); err != nil || bumped {
		// The slots synced so far are recorded, and an API error is retried with backoff. A bumped counter is
		// persisted by the status write that follows (or fails it on a stale read), and the next reconcile tries
		// the salted name.
		return ending{result: ctrl.Result{RequeueAfter: time.Millisecond}, err: err}
	}
	s := summarize(artifacts, slots)
	r.report(vd, artifacts, s)
	if s.outcome == nil && len(slots) == len(artifacts) {
		r.synced.Store(client.ObjectKeyFromObject(vd), syncedSpec{generation: vd.Generation, shard: shardKeyOf(vd), slots: resultingSlots(vd, slots),
			downloaded: conditions.Get(vd, konfidencev1.VectorDownloadedCondition).DeepCopy(), digest: vd.Status.VectorDigest})
	} else {
		r.synced.Delete(client.ObjectKeyFromObject(vd))
	}
	return r.ended(s, artifacts, slots)
}

// resultingSlots is the status entry of each synced slot. A status-only reconcile reports these entries, the
// VectorDownloaded condition and the vector's digest as the full reconcile found them, not from the cached status: the write that would
// have recorded them may still be held (see holdsStatus).
func resultingSlots(vd *konfidencev1.VectorDeployment, slots map[string]slotResult) map[string]konfidencev1.ResultingArtifactDeployment {
	resulting := make(map[string]konfidencev1.ResultingArtifactDeployment, len(slots))
	for component := range slots {
		resulting[component] = vd.Status.ResultingArtifactDeployments[component]
	}
	return resulting
}

// ended is how a reconcile that got to the summary ended: its outcome, and a look again while the
// ArtifactDeployments are on their way.
func (r *Reconciler) ended(s summary, artifacts []ResolvedArtifact, slots map[string]slotResult) ending {
	end := ending{err: s.outcome, retry: artifactErrors(artifacts)}
	if s.outcome == nil && !s.isReady() {
		end.result.RequeueAfter = r.RequeueDependency
		end.awaiting = r.awaitingFirstReport(slots)
	}
	return end
}

// syncedSpec is what a full reconcile of a VectorDeployment found: every artifact of its vector read and served by
// an ArtifactDeployment, for this generation of its spec.
type syncedSpec struct {
	generation int64
	shard      shardKey // the ArtifactDeployments carry it
	// slots are the status entries of the artifacts' slots, by component.
	slots map[string]konfidencev1.ResultingArtifactDeployment
	// downloaded is the VectorDownloaded condition the reconcile set, and digest the vector's digest it read.
	downloaded *metav1.Condition
	digest     string
}

// statusOnly tells whether this reconcile only has to report the state of vd's ArtifactDeployments, as the
// Deployment controller's status-only sync does: a full reconcile of the same spec in this process found every
// artifact read and deployed, and no one asked for a reconcile since. Only a change of an ArtifactDeployment can
// then be new, and the vector, the Secrets it is read with and the names of its ArtifactDeployments are as they
// were; a restart, a change of the spec, a reconcile request or a failure make the next reconcile a full one.
func (r *Reconciler) statusOnly(vd *konfidencev1.VectorDeployment, requested bool) (syncedSpec, bool) {
	v, ok := r.synced.Load(client.ObjectKeyFromObject(vd))
	if !ok || requested {
		return syncedSpec{}, false
	}
	synced, _ := v.(syncedSpec)
	return synced, synced.generation == vd.Generation && synced.shard == shardKeyOf(vd)
}

// reconcileStatus summarizes vd from its ArtifactDeployments as the cache has them, without reading the vector or
// writing anything but the status. An ArtifactDeployment that is gone, going, no longer vd's or not in vd's shard
// makes it a full reconcile: that one is to be created again, adopted or relabelled.
func (r *Reconciler) reconcileStatus(ctx context.Context, vd *konfidencev1.VectorDeployment, synced syncedSpec) ending {
	slots := make(map[string]slotResult, len(synced.slots))
	artifacts := make([]ResolvedArtifact, 0, len(synced.slots))
	for component, entry := range synced.slots {
		ad := &konfidencev1.ArtifactDeployment{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: vd.Namespace, Name: entry.Name}, ad); err != nil || !ad.DeletionTimestamp.IsZero() || !IsOwnedBy(ad, vd) ||
			shardKeyOf(ad) != synced.shard {
			r.synced.Delete(client.ObjectKeyFromObject(vd))
			return r.reconcile(ctx, vd, ocm.Read{})
		}
		slots[component] = slotResult{outcome: adopted, name: entry.Name, collisionCount: ptr.Deref(entry.CollisionCount, 0), deployment: ad}
		artifacts = append(artifacts, ResolvedArtifact{Component: component})
	}
	recordSlots(vd, slots)
	if synced.downloaded != nil {
		conditions.Set(vd, synced.downloaded.DeepCopy())
	}
	vd.Status.VectorDigest = synced.digest
	s := summarize(artifacts, slots)
	r.report(vd, artifacts, s)
	return r.ended(s, artifacts, slots)
}

// readFailed tells whether vd's last read of its vector failed: its retries ask the registry, not the cache alone,
// as the request that failed did (see cacheUse). The cache holds what an earlier read found, so a retry answered
// from it would report that content as read now, and Ready would turn True again in the middle of a registry
// outage a user asked about; recovery comes once the registry answers.
func readFailed(vd *konfidencev1.VectorDeployment) bool {
	return conditions.IsFalse(vd, konfidencev1.VectorDownloadedCondition)
}

// cacheUse says how a reconcile of vd uses the OCM client's cache. A reconcile request reads around it, so that a
// user who asks gets the registry's answer, a component version pushed again under the same version included, but
// at most once per operating.MinBypassInterval for each VectorDeployment. A request within the interval, and a retry of a
// failed read, revalidate: one request resolves the vector's tag, a vector whose tag moved is read again, and
// what is cached and unchanged is not (an artifact that failed is not cached, so it is read again). Any other
// reconcile reads from the cache.
func (r *Reconciler) cacheUse(vd *konfidencev1.VectorDeployment, newRequest bool, now time.Time) ocm.Read {
	if newRequest && r.bypass.Allow(client.ObjectKeyFromObject(vd), now) {
		return ocm.Read{BypassCache: true}
	}
	return ocm.Read{Revalidate: newRequest || readFailed(vd)}
}

// read is how the reads of vd's vector go: with the credentials vd may use, counted against vd's namespace's
// bound of reads in flight (--registry-namespace-concurrency), and with cache's use of the cache.
func (r *Reconciler) read(vd *konfidencev1.VectorDeployment, creds ocm.Credentials, cache ocm.Read) ocm.Read {
	cache.Credentials, cache.Namespace = creds, vd.Namespace
	return cache
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
	registrySecrets              []string
	registrySecretsHosts         []string
	insecureRegistryCredsHosts   []string
	registryHostConcurrency      int
	registryNamespaceConcurrency int
	requireSignatures            bool
	signatureKeys                string
	requiredSignatures           []string
	// Resolver reads the vectors; nil builds an OCM client from the flags. Tests and benchmarks pass one so that
	// several managers share its cache, as one process shares it across restarts of its manager.
	Resolver *ocm.Client
	// Finalizers maps each manifest type a deployer running in the same process handles to the finalizer it tears
	// an ArtifactDeployment of that type down under. The reconciler creates such ArtifactDeployments with it in
	// place, so the deployer need not add it in a write of its own, and holds a VectorDeployment's status write
	// until their first report (see firstReportWait). The reconcilers meet only through API objects: the binary,
	// which sets both up, passes this; a type missing from it is created without a finalizer, as before any
	// deployer takes it on.
	Finalizers map[string]string
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
	fs.IntVar(&o.registryHostConcurrency, "registry-host-concurrency", ocm.DefaultHostConcurrency,
		"vectors read at once from one registry host; a further read waits up to 10s, then is retried (RegistryBusy). "+
			"Keep it below --concurrent, so that a registry that never answers cannot hold every worker")
	fs.IntVar(&o.registryNamespaceConcurrency, "registry-namespace-concurrency", ocm.DefaultNamespaceConcurrency,
		"registry reads in flight for the VectorDeployments and Stages of one namespace, whatever registries they name; a further read "+
			"waits up to 2s, then is retried with backoff (NamespaceBusy). Keep it below --concurrent, so that one namespace's registries "+
			"cannot hold every worker")
	fs.BoolVar(&o.requireSignatures, "require-signatures", false,
		"deploy only vectors whose OCM signatures verify with the keys of --signature-keys-secret, for every VectorDeployment: "+
			"a VectorDeployment's spec.verify is required in addition and cannot replace it")
	fs.StringVar(&o.signatureKeys, "signature-keys-secret", "fluxdeployer-signature-keys",
		"Secret of PEM public keys or certificates by signature name, for --require-signatures: a name in the operator's namespace (RUNTIME_NAMESPACE) or namespace/name; read on every reconcile")
	fs.StringSliceVar(&o.requiredSignatures, "required-signatures", nil,
		"signature names --require-signatures requires; empty: every signature with a key must verify, at least one must")
}

func (o *Options) trustDefault(runtimeNamespace string) (TrustDefault, error) {
	if !o.requireSignatures {
		return TrustDefault{}, nil
	}
	secret, err := secretKey(o.signatureKeys, runtimeNamespace)
	return TrustDefault{Require: true, Secret: secret, Signatures: o.requiredSignatures}, err
}

// SetupWithManager registers the reconciler with the manager, and the Stage reconciler above it.
func (o *Options) SetupWithManager(mgr ctrl.Manager, shared operating.Options) error {
	secrets, err := parseSecretKeys(o.registrySecrets)
	if err != nil {
		return err
	}
	recorder, err := shared.NewEventRecorder(mgr, "vectordeployment-controller")
	if err != nil {
		return err
	}
	trust, err := o.trustDefault(shared.RuntimeNamespace)
	if err != nil {
		return err
	}
	resolver := o.Resolver
	if resolver == nil {
		resolver = ocm.NewClient(ocm.Options{
			InsecureCredentialHosts: o.insecureRegistryCredsHosts,
			AllowedHosts:            shared.AllowedRegistries,
			HostConcurrency:         o.registryHostConcurrency,
			NamespaceConcurrency:    o.registryNamespaceConcurrency,
		})
	}
	r := &Reconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		OCM:               resolver,
		Credentials:       RegistryCredentials{Secrets: secrets, Hosts: o.registrySecretsHosts},
		Recorder:          recorder,
		Metrics:           shared.ReconcileMetrics(mgr, "VectorDeployment"),
		RequeueDependency: shared.RequeueDependency,
		TrustDefault:      trust,
		Finalizers:        o.Finalizers,
		hashLength:        naming.HashLength,
		maxArtifacts:      konfidencev1.MaxArtifactsPerVector,
		bypass:            operating.CacheBypass{Interval: operating.MinBypassInterval},
	}
	if err := r.setupWithManager(mgr, shared, shared.ControllerOptions()); err != nil {
		return err
	}
	// Stages create VectorDeployments and read the registry only through this reconciler's reads.
	return stage.Setup(mgr, shared, r)
}

// componentIndex indexes ArtifactDeployments by their component annotation, so that one created by Konfidence,
// which carries the annotations but not the identity label, is found without reading the whole namespace; like
// identityIndex, for lookups within a namespace.
const componentIndex = "metadata.annotations." + konfidencev1.ArtifactComponentAnnotation

func (r *Reconciler) setupWithManager(mgr ctrl.Manager, shared operating.Options, opts controller.Options) error {
	peers, err := shared.AcrossShards(mgr, &konfidencev1.VectorDeployment{}, trimToShardKey)
	if err != nil {
		return err
	}
	r.peers = peers
	if err := indexIdentity(mgr); err != nil {
		return err
	}
	if err := operating.IndexField(context.Background(), mgr.GetCache(), &konfidencev1.ArtifactDeployment{}, componentIndex, false,
		func(obj client.Object) []string {
			return []string{obj.GetAnnotations()[konfidencev1.ArtifactComponentAnnotation]}
		}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		// A changed shard key moves the ArtifactDeployments with the VectorDeployment.
		For(&konfidencev1.VectorDeployment{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}, predicate.LabelChangedPredicate{}))).
		Watches(&konfidencev1.ArtifactDeployment{}, artifactDeploymentChanges()).
		WatchesRawSource(source.Kind(peers, client.Object(&konfidencev1.VectorDeployment{}),
			handler.EnqueueRequestsFromMapFunc(r.refusedPeers), predicate.LabelChangedPredicate{})).
		WithOptions(opts).
		Complete(r)
}
