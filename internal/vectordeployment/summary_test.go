package vectordeployment

import (
	"errors"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// summaryView is what a summary says, with its outcome as reason, stall and message.
type summaryView struct {
	Created, Ready               metav1.Condition
	Progressing                  string
	Outcome                      string
	Stalled                      bool
	ReadyCount, NotReady, Failed int
	Results                      map[string][]konfidencev1.DeploymentResult
}

func viewOf(s summary) summaryView {
	v := summaryView{Created: s.created, Ready: s.ready, Progressing: s.progressing, Results: s.results,
		ReadyCount: s.counts.ready, NotReady: s.counts.notReady, Failed: s.counts.failed}
	if e := outcome.As(s.outcome, ""); e != nil {
		v.Outcome, v.Stalled = e.Reason+": "+e.Err.Error(), e.Stalled
	}
	return v
}

// TestSummarize: the conditions, counts, results and outcome of a VectorDeployment follow from its artifacts and
// the ArtifactDeployments serving them, without a cluster.
func TestSummarize(t *testing.T) {
	ad := func(ready, stalled bool, reason, msg string, results ...konfidencev1.DeploymentResult) *konfidencev1.ArtifactDeployment {
		a := &konfidencev1.ArtifactDeployment{}
		a.Status.DeploymentResult = results
		switch {
		case ready:
			conditions.MarkTrue(a, meta.ReadyCondition, meta.SucceededReason, "deployed")
		case reason != "":
			conditions.MarkFalse(a, meta.ReadyCondition, reason, "%s", msg)
		}
		if stalled {
			conditions.MarkStalled(a, reason, "%s", msg)
		}
		return a
	}
	slot := func(name string, d *konfidencev1.ArtifactDeployment) slotResult {
		return slotResult{outcome: adopted, name: name, deployment: d}
	}
	read := func(component string) ResolvedArtifact {
		return ResolvedArtifact{Ref: component + ":1.0.0", Component: component, Artifact: Artifact{Component: component}}
	}
	failed := func(component string, err error) ResolvedArtifact {
		return ResolvedArtifact{Ref: component + ":1.0.0", Component: component, Err: err}
	}
	result := konfidencev1.DeploymentResult{Name: "web"}
	created := func(n string) metav1.Condition {
		return condition(metav1.ConditionTrue, meta.SucceededReason, n+" ArtifactDeployments exist")
	}

	for _, tc := range []struct {
		name      string
		artifacts []ResolvedArtifact
		slots     map[string]slotResult
		want      summaryView
	}{{
		name:      "all ready",
		artifacts: []ResolvedArtifact{read("a"), read("b")},
		slots:     map[string]slotResult{"a": slot("a-1", ad(true, false, "", "", result)), "b": slot("b-1", ad(true, false, "", ""))},
		want: summaryView{Created: created("2"), Ready: condition(metav1.ConditionTrue, meta.SucceededReason, "2/2 artifacts ready"),
			ReadyCount: 2, Results: map[string][]konfidencev1.DeploymentResult{"a": {result}}},
	}, {
		name:      "one on its way, one failing in Flux",
		artifacts: []ResolvedArtifact{read("a"), read("b"), read("c")},
		slots: map[string]slotResult{"a": slot("a-1", ad(true, false, "", "")), "b": slot("b-1", ad(false, false, "", "")),
			"c": slot("c-1", ad(false, false, "InstallFailed", "chart does not render"))},
		want: summaryView{Created: created("3"),
			Ready:       condition(metav1.ConditionFalse, "InstallFailed", "1/3 artifacts ready; waiting for b-1; c-1: InstallFailed: chart does not render"),
			Progressing: "1/3 artifacts ready; waiting for b-1; c-1: InstallFailed: chart does not render",
			ReadyCount:  1, NotReady: 2},
	}, {
		name:      "every waiting one stalled",
		artifacts: []ResolvedArtifact{read("a"), read("b")},
		slots:     map[string]slotResult{"a": slot("a-1", ad(true, false, "", "")), "b": slot("b-1", ad(false, true, "InstallFailed", "no chart"))},
		want: summaryView{Created: created("2"), Outcome: "InstallFailed: 1/2 artifacts ready; waiting for b-1: InstallFailed: no chart",
			Stalled: true, ReadyCount: 1, Failed: 1},
	}, {
		name:      "an artifact refused for good",
		artifacts: []ResolvedArtifact{read("a"), failed("b", fromOCM(ocm.ErrManifestMissing))},
		slots:     map[string]slotResult{"a": slot("a-1", ad(true, false, "", ""))},
		want: summaryView{Created: condition(metav1.ConditionFalse, string(ocm.ReasonManifestMissing), "b:1.0.0: ArtifactManifestMissing"),
			Outcome: "ArtifactManifestMissing: b:1.0.0: ArtifactManifestMissing", Stalled: true, ReadyCount: 1, Failed: 1},
	}, {
		name:      "an artifact to retry",
		artifacts: []ResolvedArtifact{read("a"), failed("b", fromOCM(ocm.ErrUnavailable))},
		slots:     map[string]slotResult{"a": slot("a-1", ad(true, false, "", ""))},
		want: summaryView{Created: condition(metav1.ConditionFalse, string(ocm.ReasonUnavailable), "b:1.0.0: RegistryUnavailable"),
			Outcome: "RegistryUnavailable: b:1.0.0: RegistryUnavailable", ReadyCount: 1, Failed: 1},
	}, {
		name:      "an error no step classified",
		artifacts: []ResolvedArtifact{failed("a", errors.New("boom"))},
		want: summaryView{Created: condition(metav1.ConditionFalse, meta.ReconciliationFailedReason, "a:1.0.0: boom"),
			Outcome: meta.ReconciliationFailedReason + ": a:1.0.0: boom", Failed: 1},
	}, {
		name:      "a slot given up on for collisions",
		artifacts: []ResolvedArtifact{read("a")},
		slots:     map[string]slotResult{"a": {outcome: collisionLimit, name: "a-9", message: "a-9 is taken"}},
		want: summaryView{
			Created: condition(metav1.ConditionFalse, konfidencev1.HashCollisionLimitExceededReason, "gave up after 5 collision salts: a-9 is taken"),
			Outcome: konfidencev1.HashCollisionLimitExceededReason + ": gave up after 5 collision salts: a-9 is taken", Stalled: true, Failed: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, viewOf(summarize(tc.artifacts, tc.slots))); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
		})
	}
}
