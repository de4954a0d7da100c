package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// BenchmarkShards runs the memory benchmark's landscape sharded as Flux's sharding guide shards its controllers:
// each of shards namespaces holds the landscape with its ArtifactDeployments labelled sharding.fluxcd.io/key=shardN,
// and one binary per shard runs with --watch-label-selector 'sharding.fluxcd.io/key in (shardN)'. First one shard
// converges alone (one instance's throughput), then all shards at once in new namespaces; each phase ends when
// every ArtifactDeployment of it is Ready with Flux's status written (playFlux). Then every ArtifactDeployment is
// reconciled again (a change of the Flux deployer's ConfigMap requeues them in every shard) and the shards' writes
// are counted from their own client metrics. Reported: each shard's memory (the largest of the shards), the
// aggregate throughput against the single instance's, the steady-state writes, and in each phase the cores the
// API server, the shards and the benchmark itself kept busy, which share the machine. Run with -benchtime=1x.
func BenchmarkShards(b *testing.B) {
	for _, s := range []struct {
		shards int
		l      landscape
	}{{3, landscape{100, 10, 10}}, {3, landscape{300, 10, 10}}, {3, landscape{1000, 10, 10}}} {
		b.Run(fmt.Sprintf("%dx%s", s.shards, s.l), func(b *testing.B) { benchmarkShards(b, s.shards, s.l) })
	}
}

// shard is one operator instance of BenchmarkShards and the namespace of its ArtifactDeployments.
type shard struct {
	key, namespace string
	process        *controlplane.Process
	metricsAddr    string
	watch          *watcher
}

func benchmarkShards(b *testing.B, shards int, l landscape) {
	env, kubeconfig, bin, vectors := binaryBench(b, l)
	for b.Loop() {
		// The shard that runs alone has a key of its own: its ArtifactDeployments, deleted with the instance that
		// would tear them down stopped, stay behind with their finalizers, and no shard of the second phase is to
		// see them.
		alone := runShards(b, env, kubeconfig, bin, []string{"alone"}, l, vectors)
		stopShards(alone.shards)
		for _, s := range alone.shards {
			deleteAll(b, env, s.namespace)
		}
		keys := make([]string, shards)
		for i := range keys {
			keys[i] = "shard" + strconv.Itoa(i+1)
		}
		together := runShards(b, env, kubeconfig, bin, keys, l, vectors)
		steadyWrites := requeueEveryArtifact(b, env, together.shards, l.total())
		var largest memory
		for _, s := range together.shards {
			// BENCH_HEAPPROFILE=heap.pb.gz keeps each shard's heap profile, as heap.pb.gz.shardN.
			profile := os.Getenv("BENCH_HEAPPROFILE")
			if profile != "" {
				profile += "." + s.key
			}
			if m := measureMemory(b, s.process, s.metricsAddr, profile); m.peakRSS > largest.peakRSS {
				largest = m
			}
		}
		etcdBytes, etcdObjects := storage(b, env)
		// The second phase's objects stay: the API server ends with the benchmark, and a deletion of each shard's
		// ArtifactDeployments at once (10,000 at 3x1000x10) outlasts the API server's request timeout.
		stopShards(together.shards)

		b.ReportMetric(float64(shards*l.total()), "artifacts")
		b.ReportMetric(etcdBytes/(1<<20), "etcd-MiB")
		b.ReportMetric(etcdObjects, "etcd-objects")
		largest.report(b, l.total())
		single := float64(l.total()) / alone.took.Seconds()
		aggregate := float64(shards*l.total()) / together.took.Seconds()
		b.ReportMetric(single, "single-artifacts/s")
		b.ReportMetric(aggregate, "aggregate-artifacts/s")
		b.ReportMetric(aggregate/single, "throughput-ratio")
		b.ReportMetric(steadyWrites, "steady-writes")
		alone.cpu.report(b, "single", alone.took)
		together.cpu.report(b, "aggregate", together.took)
		b.ReportMetric(together.took.Seconds(), "operator-s")
	}
}

// phase is one run of runShards, with the CPU its processes used meanwhile, in seconds.
type phase struct {
	shards []*shard
	took   time.Duration
	cpu    cpuTimes
}

// cpuTimes is CPU time, in seconds, of the processes that share the machine in a phase: the one API server, the
// operator's processes, and the benchmark's own (its watchers and playFlux).
type cpuTimes struct{ apiserver, operator, bench float64 }

