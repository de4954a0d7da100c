package outcome

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

func condition(t string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg}
}

var (
	readyTrue    = condition(meta.ReadyCondition, metav1.ConditionTrue, meta.SucceededReason, "deployed")
	waiting      = condition(meta.ReadyCondition, metav1.ConditionFalse, meta.ProgressingReason, "waiting for b")
	unknown      = condition(meta.ReadyCondition, metav1.ConditionUnknown, meta.ProgressingReason, "waiting for b")
	staleStalled = condition(meta.StalledCondition, metav1.ConditionTrue, "Old", "old")
	staleRec     = condition(meta.ReconcilingCondition, metav1.ConditionTrue, meta.ProgressingWithRetryReason, "old")
)

// TestNormalize: each outcome of a reconcile's steps leaves one of Reconciling and Stalled, with the reason and
// message of what decided it, and observes the generation only when the outcome is final.
func TestNormalize(t *testing.T) {
	cause := errors.New("registry said no")
	for _, tc := range []struct {
		name     string
		marked   []metav1.Condition // as the previous status and this reconcile's steps left them
		err      error
		want     []metav1.Condition
		observed bool
	}{
		{name: "ready", marked: []metav1.Condition{readyTrue, staleStalled, staleRec},
			want: []metav1.Condition{readyTrue}, observed: true},
		{name: "stalling error", marked: []metav1.Condition{readyTrue, staleRec},
			err: Stalling("Refused", cause),
			want: []metav1.Condition{
				condition(meta.ReadyCondition, metav1.ConditionFalse, "Refused", "registry said no"),
				condition(meta.StalledCondition, metav1.ConditionTrue, "Refused", "registry said no"),
			}, observed: true},
		{name: "wrapped stalling error", err: fmt.Errorf("step: %w", Stallingf("Refused", "bad %s", "input")),
			want: []metav1.Condition{
				condition(meta.ReadyCondition, metav1.ConditionFalse, "Refused", "bad input"),
				condition(meta.StalledCondition, metav1.ConditionTrue, "Refused", "bad input"),
			}, observed: true},
		{name: "retrying error", marked: []metav1.Condition{staleStalled},
			err: Retrying("Unavailable", cause),
			want: []metav1.Condition{
				condition(meta.ReadyCondition, metav1.ConditionFalse, "Unavailable", "registry said no"),
				condition(meta.ReconcilingCondition, metav1.ConditionTrue, meta.ProgressingWithRetryReason, "registry said no"),
			}},
		{name: "unclassified error keeps Ready", marked: []metav1.Condition{readyTrue, staleStalled}, err: cause,
			want: []metav1.Condition{
				readyTrue,
				condition(meta.ReconcilingCondition, metav1.ConditionTrue, meta.ProgressingWithRetryReason, "registry said no"),
			}},
		{name: "waiting, as a step marked it",
			marked: []metav1.Condition{waiting, staleStalled,
				condition(meta.ReconcilingCondition, metav1.ConditionTrue, "HashCollision", "salted")},
			want: []metav1.Condition{waiting, condition(meta.ReconcilingCondition, metav1.ConditionTrue, "HashCollision", "salted")}},
		{name: "waiting, unmarked", marked: []metav1.Condition{unknown},
			want: []metav1.Condition{unknown, condition(meta.ReconcilingCondition, metav1.ConditionTrue, meta.ProgressingReason, "waiting for b")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			obj.Status.ObservedGeneration = 2
			for _, c := range tc.marked {
				conditions.Set(obj, &c)
			}
			Normalize(obj, tc.err)
			if diff := cmp.Diff(tc.want, obj.Status.Conditions, cmpopts.SortSlices(func(a, b metav1.Condition) bool { return a.Type < b.Type }),
				cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime", "ObservedGeneration")); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			want := int64(2)
			if tc.observed {
				want = 3
			}
			if got := obj.Status.ObservedGeneration; got != want {
				t.Errorf("observedGeneration = %d, want %d", got, want)
			}
		})
	}
}

// TestReadyEvent: a Ready transition is an event, Normal to True and Warning to False, except while the object is
// only on its way; a Ready that did not change is none.
func TestReadyEvent(t *testing.T) {
	failed := condition(meta.ReadyCondition, metav1.ConditionFalse, "InstallFailed", "chart does not render")
	retrying := condition(meta.ReconcilingCondition, metav1.ConditionTrue, meta.ProgressingWithRetryReason, "chart does not render")
	progressing := condition(meta.ReconcilingCondition, metav1.ConditionTrue, meta.ProgressingReason, "waiting for b")
	for _, tc := range []struct {
		name          string
		before, after []metav1.Condition
		want          []string
	}{
		{name: "became ready", before: []metav1.Condition{unknown}, after: []metav1.Condition{readyTrue},
			want: []string{corev1.EventTypeNormal + " Succeeded: deployed"}},
		{name: "stays ready", before: []metav1.Condition{readyTrue}, after: []metav1.Condition{readyTrue}},
		{name: "failed", before: []metav1.Condition{readyTrue}, after: []metav1.Condition{failed, retrying},
			want: []string{corev1.EventTypeWarning + " InstallFailed: chart does not render"}},
		{name: "failed again alike", before: []metav1.Condition{failed, retrying}, after: []metav1.Condition{failed, retrying}},
		{name: "first status fails", after: []metav1.Condition{failed, retrying},
			want: []string{corev1.EventTypeWarning + " InstallFailed: chart does not render"}},
		{name: "waiting", before: []metav1.Condition{readyTrue}, after: []metav1.Condition{waiting, progressing}},
		{name: "unknown", before: []metav1.Condition{readyTrue}, after: []metav1.Condition{unknown}},
		{name: "no Ready", before: []metav1.Condition{readyTrue}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			s := Status[*konfidencev1.VectorDeployment]{Event: func(_ *konfidencev1.VectorDeployment, eventtype, reason, messageFmt string, args ...any) {
				got = append(got, eventtype+" "+reason+": "+fmt.Sprintf(messageFmt, args...))
			}}
			before, after := &konfidencev1.VectorDeployment{}, &konfidencev1.VectorDeployment{}
			before.Status.Conditions, after.Status.Conditions = tc.before, tc.after
			s.readyEvent(before, after)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAs: the reason of a classified error wherever it is wrapped, and the fallback, retried, for any other.
func TestAs(t *testing.T) {
	cause := errors.New("boom")
	for _, tc := range []struct {
		err  error
		want *Error
	}{
		{nil, nil},
		{cause, &Error{Reason: "Fallback", Err: cause}},
		{fmt.Errorf("step: %w", Stalling("Refused", cause)), &Error{Reason: "Refused", Stalled: true, Err: cause}},
		{fmt.Errorf("step: %w", Retrying("Unavailable", cause)), &Error{Reason: "Unavailable", Err: cause}},
	} {
		// Compared as values: an *Error is an error, which cmp would compare with errors.Is.
		if diff := cmp.Diff(deref(tc.want), deref(As(tc.err, "Fallback")), cmpopts.EquateErrors()); diff != "" {
			t.Errorf("As(%v) (-want +got):\n%s", tc.err, diff)
		}
		if got, want := Stalls(tc.err), tc.want != nil && tc.want.Stalled; got != want {
			t.Errorf("Stalls(%v) = %v, want %v", tc.err, got, want)
		}
	}
}

type errorView struct {
	Reason  string
	Stalled bool
	Err     error
}

func deref(e *Error) *errorView {
	if e == nil {
		return nil
	}
	return &errorView{Reason: e.Reason, Stalled: e.Stalled, Err: e.Err}
}
