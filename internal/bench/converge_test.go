package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// convergeTimeout bounds one phase of a convergence benchmark; the machines this runs on are shared and slow.
const convergeTimeout = 20 * time.Minute

// BenchmarkConverge measures, on one kube-apiserver, first the operator converging a landscape from scratch: its
// VectorDeployments are created and the operator runs until every ArtifactDeployment and Flux object exists, every
// ArtifactDeployment has reported its status and every VectorDeployment reports theirs. No Flux controller runs, so
// no ArtifactDeployment becomes Ready: what is timed is the operator's own work. Then the floor: floorWorkers client
// workers write the same end state in a new namespace with the fewest writes it takes (see floor), timed by the
// same watcher and convergence check. ns/op is the operator's time; the metrics are described in
// docs/performance.md. Run with -benchtime=1x.
func BenchmarkConverge(b *testing.B) {
	// 1x500: one large vector of 500 artifacts, resolved by one VectorDeployment.
	for _, l := range []landscape{{10, 10, 10}, {100, 10, 10}, {300, 10, 10}, {1, 500, 1}} {
		b.Run(l.String(), func(b *testing.B) { benchmarkConverge(b, l) })
	}
}

func benchmarkConverge(b *testing.B, l landscape) {
	env := testenv.Start(b, controlplane.FluxCRDDirs()...)
	reg := ocmtest.NewRegistry(b)
	vectors := l.publish(b, reg)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		ns := namespace(b, env, "operator-")
		w := watch(b, env, ns)
		registryBefore := reg.Requests()
		reg.ResetPeakConcurrency()
		b.StartTimer()
		start, cpuStart := time.Now(), processCPU(b)
		resolver := ocm.NewClient(ocm.Options{})
		op := startOperator(b, env, resolver, concurrency())
		for i := range l.vectorDeployments {
			testenv.CreateVectorDeployment(b, env.Client, ns, fmt.Sprintf("vd-%d", i), vectorOf(vectors, i).ref)
		}
		operatorTime := w.waitFor(b, start, convergeTimeout, l.artifacts, operatorDone(l))
		b.StopTimer()
		operatorCPU := processCPU(b) - cpuStart
		op.stop()
		w.stop()

		requests := op.requests.Take()
		countRequests(requests, op.requests.Conflicts()).report(b, l.total())
		if os.Getenv("BENCH_DEBUG") != "" {
			logRequestKinds(requests)
		}
		b.ReportMetric(float64(reg.Requests()-registryBefore)/float64(l.total()), "registry-requests/artifact")
		b.ReportMetric(float64(reg.PeakConcurrency()), "registry-peak-concurrency")
		b.ReportMetric(statusBytes(b, env, ns)/float64(l.total()), "vd-status-B/artifact")
		steady := steadyState(b, env, reg, l, resolver, ns)
		b.ReportMetric(float64(steady.writes+steady.events), "steady-writes")
		b.ReportMetric(float64(steady.registry), "steady-registry-requests")
		end := readEndState(b, env, ns)
		deleteAll(b, env, ns)

		floorNS := namespace(b, env, "floor-")
		w = watch(b, env, floorNS)
		start, cpuStart = time.Now(), processCPU(b)
		if err := floor(ctx, env.Client, floorNS, end); err != nil {
			b.Fatal(err)
		}
		floorTime := w.waitFor(b, start, convergeTimeout, l.artifacts, operatorDone(l))
		floorCPU := processCPU(b) - cpuStart
		w.stop()
		deleteAll(b, env, floorNS)
		b.Logf("%s: floor %s, operator %s", l, floorTime, operatorTime)

		b.ReportMetric(float64(l.total()), "artifacts")
		b.ReportMetric(floorTime.Seconds(), "floor-s")
		b.ReportMetric(operatorTime.Seconds(), "operator-s")
		b.ReportMetric(operatorTime.Seconds()/floorTime.Seconds(), "ratio")
		b.ReportMetric(float64(operatorCPU.Milliseconds())/float64(l.total()), "operator-cpu-ms/artifact")
		b.ReportMetric(float64(floorCPU.Milliseconds())/float64(l.total()), "floor-cpu-ms/artifact")
		b.StartTimer()
	}
}

// processCPU is the CPU time (user and system) this process has used: the operator's, the watcher's and, in the
// floor, its client workers'. The API server and etcd are processes of their own.
func processCPU(t testing.TB) time.Duration {
	t.Helper()
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		t.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// logRequestKinds logs how many requests of each method went to each kind of object, most first.
func logRequestKinds(requests []string) {
	counts := map[string]int{}
	for _, req := range requests {
		method, path, _ := strings.Cut(req, " ")
		parts := strings.Split(strings.Trim(path, "/"), "/")
		kind := path
		if i := slices.Index(parts, "namespaces"); i >= 0 && len(parts) > i+2 {
			kind = strings.Join(append([]string{parts[i+2]}, parts[min(len(parts), i+4):]...), "/")
		}
		counts[method+" "+kind]++
	}
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b string) int { return counts[b] - counts[a] })
	for _, k := range keys {
		fmt.Fprintf(os.Stderr, "%6d %s\n", counts[k], k) // b.Logf is cut to a few lines in a benchmark
	}
}

// concurrency is the workers per reconciler: BENCH_CONCURRENT, else the binary's default.
func concurrency() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("BENCH_CONCURRENT"), &n); err == nil && n > 0 {
		return n
	}
	return 4
}

func namespace(t testing.TB, env *testenv.Env, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// deleteAll removes what a phase created, so that the next phase's operator does not find it: no namespace
// controller runs here to empty a deleted namespace.
func deleteAll(t testing.TB, env *testenv.Env, namespace string) {
	t.Helper()
	for _, obj := range []client.Object{&konfidencev1.VectorDeployment{}, &konfidencev1.ArtifactDeployment{}, &sourcev1.HelmRepository{}, &helmv2.HelmRelease{}, &sourcev1.HelmChart{}} {
		if err := env.Client.DeleteAllOf(context.Background(), obj, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
	}
}

// statusBytes is the size of the VectorDeployments' status in the namespace, as JSON.
func statusBytes(t testing.TB, env *testenv.Env, namespace string) float64 {
	t.Helper()
	list := &konfidencev1.VectorDeploymentList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		data, err := json.Marshal(list.Items[i].Status)
		if err != nil {
			t.Fatal(err)
		}
		n += len(data)
	}
	return float64(n)
}
