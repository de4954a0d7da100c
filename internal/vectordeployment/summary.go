package vectordeployment

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// summary is what a VectorDeployment's status says once its artifacts are read and synced: its conditions, counts
// and deployment results, decided from the artifacts and the ArtifactDeployments serving their slots alone.
type summary struct {
	// created and ready are the ArtifactDeploymentsCreated and Ready conditions.
	created, ready metav1.Condition
	// progressing is the Reconciling condition's message while the ArtifactDeployments are on their way.
	progressing string
	// outcome is the failure the VectorDeployment reports: an artifact that failed, retried or stalling, a slot
	// given up on for collisions, or every ArtifactDeployment still waiting Stalled.
	outcome error
	counts  artifactCounts
	results map[string][]konfidencev1.DeploymentResult
	// collisionLimit is the message of the slots given up on for collisions, "" when none was.
	collisionLimit string
}

// isReady tells whether every artifact is deployed and ready.
func (s summary) isReady() bool { return s.ready.Status == metav1.ConditionTrue }

// summarize decides the summary of artifacts synced into slots. Ready is not conditions.SetAggregate over the
// ArtifactDeployments: its merge ranks True above Unknown and skips an ArtifactDeployment without a Ready condition
// (one just created), so it would say Ready=True before every ArtifactDeployment is; and the message here names
// those still waiting.
func summarize(artifacts []ResolvedArtifact, slots map[string]slotResult) summary {
	var s summary
	var limited []string
	var waiting waitingArtifacts
	for component, slot := range slots {
		if slot.outcome == collisionLimit {
			limited = append(limited, slot.message)
			continue
		}
		if results := slot.deployment.Status.DeploymentResult; len(results) > 0 {
			if s.results == nil {
				s.results = map[string][]konfidencev1.DeploymentResult{}
			}
			s.results[component] = results
		}
		waiting.add(slot.name, slot.deployment)
	}
	s.counts = countArtifacts(artifacts, limited, waiting)

	failedReason, failedMsg := artifactFailures(artifacts)
	stalled := isPermanentFailure(artifacts)
	switch {
	case len(limited) > 0:
		s.collisionLimit = fmt.Sprintf("gave up after %d collision salts: %s", konfidencev1.MaxCollisionCount, joinBounded(sorted(limited), "; "))
		s.created = condition(metav1.ConditionFalse, konfidencev1.HashCollisionLimitExceededReason, s.collisionLimit)
		failedReason, failedMsg, stalled = konfidencev1.HashCollisionLimitExceededReason, s.collisionLimit, true
	case failedReason != "":
		s.created = condition(metav1.ConditionFalse, failedReason, failedMsg)
	default:
		s.created = condition(metav1.ConditionTrue, meta.SucceededReason, fmt.Sprintf("%d ArtifactDeployments exist", len(slots)))
	}

	switch {
	case failedReason != "" && stalled:
		s.outcome = outcome.Stallingf(failedReason, "%s", failedMsg)
	case failedReason != "":
		s.outcome = outcome.Retrying(failedReason, errors.New(failedMsg))
	case len(waiting.names) > 0:
		reason, msg := waiting.summary(len(slots))
		if waiting.allStalled() {
			s.outcome = outcome.Stallingf(reason, "%s", msg)
		} else {
			s.ready, s.progressing = condition(metav1.ConditionFalse, reason, msg), msg
		}
	default:
		s.ready = condition(metav1.ConditionTrue, meta.SucceededReason, fmt.Sprintf("%d/%d artifacts ready", len(slots), len(slots)))
	}
	return s
}

func condition(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Status: status, Reason: reason, Message: msg}
}

// report records the summary on vd, and what it newly tells a person as events and metrics; a failure it reports
// is marked on Ready by the outcome's normalisation.
func (r *Reconciler) report(vd *konfidencev1.VectorDeployment, artifacts []ResolvedArtifact, s summary) {
	r.reportNewFailures(vd, artifacts)
	if s.collisionLimit != "" && conditions.GetReason(vd, konfidencev1.StalledCondition) != konfidencev1.HashCollisionLimitExceededReason {
		collisionsLimitExceeded.Inc()
	}
	recordArtifacts(client.ObjectKeyFromObject(vd), s.counts)
	recordCounts(vd, s.counts)
	vd.Status.DeploymentResults = s.results
	setCondition(vd, konfidencev1.ArtifactDeploymentsCreatedCondition, s.created)
	if s.outcome == nil {
		setCondition(vd, konfidencev1.ReadyCondition, s.ready)
	}
	if s.progressing != "" {
		conditions.MarkReconciling(vd, meta.ProgressingReason, "%s", s.progressing)
	}
	// Whatever the outcome, it is the current spec's.
	vd.Status.ObservedGeneration = vd.Generation
}

// setCondition sets c as condition t; conditions.Set keeps the transition time while status, reason and message
// stay the same, which keeps a steady-state status write empty.
func setCondition(vd *konfidencev1.VectorDeployment, t string, c metav1.Condition) {
	c.Type = t
	conditions.Set(vd, &c)
}

