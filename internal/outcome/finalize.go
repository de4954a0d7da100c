package outcome

import (
	"context"
	"errors"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// Object is a kind whose status Finalize writes: Flux-style conditions and an observedGeneration.
type Object interface {
	client.Object
	conditions.Setter
	SetObservedGeneration(generation int64)
}

// Status writes the status of one kind's objects at the end of each reconcile.
type Status[T Object] struct {
	// Client writes the status subresource.
	Client client.Client
	// Event records an event on an object; each reconciler's own, which adds its revision.
	Event func(obj T, eventtype, reason, messageFmt string, args ...any)
	// OptimisticLock makes the write carry the resourceVersion the status was computed from, so that a status
	// computed from a stale read fails with a conflict instead of overwriting newer state. Needed where the status
	// holds state besides observations (the VectorDeployment's collision counters); a status that is observed
	// afresh on every reconcile does without it, and without the conflicts a stale cache read would cause.
	OptimisticLock bool
	// FieldOwner, when set, names the field manager of the write.
	FieldOwner string
}

// Finalize ends a reconcile of obj, whose status was original's when the reconcile began: it normalises the
// conditions from err, the outcome of the steps (see Normalize), makes their messages safe to show (see
// sanitizeMessages), writes the status when it changed, in one request, and records the event of a Ready
// transition. It returns what controller-runtime is to see: the write's failure, and err unless it stalls. A
// stalled object is not retried with backoff, as in Flux: Stalled and the event report it, and a change of the
// object or of what its watches follow reconciles it again.
func (s Status[T]) Finalize(ctx context.Context, original, obj T, err error) error {
	Normalize(obj, err)
	sanitizeMessages(obj)
	s.readyEvent(original, obj)
	writeErr := s.write(ctx, original, obj)
	if Stalls(err) {
		return writeErr
	}
	return errors.Join(writeErr, err)
}

// Normalize sets Reconciling, Stalled and observedGeneration from the outcome of a reconcile's steps, kstatus'
// either-or of the two conditions written in one place:
//   - err is an *Error: Ready is False with its reason and message, and the object Stalled (Reconciling removed)
//     or Reconciling with ProgressingWithRetry (Stalled removed);
//   - err is another error: the reconcile did not finish, so it says nothing of the object; Ready stays as the steps
//     left it, and the object is Reconciling with ProgressingWithRetry;
//   - no error and Ready True: neither Reconciling nor Stalled;
//   - no error otherwise: on its way, not Stalled, Reconciling as a step marked it (its reason says why), or
//     Progressing with Ready's message.
//
// A generation is observed when its outcome is final: Ready True without an error, or Stalled. A step may record
// it before, for an outcome it knows to be of the current spec.
func Normalize(obj Object, err error) {
	var e *Error
	switch {
	case errors.As(err, &e):
		conditions.MarkFalse(obj, meta.ReadyCondition, e.Reason, "%s", e.Err)
		if e.Stalled {
			conditions.MarkStalled(obj, e.Reason, "%s", e.Err)
			conditions.Delete(obj, meta.ReconcilingCondition)
			obj.SetObservedGeneration(obj.GetGeneration())
		} else {
			conditions.MarkReconciling(obj, meta.ProgressingWithRetryReason, "%s", e.Err)
			conditions.Delete(obj, meta.StalledCondition)
		}
	case err != nil:
		conditions.MarkReconciling(obj, meta.ProgressingWithRetryReason, "%s", err)
		conditions.Delete(obj, meta.StalledCondition)
	case conditions.IsTrue(obj, meta.ReadyCondition): // not IsReady, which is false while Reconciling is marked
		conditions.Delete(obj, meta.ReconcilingCondition)
		conditions.Delete(obj, meta.StalledCondition)
		obj.SetObservedGeneration(obj.GetGeneration())
	default:
		conditions.Delete(obj, meta.StalledCondition)
		if !conditions.Has(obj, meta.ReconcilingCondition) {
			conditions.MarkReconciling(obj, meta.ProgressingReason, "%s", conditions.GetMessage(obj, meta.ReadyCondition))
		}
	}
}

// sanitizeMessages makes every condition message of obj bounded, printable text (sanitize.Text). A message
// repeats text from outside the operator: a registry's error answer, a Flux controller's condition message, a
// descriptor's field. A hostile registry answers with kilobytes of terminal escapes (an OSC 52 sequence sets a
// terminal's clipboard), carriage returns and right-to-left overrides; stored as they are, they would reach etcd,
// every watcher's cache, the events and notifications made of the Ready condition, and the terminals of kubectl
// and of this operator's CLI. Sanitizing where the status is written covers every step that marks a condition.
func sanitizeMessages(obj Object) {
	conds := obj.GetConditions()
	for i := range conds {
		conds[i].Message = sanitize.Text(conds[i].Message)
	}
	obj.SetConditions(conds)
}

// readyEvent records a change of Ready's status, reason or message: a Normal event when the object became Ready,
// a Warning when it failed. An object that is merely on its way (Reconciling with reason Progressing: waiting for
// what it depends on) gets none: events are for what a person may act on.
func (s Status[T]) readyEvent(original, obj T) {
	before, ready := conditions.Get(original, meta.ReadyCondition), conditions.Get(obj, meta.ReadyCondition)
	if ready == nil || (before != nil && before.Status == ready.Status && before.Reason == ready.Reason && before.Message == ready.Message) {
		return
	}
	switch ready.Status {
	case metav1.ConditionTrue:
		s.Event(obj, corev1.EventTypeNormal, ready.Reason, "%s", ready.Message)
	case metav1.ConditionFalse:
		if conditions.GetReason(obj, meta.ReconcilingCondition) != meta.ProgressingReason {
			s.Event(obj, corev1.EventTypeWarning, ready.Reason, "%s", ready.Message)
		}
	}
}

// write patches the status when it changed, in one merge patch of the whole status rather than Flux's patch
// helper, which sends the conditions and the rest in two requests. The change is judged by the JSON the patch
// would send, not by Go values: raw JSON in a status (a deployment result's spec) is stored with its keys sorted,
// so equal values read back as different bytes.
func (s Status[T]) write(ctx context.Context, original, obj T) error {
	data, err := client.MergeFrom(original).Data(obj)
	if err != nil || string(data) == "{}" {
		return err
	}
	patch := client.RawPatch(types.MergePatchType, data)
	if s.OptimisticLock {
		patch = client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})
	}
	var opts []client.SubResourcePatchOption
	if s.FieldOwner != "" {
		opts = append(opts, client.FieldOwner(s.FieldOwner))
	}
	return s.Client.Status().Patch(ctx, obj, patch, opts...)
}
