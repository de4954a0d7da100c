package vectordeployment

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// BenchmarkReconcile100x10 measures a cold start: a fresh reconciler (empty OCM cache) brings 100
// VectorDeployments of 10 artifacts each (10 vectors, each shared by 10 VectorDeployments; half the artifacts
// reusable) to ArtifactDeploymentsCreated on the real API server. It reports API-server requests (informers'
// watches aside) and registry requests per artifact slot. Run it with -benchtime=1x: one iteration takes seconds.
func BenchmarkReconcile100x10(b *testing.B) {
	const vectors, perVector, artifactsPerVector = 10, 10, 10
	reg := ocmtest.NewRegistry(b)
	var refs []string
	for v := range vectors {
		var artifacts []ocmtest.ComponentVersion
		for a := range artifactsPerVector {
			artifacts = append(artifacts, ocmtest.Artifact(fmt.Sprintf("acme.org/artifacts/v%d-app%d", v, a), "1.0.0", helmType, a%2 == 0))
		}
		refs = append(refs, pushVector(b, reg, fmt.Sprintf("acme.org/vectors/shop%d", v), artifacts...))
	}
	slots := float64(vectors * perVector * artifactsPerVector)
	var apiRequests, registryRequests int64
	for b.Loop() {
		b.StopTimer()
		ns := newNamespace(b)
		var api testenv.RequestRecorder
		registryBefore := reg.Requests()
		b.StartTimer()

		stop := startManager(b, managerOptions{resolver: ocm.NewClient(ocm.Options{}), requests: &api})
		for v, ref := range refs {
			for i := range perVector {
				createVectorDeployment(b, ns, fmt.Sprintf("shop%d-%d", v, i), ref)
			}
		}
		waitAllCreated(b, ns, vectors*perVector)
		stop()

		apiRequests += int64(len(api.Take()))
		registryRequests += reg.Requests() - registryBefore
	}
	b.ReportMetric(float64(apiRequests)/float64(b.N)/slots, "api-requests/artifact")
	b.ReportMetric(float64(registryRequests)/float64(b.N)/slots, "registry-requests/artifact")
}

func waitAllCreated(b *testing.B, namespace string, want int) {
	testenv.Eventually(b, 5*time.Minute, func() error {
		list := &konfidencev1.VectorDeploymentList{}
		if err := env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
			return err
		}
		done := 0
		for i := range list.Items {
			if conditions.IsTrue(&list.Items[i], konfidencev1.ArtifactDeploymentsCreatedCondition) {
				done++
			}
		}
		if done < want {
			return fmt.Errorf("%d of %d VectorDeployments have their ArtifactDeployments", done, want)
		}
		return nil
	})
}
