package bench

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/flowcontrol"
	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fluxdeployer/fluxdeployer/internal/fluxdeployer"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment"
)

// The benchmarks measure, they do not log.
func init() { ctrl.SetLogger(logr.Discard()) }

// operator is both reconcilers in one manager, set up as `fluxdeployer run` sets them up, with its requests to the
// API server recorded.
type operator struct {
	requests *testenv.RequestRecorder
	stop     func()
}

// startOperator runs the operator in this process, so that a CPU profile of the benchmark (-cpuprofile) shows
// it. resolver is shared across operators, as the process's OCM client outlives a restart of its manager.
func startOperator(t testing.TB, env *testenv.Env, resolver *ocm.Client, concurrent int) *operator {
	t.Helper()
	o := &operator{requests: &testenv.RequestRecorder{}}
	cfg := o.requests.Wrap(env.Config)
	// As `fluxdeployer run` configures its client (fluxcd/pkg/runtime/client.GetConfigOrDie): no client-side rate
	// limit toward an API server with priority and fairness, which kube-apiserver has by default.
	if enabled, err := flowcontrol.IsEnabled(context.Background(), env.Config); err != nil || !enabled {
		t.Fatalf("the API server has no priority and fairness (%v): the binary would rate-limit its client", err)
	}
	cfg.QPS, cfg.Burst = -1, -1
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  env.Scheme,
		Cache:   operating.CacheOptions(nil, "", fluxdeployer.TrimFluxStatus),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	shared := operating.Options{Concurrent: concurrent, SkipNameValidation: true}
	vd := &vectordeployment.Options{Resolver: resolver, Finalizers: fluxdeployer.TeardownFinalizers()}
	if err := vd.SetupWithManager(mgr, shared); err != nil {
		t.Fatal(err)
	}
	fd := &fluxdeployer.Options{ConfigName: "flux-deployer-configuration", ConfigNamespace: "fluxdeployer-system"}
	if err := fd.SetupWithManager(mgr, shared); err != nil {
		t.Fatal(err)
	}
	o.stop = testenv.RunManager(t, mgr)
	return o
}

// requestCounts sorts an operator's API requests by what they touch.
type requestCounts struct {
	reads, writes, events                          int
	vectorDeployments, artifactDeployments, fluxes int // writes
	// conflicts are the writes the API server refused with 409 Conflict, counted among writes too: a write sent
	// from a stale cached object, wasted.
	conflicts int
}

// countRequests sorts requests, and counts conflicts, the requests among them the API server refused as conflicts.
func countRequests(requests, conflicts []string) requestCounts {
	c := requestCounts{conflicts: len(conflicts)}
	for _, req := range requests {
		method, path, _ := strings.Cut(req, " ")
		switch {
		case method == http.MethodGet:
			c.reads++
		case strings.HasSuffix(path, "/events") || strings.Contains(path, "/events/"):
			c.events++
		default:
			c.writes++
			switch {
			case strings.Contains(path, "/vectordeployments/"):
				c.vectorDeployments++
			case strings.Contains(path, "/artifactdeployments"):
				c.artifactDeployments++
			case strings.Contains(path, "toolkit.fluxcd.io/"):
				c.fluxes++
			}
		}
	}
	return c
}

// report adds the request counts per artifact to the benchmark's metrics.
func (c requestCounts) report(b *testing.B, artifacts int) {
	per := func(n int) float64 { return float64(n) / float64(artifacts) }
	b.ReportMetric(per(c.writes), "writes/artifact")
	b.ReportMetric(per(c.events), "events/artifact")
	b.ReportMetric(per(c.reads), "gets/artifact")
	b.ReportMetric(per(c.artifactDeployments), "ad-writes/artifact")
	b.ReportMetric(per(c.fluxes), "flux-writes/artifact")
	b.ReportMetric(per(c.vectorDeployments), "vd-writes/artifact")
	b.ReportMetric(per(c.conflicts)*1000, "conflicts/1000-artifacts")
}