// report gives each as cores busy on average over the phase, named after it.
func (c cpuTimes) report(b *testing.B, name string, took time.Duration) {
	b.ReportMetric(c.apiserver/took.Seconds(), name+"-apiserver-cores")
	b.ReportMetric(c.operator/took.Seconds(), name+"-operator-cores")
	b.ReportMetric(c.bench/took.Seconds(), name+"-bench-cores")
}

// runShards creates the landscape in one namespace per shard key, starts the shards' binaries at once, and waits
// until every ArtifactDeployment of every shard has reported and, after playFlux, is Ready.
func runShards(b *testing.B, env *testenv.Env, kubeconfig, bin string, keys []string, l landscape, vectors []vector) phase {
	b.Helper()
	ctx := context.Background()
	var ph phase
	for _, key := range keys {
		s := &shard{key: key, namespace: namespace(b, env, "shard-")}
		s.watch = watch(b, env, s.namespace)
		if err := createLandscape(ctx, labelling(env.Client, s.key), s.namespace, l, vectors); err != nil {
			b.Fatal(err)
		}
		ph.shards = append(ph.shards, s)
	}
	before := cpuTimes{apiserver: apiserverCPU(b, env), bench: ownCPU(b)}
	start := time.Now()
	for _, s := range ph.shards {
		s.process, s.metricsAddr = startBinary(b, kubeconfig, bin,
			fmt.Sprintf("--watch-label-selector=%s in (%s)", konfidencev1.ShardKeyLabel, s.key))
	}
	errs := make(chan error, len(ph.shards))
	for _, s := range ph.shards {
		go func() { errs <- s.converge(b, env.Client, start, l) }()
	}
	for range ph.shards {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	ph.took = time.Since(start)
	ph.cpu = cpuTimes{apiserver: apiserverCPU(b, env) - before.apiserver, bench: ownCPU(b) - before.bench}
	for _, s := range ph.shards {
		ph.cpu.operator += scrapeSum(b, s.metricsAddr, "process_cpu_seconds_total", "")
	}
	return ph
}

// ownCPU is the CPU time the benchmark's process has used, in seconds.
func ownCPU(t testing.TB) float64 {
	t.Helper()
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		t.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()).Seconds()
}

// converge waits until the shard's ArtifactDeployments have all reported, plays Flux's controllers on their Flux
// objects, and waits until all are Ready.
func (s *shard) converge(b *testing.B, c client.Client, start time.Time, l landscape) error {
	done := func(check func(state) error) func(state) error {
		return func(st state) error {
			select {
			case <-s.process.Exited():
				return fmt.Errorf("fluxdeployer of %s exited: %s", s.key, s.process.Tail(20))
			default:
			}
			return check(st)
		}
	}
	if _, err := s.watch.waitUntil(b, start, shardTimeout(l), l.artifacts, done(func(st state) error {
		if st.reported < l.total() || st.helmRepositories < l.total() || st.helmReleases < l.total() {
			return fmt.Errorf("%s: %d/%d ArtifactDeployments reported, %d HelmRepositories, %d HelmReleases", s.key, st.reported, l.total(), st.helmRepositories, st.helmReleases)
		}
		return nil
	})); err != nil {
		return err
	}
	if err := playFlux(context.Background(), c, s.namespace); err != nil {
		return err
	}
	_, err := s.watch.waitUntil(b, start, shardTimeout(l), l.artifacts, done(func(st state) error {
		if st.ready < l.total() {
			return fmt.Errorf("%s: %d/%d ArtifactDeployments Ready", s.key, st.ready, l.total())
		}
		return nil
	}))
	return err
}

// shardTimeout bounds one phase of a shard of landscape l: 0.3 s per ArtifactDeployment of the shard, 40 minutes at
// least. Three shards of 10,000 took 36 to 40 minutes to converge together, the API server being their bottleneck.
func shardTimeout(l landscape) time.Duration {
	return max(2*convergeTimeout, time.Duration(l.total())*300*time.Millisecond)
}

// labelling is c, with the shard key label set on every object it creates.
func labelling(c client.Client, key string) client.Client {
	return labellingClient{Client: c, key: key}
}

type labellingClient struct {
	client.Client
	key string
}

func (c labellingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[konfidencev1.ShardKeyLabel] = c.key
	obj.SetLabels(labels)
	return c.Client.Create(ctx, obj, opts...)
}

