package vectordeployment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// resolve reads the vector and records the outcome in the VectorDownloaded condition. It returns no artifacts
// and no error when the vector failed for good: the status says why, and retrying cannot help.
func (r *Reconciler) resolve(ctx context.Context, vd *konfidencev1.VectorDeployment) ([]ResolvedArtifact, error) {
	trust, err := r.trust(ctx, vd)
	if err != nil {
		r.fail(vd, konfidencev1.SignatureInvalidReason, false, fmt.Sprintf("reading the keys that verify vector %s: %v", vd.Spec.Vector, err))
		return nil, err
	}
	artifacts, err := r.Source.ResolveVector(ctx, vd.Spec.Vector, trust)
	if err != nil {
		r.fail(vd, FailureReason(err), isPermanent(err), fmt.Sprintf("reading vector %s: %v", vd.Spec.Vector, err))
		if isPermanent(err) {
			return nil, nil
		}
		return nil, err
	}
	if len(artifacts) > r.maxArtifacts {
		// Refused before any ArtifactDeployment is created: its status could outgrow what the API server stores.
		r.fail(vd, konfidencev1.VectorTooLargeReason, true, fmt.Sprintf("vector %s has %d artifacts, more than the %d one VectorDeployment deploys",
			vd.Spec.Vector, len(artifacts), r.maxArtifacts))
		return nil, nil
	}
	if msg := repeatedComponents(artifacts); msg != "" {
		r.fail(vd, konfidencev1.MultipleComponentVersionsReason, true, fmt.Sprintf("vector %s: %s", vd.Spec.Vector, msg))
		return nil, nil
	}
	if reason, msg := artifactFailures(artifacts); reason != "" {
		conditions.MarkFalse(vd, konfidencev1.VectorDownloadedCondition, reason, "%s", msg)
	} else {
		conditions.MarkTrue(vd, konfidencev1.VectorDownloadedCondition, meta.SucceededReason,
			"read vector %s and its %d artifacts", vd.Spec.Vector, len(artifacts))
	}
	return artifacts, nil
}

// repeatedComponents names the components the vector references more than once, or returns "". The status keeps
// one slot (name, collision count, results) per component, so a second version would share the first one's slot:
// one of them would drop out of the status and Ready could come before both are. A vector is a set of artifacts,
// so one version per component is the rule, and a vector breaking it is refused before anything is created.
func repeatedComponents(artifacts []ResolvedArtifact) string {
	refs := map[string][]string{}
	var repeated []string
	for _, a := range artifacts {
		if refs[a.Component] = append(refs[a.Component], a.Ref); len(refs[a.Component]) == 2 {
			repeated = append(repeated, a.Component)
		}
	}
	if len(repeated) == 0 {
		return ""
	}
	msgs := make([]string, len(repeated))
	for i, c := range repeated {
		msgs[i] = fmt.Sprintf("component %s is referenced %d times (%s)", c, len(refs[c]), joinBounded(refs[c], ", "))
	}
	return joinBounded(msgs, "; ") + "; a vector holds one version per component"
}

// fail records a failure of the whole VectorDeployment: not Ready, and Stalled when retrying cannot help.
func (r *Reconciler) fail(vd *konfidencev1.VectorDeployment, reason string, permanent bool, msg string) {
	conditions.MarkFalse(vd, konfidencev1.VectorDownloadedCondition, reason, "%s", msg)
	conditions.MarkFalse(vd, konfidencev1.ReadyCondition, reason, "%s", msg)
	if permanent {
		conditions.MarkStalled(vd, reason, "%s", msg)
		conditions.Delete(vd, konfidencev1.ReconcilingCondition)
	} else {
		conditions.MarkReconciling(vd, meta.ProgressingWithRetryReason, "%s", msg)
		conditions.Delete(vd, konfidencev1.StalledCondition)
	}
	vd.Status.ObservedGeneration = vd.Generation
	r.event(vd, corev1.EventTypeWarning, reason, "%s", msg)
}

// syncArtifacts syncs every artifact that was read. An artifact from which no name can be built fails alone,
// like one that could not be read; an API error on one artifact does not keep the others from being synced,
// and what was synced is returned with the errors.
func (r *Reconciler) syncArtifacts(ctx context.Context, vd *konfidencev1.VectorDeployment, artifacts []ResolvedArtifact) (map[string]slotResult, error) {
	slots := map[string]slotResult{}
	var errs []error
	for i := range artifacts {
		ra := &artifacts[i]
		if ra.Err != nil {
			continue
		}
		slot, err := r.syncArtifact(ctx, vd, ra.Artifact, collisionCountOfSlot(vd, ra.Artifact.Component))
		switch {
		case isPermanent(err):
			ra.Err = err
		case err != nil:
			errs = append(errs, err)
		default:
			slots[ra.Artifact.Component] = slot
		}
	}
	r.eventOwnership(vd, slots)
	return slots, kerrors.NewAggregate(errs)
}

