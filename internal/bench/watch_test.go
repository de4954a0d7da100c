package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// watcher follows one namespace through informers, so that waiting for convergence costs the API server one watch
// per kind instead of repeated lists. The floor and the operator are timed by the same watcher.
type watcher struct {
	cache     cache.Cache
	namespace string
	// stop ends the watches.
	stop func()
}

func watch(t testing.TB, env *testenv.Env, namespace string) *watcher {
	t.Helper()
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	w := &watcher{cache: c, namespace: namespace, stop: cancel}
	for _, obj := range []client.Object{&konfidencev1.VectorDeployment{}, &konfidencev1.ArtifactDeployment{}, &sourcev1.HelmRepository{}, &helmv2.HelmRelease{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("watcher cache did not sync")
	}
	return w
}

// state is what the watcher sees of a landscape.
type state struct {
	artifactDeployments, reported, ready, helmRepositories, helmReleases int
	vectorDeployments, vectorsReported                                   int
}

func (w *watcher) state(ctx context.Context, artifactsPerVector int) (state, error) {
	var s state
	ads := &konfidencev1.ArtifactDeploymentList{}
	if err := w.cache.List(ctx, ads, client.InNamespace(w.namespace), client.UnsafeDisableDeepCopy); err != nil {
		return s, err
	}
	s.artifactDeployments = len(ads.Items)
	for i := range ads.Items {
		if ad := &ads.Items[i]; ad.Status.ObservedGeneration == ad.Generation && conditions.Has(ad, konfidencev1.ReadyCondition) {
			s.reported++
		}
		if conditions.IsTrue(&ads.Items[i], konfidencev1.ReadyCondition) {
			s.ready++
		}
	}
	repos := &sourcev1.HelmRepositoryList{}
	releases := &helmv2.HelmReleaseList{}
	vds := &konfidencev1.VectorDeploymentList{}
	for _, l := range []client.ObjectList{repos, releases, vds} {
		if err := w.cache.List(ctx, l, client.InNamespace(w.namespace), client.UnsafeDisableDeepCopy); err != nil {
			return s, err
		}
	}
	s.helmRepositories, s.helmReleases, s.vectorDeployments = len(repos.Items), len(releases.Items), len(vds.Items)
	for i := range vds.Items {
		if vectorReported(&vds.Items[i], artifactsPerVector) {
			s.vectorsReported++
		}
	}
	return s, nil
}

// vectorReported: the VectorDeployment has all its ArtifactDeployments and reports each one's own status (as
// "<name>: <reason>: <message>" in its Ready message), which it can only do once every ArtifactDeployment has
// reported.
func vectorReported(vd *konfidencev1.VectorDeployment, artifacts int) bool {
	ready := conditions.Get(vd, konfidencev1.ReadyCondition)
	return vd.Status.ObservedGeneration == vd.Generation && int(vd.Status.Artifacts) == artifacts &&
		conditions.IsTrue(vd, konfidencev1.ArtifactDeploymentsCreatedCondition) &&
		ready != nil && reportedArtifacts(ready.Message) == artifacts
}

// waitFor polls the watcher until done accepts the state, and returns how long that took since start.
func (w *watcher) waitFor(t testing.TB, start time.Time, timeout time.Duration, artifactsPerVector int, done func(state) error) time.Duration {
	t.Helper()
	took, err := w.waitUntil(t, start, timeout, artifactsPerVector, done)
	if err != nil {
		t.Fatal(err)
	}
	return took
}

// waitUntil is waitFor for a goroutine of its own: it returns the last refusal of done after timeout instead of
// failing the test. The state is checked at least once, also when timeout had passed before the call, so that the
// refusal returned is always the state's own.
func (w *watcher) waitUntil(t testing.TB, start time.Time, timeout time.Duration, artifactsPerVector int, done func(state) error) (time.Duration, error) {
	ctx := context.Background()
	for {
		s, err := w.state(ctx, artifactsPerVector)
		if err == nil {
			if err = done(s); err == nil {
				return time.Since(start), nil
			}
		}
		if time.Since(start) >= timeout {
			return 0, fmt.Errorf("after %s: %w", timeout, err)
		}
		if os.Getenv("BENCH_DEBUG") != "" && time.Since(start)%time.Second < 100*time.Millisecond {
			t.Logf("%5.1fs %v", time.Since(start).Seconds(), err)
		}
		// Every check lists the landscape from the benchmark's cache and walks it: at 10,000 ArtifactDeployments
		// a watcher polling every 100 ms takes about a fifth of a core, CPU the API server and the operator would
		// otherwise have, and three shards' watchers take three times that. So the poll waits 100 ms, or a
		// hundredth of the time since start when that is longer: a time measured is then at most 1% late.
		time.Sleep(max(100*time.Millisecond, time.Since(start)/100))
	}
}

// operatorDone: every object is there, every ArtifactDeployment reported its status, every VectorDeployment
// reported its ArtifactDeployments'. The floor is timed by the same check.
func operatorDone(l landscape) func(state) error {
	return func(s state) error {
		total := l.total()
		if s.artifactDeployments < total || s.reported < total || s.helmRepositories < total || s.helmReleases < total ||
			s.vectorsReported < l.vectorDeployments {
			return fmt.Errorf("operator: %d/%d ArtifactDeployments (%d reported), %d HelmRepositories, %d HelmReleases, %d/%d VectorDeployments reported",
				s.artifactDeployments, total, s.reported, s.helmRepositories, s.helmReleases, s.vectorsReported, l.vectorDeployments)
		}
		return nil
	}
}

// reportedArtifacts counts the artifacts a VectorDeployment's Ready message accounts for: the ready ones, each
// waiting one that it names with its own reason ("2/3 artifacts ready; waiting for a-…: Progressing: …"), and the
// ones it leaves out of a long list ("…; and 5 more"), once every one listed has a reason.
func reportedArtifacts(msg string) int {
	var ready, total int
	if _, err := fmt.Sscanf(msg, "%d/%d artifacts ready", &ready, &total); err != nil {
		return 0
	}
	_, waiting, found := strings.Cut(msg, "waiting for ")
	if !found {
		return ready
	}
	for part := range strings.SplitSeq(waiting, "; ") {
		var more int
		switch {
		case strings.Contains(part, ": "):
			ready++
		case strings.HasPrefix(part, "and "):
			if _, err := fmt.Sscanf(part, "and %d more", &more); err == nil {
				ready += more
			}
		default:
			return 0 // listed without a reason: it has not reported yet
		}
	}
	return ready
}