// requeueEveryArtifact changes the Flux deployer's ConfigMap (to the defaults it had), which requeues every
// ArtifactDeployment in every shard, waits until each shard has reconciled all of its own and is idle, and returns
// the shards' writes meanwhile: their API requests other than GET, events included.
func requeueEveryArtifact(b *testing.B, env *testenv.Env, shards []*shard, perShard int) float64 {
	b.Helper()
	before := make([]float64, len(shards))
	reconciled := make([]float64, len(shards))
	for i, s := range shards {
		before[i] = settledWrites(b, s)
		reconciled[i] = scrapeSum(b, s.metricsAddr, "controller_runtime_reconcile_total", `controller="fluxdeployer"`)
	}
	createDeployerConfig(b, env)
	writes := 0.0
	for i, s := range shards {
		testenv.Eventually(b, convergeTimeout, func() error {
			got := scrapeSum(b, s.metricsAddr, "controller_runtime_reconcile_total", `controller="fluxdeployer"`)
			busy := scrapeSum(b, s.metricsAddr, "workqueue_depth", `name="fluxdeployer"`) +
				scrapeSum(b, s.metricsAddr, "controller_runtime_active_workers", `controller="fluxdeployer"`)
			if got < reconciled[i]+float64(perShard) || busy > 0 {
				return fmt.Errorf("%s: %v of %v ArtifactDeployments reconciled again, %v queued or reconciling", s.key, got-reconciled[i], perShard, busy)
			}
			return nil
		})
		writes += writesOfProcess(b, s.metricsAddr) - before[i]
	}
	if err := env.Client.Delete(context.Background(), deployerConfig()); err != nil {
		b.Fatal(err)
	}
	return writes
}

// settledWrites waits until the shard's binary has sent nothing for settleWindow, and returns its writes: the
// events of the Ready transitions go out from client-go's event broadcaster after the statuses that report them.
func settledWrites(b *testing.B, s *shard) float64 {
	b.Helper()
	const settleWindow = 5 * time.Second
	last, since := writesOfProcess(b, s.metricsAddr), time.Now()
	testenv.Eventually(b, convergeTimeout, func() error {
		if now := writesOfProcess(b, s.metricsAddr); now != last {
			last, since = now, time.Now()
		}
		if time.Since(since) < settleWindow {
			return fmt.Errorf("%s: a write less than %s ago", s.key, settleWindow)
		}
		return nil
	})
	return last
}

// writesOfProcess is the number of API requests other than GET the binary's client has sent
// (client-go's rest_client_requests_total).
func writesOfProcess(t testing.TB, addr string) float64 {
	t.Helper()
	return scrapeSum(t, addr, "rest_client_requests_total", "") - scrapeSum(t, addr, "rest_client_requests_total", `method="GET"`)
}

// stopShards stops the shards' binaries and their watches.
func stopShards(shards []*shard) {
	for _, s := range shards {
		s.process.Stop()
		s.watch.stop()
	}
}

// scrapeSum sums the series of a metric on the binary's Prometheus endpoint whose labels contain label (all
// series when label is empty).
func scrapeSum(t testing.TB, addr, name, label string) float64 {
	t.Helper()
	return sumSeries(t, getLocal(t, addr, "/metrics"), name, label)
}

// sumSeries sums the values of the series of metric name whose labels contain label in a Prometheus text
// exposition.
func sumSeries(t testing.TB, metrics []byte, name, label string) float64 {
	t.Helper()
	sum := 0.0
	for line := range strings.Lines(string(metrics)) {
		series, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || (series != name && !strings.HasPrefix(series, name+"{")) || !strings.Contains(series, label) {
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric %s: %v", series, err)
		}
		sum += f
	}
	return sum
}

// storage is what the API server reports of its etcd: the database's size (apiserver_storage_size_bytes, the file
// with its free pages) and the objects it stores (apiserver_resource_objects, every resource), both polled every
// 30 s.
func storage(t testing.TB, env *testenv.Env) (bytes, objects float64) {
	t.Helper()
	metrics := apiserverMetrics(t, env)
	return sumSeries(t, metrics, "apiserver_storage_size_bytes", ""), sumSeries(t, metrics, "apiserver_resource_objects", "")
}

// apiserverCPU is the CPU time the API server has used, in seconds.
func apiserverCPU(t testing.TB, env *testenv.Env) float64 {
	t.Helper()
	return sumSeries(t, apiserverMetrics(t, env), "process_cpu_seconds_total", "")
}

// apiserverMetrics is the API server's Prometheus exposition.
func apiserverMetrics(t testing.TB, env *testenv.Env) []byte {
	t.Helper()
	clients, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := clients.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return metrics
}
