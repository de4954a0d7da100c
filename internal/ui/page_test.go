package ui

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestStateOf pins how the view colours an object from its kstatus conditions: a failure is failing also while
// it is retried or waited on; only work under way is progress.
func TestStateOf(t *testing.T) {
	cond := func(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: reason}
	}
	ready := func(s metav1.ConditionStatus, reason string) metav1.Condition {
		return cond(konfidencev1.ReadyCondition, s, reason)
	}
	reconciling := func(reason string) metav1.Condition {
		return cond(konfidencev1.ReconcilingCondition, metav1.ConditionTrue, reason)
	}
	for _, tc := range []struct {
		name       string
		conditions []metav1.Condition
		want       state
	}{
		{"no conditions yet", nil, stateUnknown},
		{"ready", []metav1.Condition{ready(metav1.ConditionTrue, meta.SucceededReason)}, stateReady},
		{"ready while a new revision reconciles", []metav1.Condition{ready(metav1.ConditionTrue, meta.SucceededReason), reconciling(meta.ProgressingReason)}, stateReady},
		{"waiting", []metav1.Condition{ready(metav1.ConditionUnknown, meta.ProgressingReason), reconciling(meta.ProgressingReason)}, stateProgressing},
		{"waiting for an artifact", []metav1.Condition{ready(metav1.ConditionFalse, meta.ProgressingReason), reconciling(meta.ProgressingReason)}, stateProgressing},
		{"waiting for a dependency", []metav1.Condition{ready(metav1.ConditionFalse, meta.DependencyNotReadyReason)}, stateProgressing},
		{"failed, retried", []metav1.Condition{ready(metav1.ConditionFalse, "OCIArtifactPullFailed"), reconciling(meta.ProgressingWithRetryReason)}, stateFailed},
		{"a VectorDeployment waiting on a failed artifact", []metav1.Condition{ready(metav1.ConditionFalse, "OCIArtifactPullFailed"), reconciling(meta.ProgressingReason)}, stateFailed},
		{"failed", []metav1.Condition{ready(metav1.ConditionFalse, "ArtifactFailed")}, stateFailed},
		{"stalled", []metav1.Condition{ready(metav1.ConditionFalse, "InvalidManifest"), cond(konfidencev1.StalledCondition, metav1.ConditionTrue, "InvalidManifest")}, stateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ad := &konfidencev1.ArtifactDeployment{Status: konfidencev1.ArtifactDeploymentStatus{Conditions: tc.conditions}}
			if got := stateOf(ad); got != tc.want {
				t.Errorf("stateOf = %s, want %s", got, tc.want)
			}
		})
	}
}
