package fluxdeployer

import (
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// setCondition sets c as condition t; conditions.Set stamps the generation and keeps the transition time while
// status, reason and message stay the same, which keeps a steady-state status patch empty.
func setCondition(ad *konfidencev1.ArtifactDeployment, t string, c metav1.Condition) {
	c.Type = t
	conditions.Set(ad, &c)
}

// summarize sets Ready from the steps: True when the artifact is deployed, healthy and its results are
// collected; otherwise it carries the first failing step (False before Unknown), so its reason says what to look
// at, with Reconciling saying which step is awaited (finalize makes it exclusive with Stalled). Not
// conditions.SetSummary: its merge ranks True above Unknown, so steps still waiting next to finished ones would
// summarize to Ready=True.
func summarize(ad *konfidencev1.ArtifactDeployment) {
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
	if first == nil {
		setCondition(ad, meta.ReadyCondition, metav1.Condition{Status: metav1.ConditionTrue, Reason: meta.SucceededReason,
			Message: fmt.Sprintf("Deployed %s:%s", ad.Spec.Component.Name, ad.Spec.Component.Version)})
		return
	}
	setCondition(ad, meta.ReadyCondition, metav1.Condition{Status: first.Status, Reason: first.Reason, Message: first.Message})
	reason := meta.ProgressingReason
	if first.Status == metav1.ConditionFalse {
		reason = meta.ProgressingWithRetryReason // Flux retries and remediates on its own
	}
	conditions.MarkReconciling(ad, reason, "waiting for %s", first.Type)
}
