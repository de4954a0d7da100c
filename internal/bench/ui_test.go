package bench

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// BenchmarkUI measures `fluxdeployer ui` as users run it, its own process, on a landscape the operator binary
// converged (100 VectorDeployments of 10 artifacts: 1,000 ArtifactDeployments, 2,000 Flux objects, Flux played
// as in BenchmarkMemory): the time from its start to the first page, the median time to serve the overview, a
// VectorDeployment's page and an ArtifactDeployment's page (20 requests each), its peak RSS, and the time from an
// ArtifactDeployment turning not Ready (its HelmRelease failing, the operator passing that on) to the open page's
// live stream carrying it. Run with -benchtime=1x.
func BenchmarkUI(b *testing.B) {
	l := landscape{vectorDeployments: 100, artifacts: 10, distinct: 10}
	env, kubeconfig, bin, vectors := binaryBench(b, l)
	for b.Loop() {
		ns := namespace(b, env, "ui-")
		w := watch(b, env, ns)
		startBinary(b, kubeconfig, bin)
		start := time.Now()
		for i := range l.vectorDeployments {
			testenv.CreateVectorDeployment(b, env.Client, ns, fmt.Sprintf("vd-%d", i), vectorOf(vectors, i).ref)
		}
		w.waitFor(b, start, 2*convergeTimeout, l.artifacts, operatorDone(l))
		if err := playFlux(context.Background(), env.Client, ns); err != nil {
			b.Fatal(err)
		}
		w.waitFor(b, start, 2*convergeTimeout, l.artifacts, func(s state) error {
			if s.ready < l.total() {
				return fmt.Errorf("%d/%d ArtifactDeployments Ready", s.ready, l.total())
			}
			return nil
		})
		w.stop()

		addr := testenv.FreeAddr(b)
		uiStart := time.Now()
		p, err := controlplane.StartProcess(kubeconfig, nil, bin, "ui", "-A", "--addr", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Stop)
		firstPage := waitServed(b, p, "http://"+addr+"/", uiStart)

		vd := &konfidencev1.VectorDeployment{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "vd-1"}, vd); err != nil {
			b.Fatal(err)
		}
		adName := vd.Status.ResultingArtifactDeployments[slices.Sorted(maps.Keys(vd.Status.ResultingArtifactDeployments))[0]].Name
		overview := medianGet(b, addr, "/")
		vdPage := medianGet(b, addr, "/vd/"+ns+"/vd-1")
		adPage := medianGet(b, addr, "/ad/"+ns+"/"+adName)
		live := liveLatency(b, env, "http://"+addr, ns, adName)
		rss := procStatus(b, p.PID())
		p.Stop()

		b.ReportMetric(float64(l.total()), "artifacts")
		b.ReportMetric(firstPage.Seconds(), "first-page-s")
		b.ReportMetric(float64(overview)/float64(time.Millisecond), "overview-ms")
		b.ReportMetric(float64(vdPage)/float64(time.Millisecond), "vd-page-ms")
		b.ReportMetric(float64(adPage)/float64(time.Millisecond), "ad-page-ms")
		b.ReportMetric(float64(live)/float64(time.Millisecond), "live-ms")
		b.ReportMetric(float64(rss["VmHWM"])/1024, "peak-rss-MiB")
		deleteAll(b, env, ns)
	}
}

// waitServed waits until the view serves page and returns how long that took from start.
func waitServed(b *testing.B, p *controlplane.Process, page string, start time.Time) time.Duration {
	b.Helper()
	for time.Since(start) < 5*time.Minute {
		select {
		case <-p.Exited():
			b.Fatalf("fluxdeployer ui exited: %s", p.Tail(20))
		default:
		}
		resp, err := http.Get(page) //nolint:noctx // a local endpoint of a process this benchmark runs
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("fluxdeployer ui did not serve %s: %s", page, p.Tail(20))
	return 0
}

// medianGet is the median time of 20 requests of the view's page path, each read to its end.
func medianGet(b *testing.B, addr, path string) time.Duration {
	b.Helper()
	took := make([]time.Duration, 20)
	for i := range took {
		start := time.Now()
		body := getLocal(b, addr, path)
		took[i] = time.Since(start)
		if !strings.Contains(string(body), "</html>") {
			b.Fatalf("%s: not a whole page", path)
		}
	}
	slices.Sort(took)
	return took[len(took)/2]
}

// liveLatency opens the live stream of the ArtifactDeployment's page, makes its HelmRelease fail as helm-controller
// would report it, and returns the time from the ArtifactDeployment's Ready turning False in the API server (the
// operator's doing) to the stream carrying the failed page.
func liveLatency(b *testing.B, env *testenv.Env, base, ns, adName string) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/live?page="+url.QueryEscape("/ad/"+ns+"/"+adName), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	shown := make(chan time.Time, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			// The page's badge leaves ready: failed, or progressing while the operator retries.
			if line := sc.Text(); strings.Contains(line, `id="state"`) && !strings.Contains(line, `class="badge ready"`) {
				shown <- time.Now()
				return
			}
		}
	}()
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: adName}}
	if err := testenv.UpdateFluxStatus(ctx, env.Client, hr, nil, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse,
		Reason: "UpgradeFailed", Message: "Helm upgrade failed: the benchmark broke it"}); err != nil {
		b.Fatal(err)
	}
	var changed time.Time
	ad := &konfidencev1.ArtifactDeployment{}
	for changed.IsZero() {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: adName}, ad); err != nil {
			b.Fatal(err)
		}
		if conditions.IsFalse(ad, konfidencev1.ReadyCondition) {
			changed = time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case at := <-shown:
		return max(at.Sub(changed), 0)
	case <-ctx.Done():
		b.Fatal("the live stream never showed the failed ArtifactDeployment")
	}
	return 0
}
