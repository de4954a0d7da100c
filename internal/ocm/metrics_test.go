package ocm_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// TestRegistryRequestsAreTimed: every request that reaches a registry is counted by code and observed by the
// latency histogram, so the dashboard's request rate and latency describe the same requests.
func TestRegistryRequestsAreTimed(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	artifact := ocmtest.Artifact("acme.org/artifacts/timed", "1.0.0", "cloud.konfidence.flux.helm", true)
	reg.Push(t, "", artifact, ocmtest.Vector(vectorName, "1.0.0", artifact))
	metrics := prometheus.NewPedanticRegistry()
	metrics.MustRegister(ocm.Collectors()...)

	countsBefore, timedBefore := registryTraffic(t, metrics)
	servedBefore := reg.Requests()
	if _, err := ocm.NewClient(ocm.Options{}).ResolveVector(context.Background(), reg.Ref("", vectorName, "1.0.0"), ocm.Read{}); err != nil {
		t.Fatal(err)
	}
	served := reg.Requests() - servedBefore
	counts, timed := registryTraffic(t, metrics)
	if served == 0 {
		t.Fatal("resolving a vector sent no request to the registry")
	}
	if got := counts - countsBefore; got != uint64(served) {
		t.Errorf("fluxdeployer_registry_requests_total grew by %d, the registry served %d", got, served)
	}
	if got := timed - timedBefore; got != uint64(served) {
		t.Errorf("fluxdeployer_registry_request_duration_seconds observed %d requests, the registry served %d", got, served)
	}
}

// registryTraffic gathers the requests counted over every code and the observations of the latency histogram.
func registryTraffic(t *testing.T, g prometheus.Gatherer) (counted, timed uint64) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "fluxdeployer_registry_requests_total":
				counted += uint64(m.GetCounter().GetValue())
			case "fluxdeployer_registry_request_duration_seconds":
				timed += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return counted, timed
}
