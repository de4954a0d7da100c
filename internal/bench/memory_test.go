package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// BenchmarkMemory measures the operator binary, run as a process, on a landscape of ArtifactDeployments: the
// benchmark creates them (floorWorkers client workers, as the VectorDeployment reconciler would have; no
// VectorDeployment exists, so the VectorDeployment reconciler only caches them), then starts `fluxdeployer run`,
// which creates the two Flux objects of each and reports its status. Once every ArtifactDeployment has reported,
// the benchmark plays Flux's controllers (playFlux: the HelmCharts, and the statuses with history, inventory and
// artifact) and waits until every ArtifactDeployment is Ready. Then it reports the process's peak RSS (VmHWM of
// /proc/PID/status), its RSS then, of which its anonymous memory and the mapped binary, the Go heap in use, and
// the live heap after a garbage collection (both from the binary's metrics endpoint) per ArtifactDeployment. Run
// with -benchtime=1x.
func BenchmarkMemory(b *testing.B) {
	for _, l := range []landscape{{100, 10, 10}, {300, 10, 10}, {1000, 10, 10}} {
		b.Run(l.String(), func(b *testing.B) { benchmarkMemory(b, l) })
	}
}

func benchmarkMemory(b *testing.B, l landscape) {
	env, kubeconfig, bin, vectors := binaryBench(b, l)
	for b.Loop() {
		ns := namespace(b, env, "memory-")
		w := watch(b, env, ns)
		if err := createLandscape(context.Background(), env.Client, ns, l, vectors); err != nil {
			b.Fatal(err)
		}
		p, metricsAddr := startBinary(b, kubeconfig, bin)
		start := time.Now()
		took := w.waitFor(b, start, 2*convergeTimeout, l.artifacts, func(s state) error {
			select {
			case <-p.Exited():
				return fmt.Errorf("fluxdeployer exited: %s", p.Tail(20))
			default:
			}
			if s.reported < l.total() || s.helmRepositories < l.total() || s.helmReleases < l.total() {
				return fmt.Errorf("%d/%d ArtifactDeployments reported, %d HelmRepositories, %d HelmReleases", s.reported, l.total(), s.helmRepositories, s.helmReleases)
			}
			return nil
		})
		fluxStart := time.Now()
		if err := playFlux(context.Background(), env.Client, ns); err != nil {
			b.Fatal(err)
		}
		tookFlux := w.waitFor(b, fluxStart, 2*convergeTimeout, l.artifacts, func(s state) error {
			if s.ready < l.total() {
				return fmt.Errorf("%d/%d ArtifactDeployments Ready", s.ready, l.total())
			}
			return nil
		})
		m := measureMemory(b, p, metricsAddr, os.Getenv("BENCH_HEAPPROFILE"))
		// Reads of the API server rather than the cache: the Flux objects' spec read where the cache cannot tell
		// an object is as desired, Secrets, leader election.
		gets := scrapeSum(b, metricsAddr, "rest_client_requests_total", `method="GET"`)
		p.Stop()
		w.stop()

		b.ReportMetric(float64(l.total()), "artifacts")
		m.report(b, l.total())
		b.ReportMetric(took.Seconds(), "operator-s")
		b.ReportMetric(tookFlux.Seconds(), "flux-s")
		b.ReportMetric(gets/float64(l.total()), "gets/AD")
		deleteAll(b, env, ns)
	}
}

// binaryBench sets up a benchmark of the binary run as a process: an API server with Flux's CRDs, a kubeconfig
// of it for the process, the binary built, and the landscape's vectors published in a registry.
func binaryBench(b *testing.B, l landscape) (env *testenv.Env, kubeconfig, bin string, vectors []vector) {
	b.Helper()
	env = testenv.Start(b, controlplane.FluxCRDDirs()...)
	bin, err := controlplane.BuildFluxdeployer(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig, err = controlplane.WriteKubeconfig(b.TempDir(), "admin.kubeconfig", env.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	return env, kubeconfig, bin, l.publish(b, ocmtest.NewRegistry(b))
}

// startBinary starts `fluxdeployer run` with both reconcilers and default flags, plus args, and returns it with the
// address of its metrics endpoint.
func startBinary(t testing.TB, kubeconfig, bin string, args ...string) (*controlplane.Process, string) {
	t.Helper()
	metricsAddr := testenv.FreeAddr(t)
	p, err := controlplane.StartProcess(kubeconfig, []string{"RUNTIME_NAMESPACE=fluxdeployer-system"}, bin, append([]string{"run",
		"--metrics-addr=" + metricsAddr, "--profiling", "--health-addr=" + testenv.FreeAddr(t), "--log-level=error"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p, metricsAddr
}

// memory is what the benchmarks measure of a running binary, in bytes.
type memory struct {
	peakRSS, rss, rssFile, rssAnon float64 // VmHWM, VmRSS, RssFile, RssAnon of /proc/PID/status
	heapInUse                      float64 // go_memstats_heap_inuse_bytes: live objects and garbage not yet collected
	live                           float64 // go_memstats_heap_alloc_bytes right after a garbage collection
}

// measureMemory reads the memory of the binary p, whose metrics endpoint is addr, and saves its heap profile to
// profilePath unless that is empty.
func measureMemory(t testing.TB, p *controlplane.Process, addr, profilePath string) memory {
	t.Helper()
	status := procStatus(t, p.PID())
	m := memory{peakRSS: float64(status["VmHWM"]) * 1024, rss: float64(status["VmRSS"]) * 1024,
		rssFile: float64(status["RssFile"]) * 1024, rssAnon: float64(status["RssAnon"]) * 1024}
	m.heapInUse = scrape(t, addr, "go_memstats_heap_inuse_bytes")
	// The heap profile's gc=1 collects garbage first: what is allocated then is what the process holds.
	profile := getLocal(t, addr, "/debug/pprof/heap?gc=1")
	m.live = scrape(t, addr, "go_memstats_heap_alloc_bytes")
	if profilePath != "" {
		if err := os.WriteFile(profilePath, profile, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// report adds m to the benchmark's metrics, the heap per ArtifactDeployment of artifacts.
func (m memory) report(b *testing.B, artifacts int) {
	const mib = 1 << 20
	b.ReportMetric(m.peakRSS/mib, "rss-MiB")
	b.ReportMetric(m.rss/mib, "rss-end-MiB")
	b.ReportMetric(m.rssFile/mib, "rss-file-MiB")
	b.ReportMetric(m.rssAnon/mib, "rss-anon-MiB")
	b.ReportMetric(m.heapInUse/float64(artifacts), "heap-B/AD")
	b.ReportMetric(m.live/float64(artifacts), "live-B/AD")
}

// getLocal returns the body of path on the binary's metrics endpoint.
func getLocal(t testing.TB, addr, path string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + addr + path) //nolint:noctx // a local endpoint of a process this benchmark runs
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// procStatus reads the kB figures of /proc/PID/status.
func procStatus(t testing.TB, pid int) map[string]int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]int64{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		key, value, ok := strings.Cut(s.Text(), ":")
		if fields := strings.Fields(value); ok && len(fields) == 2 && fields[1] == "kB" {
			if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
				out[key] = n
			}
		}
	}
	return out
}

// scrape reads one unlabelled metric from the binary's Prometheus endpoint.
func scrape(t testing.TB, addr, name string) float64 {
	t.Helper()
	for line := range strings.Lines(string(getLocal(t, addr, "/metrics"))) {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in the metrics of %s", name, addr)
	return 0
}