// eventOwnership records one event for the ArtifactDeployments this reconcile created and one for those it
// adopted, rather than one per ArtifactDeployment: at most one event per artifact, and those for what a person
// may act on.
func (r *Reconciler) eventOwnership(vd *konfidencev1.VectorDeployment, slots map[string]slotResult) {
	var made, adopted []string
	for _, slot := range slots {
		switch {
		case slot.outcome == created:
			made = append(made, slot.described)
		case slot.adoptedNow:
			adopted = append(adopted, slot.described)
		}
	}
	if len(made) > 0 {
		r.event(vd, corev1.EventTypeNormal, "ArtifactDeploymentCreated", "Created %d ArtifactDeployments: %s", len(made), joinBounded(sorted(made), "; "))
	}
	if len(adopted) > 0 {
		r.event(vd, corev1.EventTypeNormal, "ArtifactDeploymentAdopted", "Adopted %d ArtifactDeployments: %s", len(adopted), joinBounded(sorted(adopted), "; "))
	}
}

func collisionCountOfSlot(vd *konfidencev1.VectorDeployment, component string) int32 {
	return ptr.Deref(vd.Status.ResultingArtifactDeployments[component].CollisionCount, 0)
}

// recordSlots writes each slot into status.resultingArtifactDeployments and tells whether a collision counter
// was bumped. A bumped count is permanent for its slot: the name it salts is the slot's name from then on.
func recordSlots(vd *konfidencev1.VectorDeployment, slots map[string]slotResult) (bumped bool) {
	if vd.Status.ResultingArtifactDeployments == nil && len(slots) > 0 {
		vd.Status.ResultingArtifactDeployments = map[string]konfidencev1.ResultingArtifactDeployment{}
	}
	for component, slot := range slots {
		entry := vd.Status.ResultingArtifactDeployments[component]
		if slot.outcome != collided {
			entry.Name = slot.name
		}
		if slot.collisionCount > 0 {
			entry.CollisionCount = ptr.To(slot.collisionCount)
		}
		vd.Status.ResultingArtifactDeployments[component] = entry
		if slot.outcome == collided {
			bumped = true
			conditions.MarkReconciling(vd, konfidencev1.ArtifactDeploymentHashCollisionReason, "%s", slot.message)
		}
	}
	return bumped
}

