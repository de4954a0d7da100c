package bench

import (
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// Write budgets of a convergence from scratch, without Flux controllers: per artifact the ArtifactDeployment's
// creation (with its teardown finalizer), the apply of its two Flux objects and one status write; per
// VectorDeployment its finalizer and one status write, which reports every ArtifactDeployment's own status.
const (
	writesPerArtifact         = 4
	writesPerVectorDeployment = 2
)

// TestConvergenceWritesWithinBudget converges a landscape of 10 VectorDeployments of 10 artifacts with both
// reconcilers in one manager, as `fluxdeployer run` sets them up, and counts the operator's writes to the API
// server until it is converged and idle.
func TestConvergenceWritesWithinBudget(t *testing.T) {
	env := testenv.Start(t, controlplane.FluxCRDDirs()...)
	l := landscape{vectorDeployments: 10, artifacts: 10, distinct: 10}
	_, c := converge(t, env, ocmtest.NewRegistry(t), l, ocm.NewClient(ocm.Options{}))

	if got, want := c.artifactDeployments+c.fluxes, writesPerArtifact*l.total(); got > want {
		t.Errorf("%d writes to ArtifactDeployments and Flux objects for %d artifacts (%d to ArtifactDeployments), want at most %d",
			got, l.total(), c.artifactDeployments, want)
	}
	if got, want := c.vectorDeployments, writesPerVectorDeployment*l.vectorDeployments; got > want {
		t.Errorf("%d writes to %d VectorDeployments, want at most %d", got, l.vectorDeployments, want)
	}
	// A conflict is a write sent from a cached object older than what the API server holds: wasted, and at
	// 100,000 objects load on the API server. The reconcilers wait for their own writes' events instead.
	if c.conflicts != 0 {
		t.Errorf("%d writes refused as conflicts, want none", c.conflicts)
	}
	if other := c.writes - c.artifactDeployments - c.fluxes - c.vectorDeployments; other != 0 {
		t.Errorf("%d writes to other objects, want none", other)
	}
	t.Logf("%d writes (%d to ArtifactDeployments, %d to Flux objects, %d to VectorDeployments, %d refused as conflicts), %d events, %d reads",
		c.writes, c.artifactDeployments, c.fluxes, c.vectorDeployments, c.conflicts, c.events, c.reads)
}
