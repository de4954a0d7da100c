// Package stage holds the Stage reconciler: a Stage names the vector a landscape should run, and the reconciler
// moves the landscape to it without an outage. It creates a VectorDeployment per vector, owned by the Stage, and
// deletes the one running before only once the new one is Ready; a move that fails leaves the running one as it
// is. It meets the VectorDeployment reconciler only through VectorDeployments, and reads the registry only to
// follow a semver range, through the reads the VectorDeployment reconciler offers (Vectors).
package stage

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/predicates"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// Defaults of the Stage's optional spec fields.
const (
	DefaultInterval         = 10 * time.Minute
	DefaultProgressDeadline = 10 * time.Minute
	DefaultHistoryLimit     = 10
)

// Vectors is what the Stage reconciler asks of the registry, through the VectorDeployment reconciler's reads so
// that a Stage passes the same allow-list, credentials, limits and trust policies as a VectorDeployment of its
// namespace (see vectordeployment.Reconciler.Versions and Verify). The interface breaks what would be an import
// cycle: the VectorDeployment reconciler's setup sets the Stage reconciler up.
type Vectors interface {
	Versions(ctx context.Context, vd *konfidencev1.VectorDeployment) ([]string, error)
	Verify(ctx context.Context, vd *konfidencev1.VectorDeployment, fresh Freshness) (required bool, err error)
}

// Freshness is how a Stage's reads of the registry use the operator's cache of what it read before.
type Freshness int

const (
	// Cached is how a reconcile at the Stage's interval reads: what was read and verified before is not read again.
	Cached Freshness = iota
	// Revalidated is how a reconcile request within operating.MinBypassInterval of the last one that read around
	// the cache reads: one request per version resolves its tag again, and a version whose tag moved is read again.
	Revalidated
	// Fresh is how a reconcile request reads, at most once per operating.MinBypassInterval for each Stage: around
	// the cache, so that a user who asks gets the registry's answer.
	Fresh
)

// Reconciler reconciles Stages.
type Reconciler struct {
	client.Client
	Vectors  Vectors
	Recorder record.EventRecorder
	Metrics  operating.ReconcileMetrics
	// bypass bounds the reconcile requests of each Stage that read around the cache (see freshness): whoever may
	// annotate a Stage may request reconciles as fast as the API server takes the writes.
	bypass operating.CacheBypass
	// ownWrites holds, per Stage, the resourceVersion its last status write replaced.
	ownWrites operating.OwnWrites
	// now is the clock of progress deadlines; tests set it.
	now func() time.Time
}

// +kubebuilder:rbac:groups=konfidence.cloud,resources=stages,verbs=list;watch
// +kubebuilder:rbac:groups=konfidence.cloud,resources=stages/status,verbs=patch
// +kubebuilder:rbac:groups=konfidence.cloud,resources=stages/finalizers,verbs=update
// +kubebuilder:rbac:groups=konfidence.cloud,resources=vectordeployments,verbs=create;delete

