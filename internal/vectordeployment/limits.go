package vectordeployment

import (
	"fmt"
	"strings"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// checkLimits refuses an artifact that the API server would refuse as an ArtifactDeployment: created anyway, it
// would fail on every retry and keep the VectorDeployment Reconciling. The refusal stalls the artifact alone, like
// one the registry reader refused, until the vector or the cluster changes. The limits are the CRD's
// (api/v1alpha1).
func checkLimits(a Artifact) error {
	var v limitViolations
	v.length("component name", a.Component, 1, konfidencev1.MaxComponentNameLength)
	v.length("component version", a.Version, 1, konfidencev1.MaxComponentVersionLength)
	v.length("manifest type", a.Manifest.Type, 1, konfidencev1.MaxManifestTypeLength)
	v.count("resources", len(a.Resources), konfidencev1.MaxResources)
	for _, r := range a.Resources {
		v.length("resource name", r.Name, 1, konfidencev1.MaxResourceNameLength)
		v.length("type of resource "+r.Name, r.Type, 1, konfidencev1.MaxResourceTypeLength)
	}
	v.count("task manifests", len(a.Tasks), konfidencev1.MaxTaskManifests)
	for _, t := range a.Tasks {
		v.length("task name", t.Name, 1, konfidencev1.MaxTaskNameLength)
		v.length("type of task "+t.Name, t.Type, 1, konfidencev1.MaxTaskTypeLength)
		v.count("dependencies of task "+t.Name, len(t.DependsOn), konfidencev1.MaxTaskDependencies)
		for _, d := range t.DependsOn {
			v.length("dependency of task "+t.Name, d, 0, konfidencev1.MaxTaskDependencyLength)
		}
	}
	if len(v) == 0 {
		return nil
	}
	return outcome.Stallingf(konfidencev1.ArtifactLimitsExceededReason, "no ArtifactDeployment can hold %s:%s: %s",
		shorten(a.Component), shorten(a.Version), v)
}

// limitViolations collects what breaks a limit, each value shortened so the message stays readable.
type limitViolations []string

func (v limitViolations) String() string { return joinBounded(v, "; ") }

// maxListed bounds a message listing parts of an input: hostile input may break a rule thousands of times, and a
// condition message longer than the API allows would keep the whole status from being written.
const maxListed = 5

func joinBounded(items []string, sep string) string {
	if len(items) <= maxListed {
		return strings.Join(items, sep)
	}
	return fmt.Sprintf("%s%sand %d more", strings.Join(items[:maxListed], sep), sep, len(items)-maxListed)
}

func (v *limitViolations) length(what, value string, minLen, maxLen int) {
	if n := len(value); n < minLen || n > maxLen {
		*v = append(*v, fmt.Sprintf("%s %q has %d bytes, the API allows %d to %d", what, shorten(value), n, minLen, maxLen))
	}
}

func (v *limitViolations) count(what string, n, maxItems int) {
	if n > maxItems {
		*v = append(*v, fmt.Sprintf("%d %s, the API allows %d", n, what, maxItems))
	}
}

// shorten keeps the head of a long value: the message names it, and must not grow with hostile input.
func shorten(s string) string {
	const keep = 64
	if len(s) <= keep {
		return s
	}
	return strings.ToValidUTF8(s[:keep], "") + "…"
}
