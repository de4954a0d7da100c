package vectordeployment

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
)

var (
	namesBuilt = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fluxdeployer_artifactdeployment_names_built_total",
		Help: "ArtifactDeployment names computed from an artifact's identity and collision count.",
	})
	creations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fluxdeployer_artifactdeployment_creations_total",
		Help: "ArtifactDeployments created by the VectorDeployment reconciler.",
	})
	adoptions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fluxdeployer_artifactdeployment_adoptions_total",
		Help: "Existing ArtifactDeployments a VectorDeployment became an owner of (reuse, or recovery of a resync).",
	})
	collisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fluxdeployer_artifactdeployment_hash_collisions_total",
		Help: "ArtifactDeployment names found taken by a different artifact, by outcome: recovered (the next salt is " +
			"tried) or limit_exceeded (the slot gave up after the maximum number of salts).",
	}, []string{"outcome"})
	collisionsRecovered     = collisions.WithLabelValues("recovered")
	collisionsLimitExceeded = collisions.WithLabelValues("limit_exceeded")

	artifactStates = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fluxdeployer_vectordeployment_artifacts",
		Help: "Artifacts of a VectorDeployment by state: ready (its ArtifactDeployment is Ready), not_ready (on its " +
			"way) or failed (unreadable, unnameable, stalled, or colliding beyond the limit).",
	}, []string{"namespace", "name", "state"})
)

func init() {
	metrics.Registry.MustRegister(namesBuilt, creations, adoptions, collisions, artifactStates)
	metrics.Registry.MustRegister(ocm.Collectors()...)
}

// artifactCounts are the artifacts of one VectorDeployment by state.
type artifactCounts struct{ ready, notReady, failed int }

func recordArtifacts(key types.NamespacedName, c artifactCounts) {
	artifactStates.WithLabelValues(key.Namespace, key.Name, "ready").Set(float64(c.ready))
	artifactStates.WithLabelValues(key.Namespace, key.Name, "not_ready").Set(float64(c.notReady))
	artifactStates.WithLabelValues(key.Namespace, key.Name, "failed").Set(float64(c.failed))
}

// forgetArtifacts deletes the series of a VectorDeployment that is gone.
func forgetArtifacts(key types.NamespacedName) {
	artifactStates.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "name": key.Name})
}
