package vectordeployment

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	creations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fluxdeployer_artifactdeployment_creations_total",
		Help: "ArtifactDeployments created by the VectorDeployment reconciler.",
	})
	adoptions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fluxdeployer_artifactdeployment_adoptions_total",
		Help: "Existing ArtifactDeployments a VectorDeployment became an owner of (reuse, or recovery of a resync).",
	})
	collisions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fluxdeployer_artifactdeployment_hash_collisions_total",
		Help: "ArtifactDeployment names found taken by a different artifact.",
	})
)

func init() {
	metrics.Registry.MustRegister(creations, adoptions, collisions)
}