// summarize sets the conditions and deployment results from the slots and the ArtifactDeployments' own status.
// Ready is not conditions.SetAggregate over the ArtifactDeployments: its merge ranks True above Unknown and skips
// an ArtifactDeployment without a Ready condition (one just created), so it would say Ready=True before every
// ArtifactDeployment is; and the message here names those still waiting.
func (r *Reconciler) summarize(vd *konfidencev1.VectorDeployment, artifacts []ResolvedArtifact, slots map[string]slotResult) {
	vd.Status.ObservedGeneration = vd.Generation
	vd.Status.DeploymentResults = nil
	var limited []string
	var waiting waitingArtifacts
	for component, slot := range slots {
		if slot.outcome == collisionLimit {
			limited = append(limited, slot.message)
			continue
		}
		if results := slot.deployment.Status.DeploymentResult; len(results) > 0 {
			if vd.Status.DeploymentResults == nil {
				vd.Status.DeploymentResults = map[string][]konfidencev1.DeploymentResult{}
			}
			vd.Status.DeploymentResults[component] = results
		}
		waiting.add(slot.name, slot.deployment)
	}
	r.reportNewFailures(vd, artifacts)
	failedReason, failedMsg := artifactFailures(artifacts)
	counts := countArtifacts(artifacts, limited, waiting)
	recordArtifacts(client.ObjectKeyFromObject(vd), counts)
	recordCounts(vd, counts)

	switch {
	case len(limited) > 0:
		msg := fmt.Sprintf("gave up after %d collision salts: %s", konfidencev1.MaxCollisionCount, joinBounded(sorted(limited), "; "))
		conditions.MarkFalse(vd, konfidencev1.ArtifactDeploymentsCreatedCondition, konfidencev1.HashCollisionLimitExceededReason, "%s", msg)
		if !conditions.IsStalled(vd) || conditions.GetReason(vd, konfidencev1.StalledCondition) != konfidencev1.HashCollisionLimitExceededReason {
			collisionsLimitExceeded.Inc()
			r.event(vd, corev1.EventTypeWarning, konfidencev1.HashCollisionLimitExceededReason, "%s", msg)
		}
		failedReason, failedMsg = konfidencev1.HashCollisionLimitExceededReason, msg
	case failedReason != "":
		conditions.MarkFalse(vd, konfidencev1.ArtifactDeploymentsCreatedCondition, failedReason, "%s", failedMsg)
	default:
		conditions.MarkTrue(vd, konfidencev1.ArtifactDeploymentsCreatedCondition, meta.SucceededReason,
			"%d ArtifactDeployments exist", len(slots))
	}

	switch {
	case failedReason != "":
		conditions.MarkFalse(vd, konfidencev1.ReadyCondition, failedReason, "%s", failedMsg)
		if isPermanentFailure(artifacts) || len(limited) > 0 {
			conditions.MarkStalled(vd, failedReason, "%s", failedMsg)
			conditions.Delete(vd, konfidencev1.ReconcilingCondition)
		} else {
			conditions.MarkReconciling(vd, meta.ProgressingWithRetryReason, "%s", failedMsg)
			conditions.Delete(vd, konfidencev1.StalledCondition)
		}
	case len(waiting.names) > 0:
		reason, msg := waiting.summary(len(slots))
		conditions.MarkFalse(vd, konfidencev1.ReadyCondition, reason, "%s", msg)
		if waiting.allStalled() {
			conditions.MarkStalled(vd, reason, "%s", msg)
			conditions.Delete(vd, konfidencev1.ReconcilingCondition)
		} else {
			conditions.MarkReconciling(vd, meta.ProgressingReason, "%s", msg)
			conditions.Delete(vd, konfidencev1.StalledCondition)
		}
	default:
		conditions.MarkTrue(vd, konfidencev1.ReadyCondition, meta.SucceededReason, "%d/%d artifacts ready", len(slots), len(slots))
		conditions.Delete(vd, konfidencev1.ReconcilingCondition)
		conditions.Delete(vd, konfidencev1.StalledCondition)
	}
}

// countArtifacts sorts the artifacts of a VectorDeployment by state, for its status counts and the
// fluxdeployer_vectordeployment_artifacts gauge: those that could not be read or named and those given up on for collisions failed, the waiting ones
// failed when stalled and not ready otherwise, and the rest ready.
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

// FailureReason is the condition reason for a failure of an artifact or a vector: the OCM package's typed reason
// where it has one, and a generic one otherwise, since a condition without a reason is rejected by the API server.
// The CLI's previews report artifacts with it, as the VectorDeployment's status would.
func FailureReason(err error) string {
	if errors.Is(err, naming.ErrInvalidInput) {
		return konfidencev1.InvalidNameInputReason
	}
	if reason := refusalReason(err); reason != "" {
		return reason
	}
	if reason := ocm.ReasonOf(err); reason != "" {
		return string(reason)
	}
	return meta.ReconciliationFailedReason
}

// isPermanent tells whether retrying cannot fix a failure: a name that cannot be built, an artifact refused here,
// or an OCM reference or component version that is malformed.
func isPermanent(err error) bool {
	return errors.Is(err, naming.ErrInvalidInput) || refusalReason(err) != "" || ocm.IsPermanent(err)
}

// isPermanentFailure tells whether some artifact failed in a way retrying cannot fix.
func isPermanentFailure(artifacts []ResolvedArtifact) bool {
	return slices.ContainsFunc(artifacts, func(a ResolvedArtifact) bool { return a.Err != nil && isPermanent(a.Err) })
}

// artifactErrors returns the retryable artifact failures, so the controller retries them with backoff.
func artifactErrors(artifacts []ResolvedArtifact) error {
	var errs []error
	for _, a := range artifacts {
		if a.Err != nil && !isPermanent(a.Err) {
			errs = append(errs, fmt.Errorf("%s: %w", a.Ref, a.Err))
		}
	}
	return kerrors.NewAggregate(errs)
}

// writeStatus persists vd's status when it changed, in one write. The write carries the resourceVersion it was
// computed from, so a status computed from a stale read — in particular a collision counter another replica
// already bumped — fails with a conflict instead of overwriting newer state (the DaemonSet controller's
// stale-counter guard). Flux's patch helper cannot do this for fields other than conditions.
func (r *Reconciler) writeStatus(ctx context.Context, original, vd *konfidencev1.VectorDeployment) error {
	if equality.Semantic.DeepEqual(original.Status, vd.Status) {
		return nil
	}
	return r.Status().Patch(ctx, vd, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{}))
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