// Reconcile takes one step of a Stage's move: the vector it should run, its VectorDeployments as the step
// decides them, and its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start := time.Now()
	st := &konfidencev1.Stage{}
	if err := r.Get(ctx, req.NamespacedName, st); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.Forget(req.NamespacedName)
			r.bypass.Forget(req.NamespacedName)
			r.ownWrites.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.ownWrites.Stale(st) {
		// The cache has not seen this process's own last status write yet: a status computed from it would be sent
		// with a stale resourceVersion and refused (Conflict), a wasted write. The write's event is on its way.
		return ctrl.Result{RequeueAfter: operating.StaleReadRetry}, nil
	}
	if !st.DeletionTimestamp.IsZero() {
		// Its VectorDeployments are garbage collected with it, each tearing its workloads down.
		return ctrl.Result{}, nil
	}
	defer func() { r.Metrics.Record(ctx, st, start, st.Spec.Suspend) }()
	owned, err := r.ownedVectorDeployments(ctx, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	if st.Spec.Suspend {
		// Nothing is read or moved; the VectorDeployments are suspended with it, so that the landscape stands still.
		return ctrl.Result{}, r.passOn(ctx, st, owned, nil, "")
	}
	original := st.DeepCopy()
	requested, newRequest := reconcileRequest(st)
	if newRequest {
		st.Status.SetLastHandledReconcileRequest(requested)
	}
	result, err := r.reconcile(ctx, st, owned, r.freshness(req.NamespacedName, newRequest), requested)
	if outcome.Stalls(err) {
		// Not retried with backoff; looked at again every interval, as a change of what it waits for (a
		// VectorDeployment squatting the name deleted, a version pushed) sends no event the Stage watches.
		result = ctrl.Result{RequeueAfter: durationOr(st.Spec.Interval, DefaultInterval)}
	}
	err = r.status().Finalize(ctx, original, st, err)
	r.ownWrites.Wrote(original, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

// reconcile runs the steps: resolve the vector, decide the move, create and delete VectorDeployments as decided,
// pass the Stage's settings on, and record the status.
func (r *Reconciler) reconcile(ctx context.Context, st *konfidencev1.Stage, owned []konfidencev1.VectorDeployment,
	fresh Freshness, requested string) (ctrl.Result, error) {
	interval := durationOr(st.Spec.Interval, DefaultInterval)
	desired, err := r.resolve(ctx, st, owned, fresh)
	if err != nil {
		conditions.MarkFalse(st, konfidencev1.VectorDeploymentCreatedCondition, outcome.As(err, meta.ReconciliationFailedReason).Reason, "%s", err)
		return ctrl.Result{}, err
	}
	name, err := VectorDeploymentName(st.Name, st.UID, desired)
	if err != nil {
		return ctrl.Result{}, outcome.Stalling(konfidencev1.InvalidNameInputReason, err)
	}
	s := situation{
		status: st.Status, desired: desired, desiredName: name, owned: map[string]deployment{},
		now: r.clock(), deadline: durationOr(st.Spec.ProgressDeadline, DefaultProgressDeadline),
		limit: int(ptrOr(st.Spec.HistoryLimit, DefaultHistoryLimit)),
	}
	for i := range owned {
		d := observe(&owned[i])
		s.owned[d.name] = d
	}
	step := decide(s)
	if step.create {
		if err := r.createVectorDeployment(ctx, st, desired, name); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.remove(ctx, owned, step.remove); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.passOn(ctx, st, owned, step.remove, requested); err != nil {
		return ctrl.Result{}, err
	}
	r.record(st, desired, step)
	if step.failed {
		return ctrl.Result{}, outcome.Stallingf(step.ready.Reason, "%s", step.ready.Message)
	}
	requeue := interval
	if step.recheck > 0 {
		requeue = min(requeue, step.recheck)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// record writes the step into the status and its conditions.
func (r *Reconciler) record(st *konfidencev1.Stage, desired string, step step) {
	st.Status.ActiveVectorDeployment, st.Status.CandidateVectorDeployment = step.active, step.candidate
	st.Status.History, st.Status.LastAppliedVector = step.history, desired
	vdName := step.candidate
	if vdName == "" {
		vdName = step.active
	}
	conditions.MarkTrue(st, konfidencev1.VectorDeploymentCreatedCondition, meta.SucceededReason, "VectorDeployment %s of vector %s exists", vdName, desired)
	if step.deployed {
		conditions.MarkTrue(st, konfidencev1.VectorDeployedCondition, meta.SucceededReason, "%s", step.ready.Message)
	} else {
		conditions.MarkFalse(st, konfidencev1.VectorDeployedCondition, step.ready.Reason, "%s", step.ready.Message)
	}
	if !step.failed {
		ready := step.ready
		conditions.Set(st, &ready)
	}
	if step.ready.Status != metav1.ConditionTrue && !step.failed {
		conditions.MarkReconciling(st, meta.ProgressingReason, "%s", step.ready.Message)
	}
}

// observe is what a move decides on of a VectorDeployment.
func observe(vd *konfidencev1.VectorDeployment) deployment {
	ready := conditions.Get(vd, konfidencev1.ReadyCondition)
	current := vd.Status.ObservedGeneration == vd.Generation
	d := deployment{
		name: vd.Name, vector: vd.Spec.Vector, digest: vd.Status.VectorDigest, created: vd.CreationTimestamp.Time,
		deleting: !vd.DeletionTimestamp.IsZero(),
		ready:    current && ready != nil && ready.Status == metav1.ConditionTrue && vd.Status.Ready == vd.Status.Artifacts,
		failed:   current && conditions.IsStalled(vd),
		reason:   meta.ProgressingReason, message: "waiting for its first reconcile",
	}
	if ready != nil {
		d.reason, d.message = ready.Reason, ready.Message
	}
	return d
}

// ownedVectorDeployments lists the VectorDeployments the Stage controls, from the cache.
func (r *Reconciler) ownedVectorDeployments(ctx context.Context, st *konfidencev1.Stage) ([]konfidencev1.VectorDeployment, error) {
	list := &konfidencev1.VectorDeploymentList{}
	if err := r.List(ctx, list, client.InNamespace(st.Namespace), client.MatchingFields{ownerIndex: string(st.UID)}); err != nil {
		return nil, fmt.Errorf("listing the VectorDeployments of Stage %s: %w", st.Name, err)
	}
	return list.Items, nil
}

// createVectorDeployment creates the VectorDeployment of the desired vector, controlled by the Stage, in the
// Stage's namespace and shard. A name taken by a VectorDeployment the Stage does not control is refused: it is
// not changed, nor deleted.
func (r *Reconciler) createVectorDeployment(ctx context.Context, st *konfidencev1.Stage, desired, name string) error {
	vd := desiredVectorDeployment(st, desired)
	vd.Name = name
	if err := ctrl.SetControllerReference(st, vd, r.Scheme()); err != nil {
		return err
	}
	err := r.Create(ctx, vd)
	switch {
	case err == nil:
		log.FromContext(ctx).Info("created VectorDeployment", "vectorDeployment", name, "vector", desired)
		return nil
	case apierrors.IsAlreadyExists(err):
		return outcome.Stallingf(konfidencev1.VectorDeploymentConflictReason,
			"VectorDeployment %s, the name for vector %s, exists and is not controlled by this Stage; it is left as it is", name, desired)
	case apierrors.IsInvalid(err):
		return outcome.Stallingf(konfidencev1.VectorDeploymentRefusedReason, "the API server refused VectorDeployment %s for vector %s: %v", name, desired, err)
	}
	return fmt.Errorf("creating VectorDeployment %s: %w", name, err)
}

// desiredVectorDeployment is the VectorDeployment of a vector of the Stage, without its name: the Stage's
// registry credentials, verification, suspension and shard key passed on.
func desiredVectorDeployment(st *konfidencev1.Stage, vector string) *konfidencev1.VectorDeployment {
	vd := &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: st.Namespace},
		Spec: konfidencev1.VectorDeploymentSpec{
			Vector: vector, SecretRef: st.Spec.SecretRef.DeepCopy(), Verify: st.Spec.Verify.DeepCopy(), Suspend: st.Spec.Suspend,
		},
	}
	if key, ok := st.Labels[konfidencev1.ShardKeyLabel]; ok {
		vd.Labels = map[string]string{konfidencev1.ShardKeyLabel: key}
	}
	return vd
}

// remove deletes the VectorDeployments the step named; each tears down what no other VectorDeployment adopted.
// The deletion has the UID as its precondition, so that one created again under the name is not deleted instead.
func (r *Reconciler) remove(ctx context.Context, owned []konfidencev1.VectorDeployment, names []string) error {
	for i := range owned {
		vd := &owned[i]
		if !slices.Contains(names, vd.Name) {
			continue
		}
		if err := r.Delete(ctx, vd, client.Preconditions{UID: &vd.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting VectorDeployment %s: %w", vd.Name, err)
		}
		log.FromContext(ctx).Info("deleted VectorDeployment", "vectorDeployment", vd.Name, "vector", vd.Spec.Vector)
	}
	return nil
}

// passOn keeps the Stage's settings on its VectorDeployments (registry credentials, verification, suspension, shard
// key) and hands a reconcile request on, in one patch each, sent only when something differs; not to those being removed.
func (r *Reconciler) passOn(ctx context.Context, st *konfidencev1.Stage, owned []konfidencev1.VectorDeployment, removed []string, requested string) error {
	for i := range owned {
		vd := &owned[i]
		if !vd.DeletionTimestamp.IsZero() || slices.Contains(removed, vd.Name) {
			continue
		}
		before := vd.DeepCopy()
		want := desiredVectorDeployment(st, vd.Spec.Vector)
		vd.Spec.SecretRef, vd.Spec.Verify, vd.Spec.Suspend = want.Spec.SecretRef, want.Spec.Verify, want.Spec.Suspend
		// A Stage moved to another shard takes its VectorDeployments along, and they their ArtifactDeployments.
		if key, ok := want.Labels[konfidencev1.ShardKeyLabel]; ok {
			metav1.SetMetaDataLabel(&vd.ObjectMeta, konfidencev1.ShardKeyLabel, key)
		} else {
			delete(vd.Labels, konfidencev1.ShardKeyLabel)
		}
		if requested != "" {
			metav1.SetMetaDataAnnotation(&vd.ObjectMeta, meta.ReconcileRequestAnnotation, requested)
		}
		patch := client.MergeFrom(before)
		data, err := patch.Data(vd)
		if err != nil {
			return err
		}
		if string(data) == "{}" {
			continue
		}
		if err := r.Patch(ctx, vd, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("passing the Stage's settings on to VectorDeployment %s: %w", vd.Name, err)
		}
	}
	return nil
}

func (r *Reconciler) status() outcome.Status[*konfidencev1.Stage] {
	// The history is state, not an observation: a status computed from a stale read fails instead of dropping an
	// entry.
	return outcome.Status[*konfidencev1.Stage]{Client: r.Client, Event: r.event, OptimisticLock: true}
}

// event records an event on the Stage, with the vector it runs or moves to as the revision.
func (r *Reconciler) event(st *konfidencev1.Stage, eventtype, reason, messageFmt string, args ...any) {
	operating.Event(r.Recorder, st, st.Status.LastAppliedVector, eventtype, reason, messageFmt, args...)
}

func (r *Reconciler) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// freshness says how a reconcile of the Stage key reads the registry, decided once for all its reads.
func (r *Reconciler) freshness(key client.ObjectKey, newRequest bool) Freshness {
	switch {
	case !newRequest:
		return Cached
	case r.bypass.Allow(key, time.Now()):
		return Fresh
	}
	return Revalidated
}

// reconcileRequest returns the value of the reconcile.fluxcd.io/requestedAt annotation when it asks for a reconcile
// not handled yet.
func reconcileRequest(st *konfidencev1.Stage) (string, bool) {
	requested, ok := meta.ReconcileAnnotationValue(st.GetAnnotations())
	return requested, ok && requested != st.Status.GetLastHandledReconcileRequest()
}

// ownerIndex indexes VectorDeployments by the UID of the Stage that controls them.
const ownerIndex = "metadata.ownerReferences.stage"

// Setup registers the Stage reconciler with the manager.
func Setup(mgr ctrl.Manager, shared operating.Options, vectors Vectors) error {
	recorder, err := shared.NewEventRecorder(mgr, "stage-controller")
	if err != nil {
		return err
	}
	if err := operating.IndexField(context.Background(), mgr.GetCache(), &konfidencev1.VectorDeployment{}, ownerIndex, false,
		func(obj client.Object) []string {
			if ref := metav1.GetControllerOfNoCopy(obj); ref != nil && ref.Kind == "Stage" && ref.APIVersion == konfidencev1.GroupVersion.String() {
				return []string{string(ref.UID)}
			}
			return nil
		}); err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient(), Vectors: vectors, Recorder: recorder, Metrics: shared.ReconcileMetrics(mgr, "Stage"),
		bypass: operating.CacheBypass{Interval: operating.MinBypassInterval}}
	return ctrl.NewControllerManagedBy(mgr).
		For(&konfidencev1.Stage{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}, predicate.LabelChangedPredicate{}))).
		Owns(&konfidencev1.VectorDeployment{}).
		WithOptions(shared.ControllerOptions()).
		Complete(r)
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
