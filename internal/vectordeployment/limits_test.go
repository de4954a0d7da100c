package vectordeployment

import (
	"strings"
	"testing"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// TestCheckLimits: each limit of the CRD, just within and just beyond; a refusal is permanent, with its reason,
// and its message stays bounded however often the input breaks a limit.
func TestCheckLimits(t *testing.T) {
	within := func() Artifact {
		return Artifact{
			Component: "acme.org/" + strings.Repeat("c", konfidencev1.MaxComponentNameLength-len("acme.org/")),
			Version:   strings.Repeat("1", konfidencev1.MaxComponentVersionLength),
			Manifest:  konfidencev1.ArtifactManifest{Type: strings.Repeat("t", konfidencev1.MaxManifestTypeLength)},
			Resources: make([]konfidencev1.Resource, konfidencev1.MaxResources),
			Tasks:     make([]konfidencev1.TaskManifest, konfidencev1.MaxTaskManifests),
		}
	}
	fill := func(a *Artifact) {
		for i := range a.Resources {
			a.Resources[i] = konfidencev1.Resource{Name: strings.Repeat("r", konfidencev1.MaxResourceNameLength), Type: strings.Repeat("y", konfidencev1.MaxResourceTypeLength)}
		}
		for i := range a.Tasks {
			a.Tasks[i] = konfidencev1.TaskManifest{Name: "t", Type: strings.Repeat("y", konfidencev1.MaxTaskTypeLength),
				DependsOn: make([]string, konfidencev1.MaxTaskDependencies)}
		}
	}
	ok := within()
	fill(&ok)
	if err := checkLimits(ok); err != nil {
		t.Fatalf("an artifact at every limit was refused: %v", err)
	}
	for name, tc := range map[string]struct {
		breakIt func(*Artifact)
		says    string
	}{
		"version":       {func(a *Artifact) { a.Version += "1" }, "component version"},
		"component":     {func(a *Artifact) { a.Component += "c" }, "component name"},
		"manifest type": {func(a *Artifact) { a.Manifest.Type = "" }, "manifest type"},
		"resources":     {func(a *Artifact) { a.Resources = append(a.Resources, a.Resources[0]) }, "65 resources"},
		"resource type": {func(a *Artifact) { a.Resources[3].Type = "" }, "type of resource"},
		"tasks":         {func(a *Artifact) { a.Tasks = append(a.Tasks, a.Tasks[0]) }, "65 task manifests"},
		"task name":     {func(a *Artifact) { a.Tasks[0].Name = strings.Repeat("n", konfidencev1.MaxTaskNameLength+1) }, "task name"},
		"dependencies":  {func(a *Artifact) { a.Tasks[0].DependsOn = append(a.Tasks[0].DependsOn, "x") }, "65 dependencies of task"},
		"dependency": {func(a *Artifact) {
			a.Tasks[0].DependsOn[0] = strings.Repeat("d", konfidencev1.MaxTaskDependencyLength+1)
		}, "dependency of task"},
		"every resource": {func(a *Artifact) { a.Resources = make([]konfidencev1.Resource, 1000) }, "and 1996 more"},
	} {
		a := within()
		fill(&a)
		tc.breakIt(&a)
		err := checkLimits(a)
		if err == nil || !strings.Contains(err.Error(), tc.says) || FailureReason(err) != konfidencev1.ArtifactLimitsExceededReason || !outcome.Stalls(err) {
			t.Errorf("%s: %v, want a permanent %s saying %q", name, err, konfidencev1.ArtifactLimitsExceededReason, tc.says)
		}
		if err != nil && len(err.Error()) > 2048 {
			t.Errorf("%s: message of %d bytes", name, len(err.Error()))
		}
	}
}
