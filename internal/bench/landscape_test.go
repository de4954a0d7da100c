package bench

import (
	"fmt"
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

const (
	helmType = "cloud.konfidence.flux.helm"
	// chartRef is where every benchmark artifact's chart lives; nothing fetches it, since no Flux controller runs.
	chartRef = "ghcr.io/stefanprodan/charts/podinfo:6.9.1"
)

// landscape is what a benchmark deploys: VectorDeployments of vectors with artifacts each. distinct vectors are
// published and shared round-robin by the VectorDeployments; the artifacts do not allow reuse, so every
// VectorDeployment gets ArtifactDeployments of its own, as in the landscapes docs/performance.md reports.
type landscape struct {
	vectorDeployments, artifacts, distinct int
}

func (l landscape) String() string { return fmt.Sprintf("%dx%d", l.vectorDeployments, l.artifacts) }

// total is the number of ArtifactDeployments the landscape converges to.
func (l landscape) total() int { return l.vectorDeployments * l.artifacts }

// vector is one published vector with its artifacts.
type vector struct {
	ref       string
	artifacts []ocmtest.ComponentVersion
}

// publish pushes the landscape's distinct vectors into reg.
func (l landscape) publish(t testing.TB, reg *ocmtest.Registry) []vector {
	t.Helper()
	vectors := make([]vector, l.distinct)
	for v := range vectors {
		for a := range l.artifacts {
			vectors[v].artifacts = append(vectors[v].artifacts,
				ocmtest.Artifact(fmt.Sprintf("acme.org/artifacts/v%d-app%d", v, a), "1.0.0", helmType, false))
		}
		name := fmt.Sprintf("acme.org/vectors/landscape%d", v)
		reg.Push(t, "", vectors[v].artifacts...)
		reg.Push(t, "", ocmtest.Vector(name, "1.0.0", vectors[v].artifacts...))
		vectors[v].ref = reg.Ref("", name, "1.0.0")
	}
	return vectors
}

// vectorOf is the vector VectorDeployment i deploys.
func vectorOf(vectors []vector, i int) vector { return vectors[i%len(vectors)] }
