package ocm

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The registry traffic and the cache's effect on it, for every Client of the process. They are plain Prometheus
// collectors: whoever serves metrics registers Collectors() (the operator, in controller-runtime's registry).
var (
	registryRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fluxdeployer_registry_requests_total",
		Help: "HTTP requests sent to OCI registries, by response code (\"error\" when no response came).",
	}, []string{"code"})
	// One series set for all registries and codes: a label per host or code would multiply the buckets.
	registryDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fluxdeployer_registry_request_duration_seconds",
		Help:    "Time from sending an HTTP request to an OCI registry to its response's headers, or to the error when none came.",
		Buckets: prometheus.DefBuckets,
	})
	cacheLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fluxdeployer_registry_cache_lookups_total",
		Help: "Lookups of resolved component versions in the in-memory cache, by cache (vector, artifact) and result (hit, miss).",
	}, []string{"cache", "result"})
	cacheBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fluxdeployer_registry_cache_bytes",
		Help: "Bytes the in-memory caches of component versions retain, as they count them, by cache (vector, artifact, verification).",
	}, []string{"cache"})
)

// Collectors returns the package's metrics, for registration by the process that serves them.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{registryRequests, registryDuration, cacheLookups, cacheBytes}
}

// countingTransport counts and times each request that leaves for a registry, retries included: that is the load
// the registry sees.
type countingTransport struct{ next http.RoundTripper }

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	registryDuration.Observe(time.Since(start).Seconds())
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	registryRequests.WithLabelValues(code).Inc()
	return resp, err
}

// countLookup records a cache lookup's result.
func countLookup(cache string, hit bool) {
	result := "miss"
	if hit {
		result = "hit"
	}
	cacheLookups.WithLabelValues(cache, result).Inc()
}