// countArtifacts sorts the artifacts of a VectorDeployment by state, for its status counts and the
// fluxdeployer_vectordeployment_artifacts gauge: those that could not be read or named and those given up on for
// collisions failed, the waiting ones failed when stalled and not ready otherwise, and the rest ready.
func countArtifacts(artifacts []ResolvedArtifact, limited []string, waiting waitingArtifacts) artifactCounts {
	unresolved := 0
	for _, a := range artifacts {
		if a.Err != nil {
			unresolved++
		}
	}
	failed := unresolved + len(limited) + waiting.stalled
	notReady := len(waiting.names) - waiting.stalled
	return artifactCounts{ready: len(artifacts) - failed - notReady, notReady: notReady, failed: failed}
}

// recordCounts sets status.artifacts, status.ready and the ready/artifacts summary the Artifacts printer column
// shows. Every artifact of the vector counts, also one that could not be read or named: it is not deployed.
func recordCounts(vd *konfidencev1.VectorDeployment, c artifactCounts) {
	artifacts := c.ready + c.notReady + c.failed
	vd.Status.Artifacts = int32(min(artifacts, math.MaxInt32)) //nolint:gosec // G115: bounded on the line itself
	vd.Status.Ready = int32(min(c.ready, math.MaxInt32))       //nolint:gosec // G115: bounded on the line itself
	vd.Status.ReadySummary = fmt.Sprintf("%d/%d", c.ready, artifacts)
}

// waitingArtifacts collects the ArtifactDeployments that are not Ready, with what their own Ready condition
// says, so that a failure Flux reports (a chart that does not render, a release that does not install) reaches
// the VectorDeployment with its reason and message instead of a bare name.
type waitingArtifacts struct {
	names   []string
	details map[string]*metav1.Condition // Ready of each, nil when not reported yet
	stalled int
}

func (w *waitingArtifacts) add(name string, ad *konfidencev1.ArtifactDeployment) {
	if conditions.IsReady(ad) {
		return
	}
	if w.details == nil {
		w.details = map[string]*metav1.Condition{}
	}
	w.names = append(w.names, name)
	w.details[name] = conditions.Get(ad, konfidencev1.ReadyCondition)
	if conditions.IsStalled(ad) {
		w.stalled++
	}
}

// allStalled: every ArtifactDeployment still waiting has given up, so the VectorDeployment cannot progress
// without a change either.
func (w *waitingArtifacts) allStalled() bool { return len(w.names) > 0 && w.stalled == len(w.names) }

// summary reads like "2/3 artifacts ready; waiting for database-16-4-0-4739810ml3: InstallFailed: ...". The
// reason is the first failure's (in name order), or Progressing while every one is merely on its way.
func (w *waitingArtifacts) summary(total int) (reason, msg string) {
	reason = meta.ProgressingReason
	parts := make([]string, 0, len(w.names))
	for _, name := range sorted(w.names) {
		c := w.details[name]
		switch {
		case c == nil || c.Message == "":
			parts = append(parts, name)
		default:
			parts = append(parts, fmt.Sprintf("%s: %s: %s", name, c.Reason, c.Message))
		}
		if c != nil && c.Status == metav1.ConditionFalse && reason == meta.ProgressingReason && !isProgressing(c.Reason) {
			reason = c.Reason
		}
	}
	return reason, fmt.Sprintf("%d/%d artifacts ready; waiting for %s", total-len(w.names), total, joinBounded(parts, "; "))
}

// isProgressing tells the reasons of work under way from those of a failure.
func isProgressing(reason string) bool {
	return reason == meta.ProgressingReason || reason == meta.ProgressingWithRetryReason || reason == meta.DependencyNotReadyReason
}

// artifactFailures summarizes the artifacts that failed: the first one's reason, and a message naming each.
func artifactFailures(artifacts []ResolvedArtifact) (reason, msg string) {
	var msgs []string
	for _, a := range artifacts {
		if a.Err == nil {
			continue
		}
		if reason == "" {
			reason = FailureReason(a.Err)
		}
		msgs = append(msgs, failureMessage(a))
	}
	return reason, joinBounded(msgs, "; ")
}

func failureMessage(a ResolvedArtifact) string { return fmt.Sprintf("%s: %v", a.Ref, a.Err) }

// reportNewFailures emits a Warning event for each failed artifact that the ArtifactDeploymentsCreated condition
// does not report yet: every refusal is announced, once, not on every resync of a VectorDeployment that waits.
func (r *Reconciler) reportNewFailures(vd *konfidencev1.VectorDeployment, artifacts []ResolvedArtifact) {
	reported := conditions.GetMessage(vd, konfidencev1.ArtifactDeploymentsCreatedCondition)
	for _, a := range artifacts {
		if a.Err != nil && !strings.Contains(reported, failureMessage(a)) {
			r.event(vd, corev1.EventTypeWarning, FailureReason(a.Err), "%s", failureMessage(a))
		}
	}
}

// isPermanentFailure tells whether some artifact failed in a way retrying cannot fix.
func isPermanentFailure(artifacts []ResolvedArtifact) bool {
	return slices.ContainsFunc(artifacts, func(a ResolvedArtifact) bool { return outcome.Stalls(a.Err) })
}

// artifactErrors returns the retryable artifact failures, so the controller retries them with backoff.
func artifactErrors(artifacts []ResolvedArtifact) error {
	var errs []error
	for _, a := range artifacts {
		if a.Err != nil && !outcome.Stalls(a.Err) {
			errs = append(errs, fmt.Errorf("%s: %w", a.Ref, a.Err))
		}
	}
	return kerrors.NewAggregate(errs)
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
