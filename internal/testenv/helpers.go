package testenv

import (
	"context"
	"net/http"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
)

// Eventually calls check until it returns nil, and fails the test with its last error once timeout has passed.
func Eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreeAddr returns a loopback address that nothing listened on a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := controlplane.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// slowStop is how long a manager may take to stop before RunManager records what is still running: every call
// of the reconcilers honours the manager's context, so stopping takes milliseconds.
const slowStop = 5 * time.Second

// RunManager starts a manager and stops it when the test ends, or earlier through the returned function. A manager
// that does not stop within its grace period fails the test with the goroutines that held it.
func RunManager(t testing.TB, mgr manager.Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			var err error
			var stacks string
			select {
			case err = <-done:
			case <-time.After(slowStop):
				stacks = goroutines()
				err = <-done
			}
			switch {
			case err != nil && stacks != "":
				t.Errorf("manager stopped with %v; the goroutines %s after it was asked to stop:\n%s", err, slowStop, stacks)
			case err != nil:
				t.Errorf("manager stopped with %v", err)
			case stacks != "":
				t.Logf("manager took more than %s to stop", slowStop)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// goroutines returns the stacks of every goroutine, grouped.
func goroutines() string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}

// RequestRecorder records the API requests that pass through a rest.Config as "METHOD path", except the
// long-running watches informers keep open.
type RequestRecorder struct {
	mu        sync.Mutex
	requests  []string
	conflicts []string // the requests the API server answered 409 Conflict
}

// Wrap returns a copy of cfg whose requests are recorded.
func (r *RequestRecorder) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") == "true" {
				return next.RoundTrip(req)
			}
			r.mu.Lock()
			r.requests = append(r.requests, req.Method+" "+req.URL.Path)
			r.mu.Unlock()
			resp, err := next.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusConflict {
				r.mu.Lock()
				r.conflicts = append(r.conflicts, req.Method+" "+req.URL.Path)
				r.mu.Unlock()
			}
			return resp, err
		})
	})
	return cfg
}

// Take returns the requests recorded since the last Take.
func (r *RequestRecorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.requests
	r.requests = nil
	return out
}

// Conflicts returns the requests recorded so far, Take or not, that the API server refused with 409 Conflict: a
// write sent from a cached object older than the one stored (a stale resourceVersion), or a create of a name
// taken. Each is a write wasted, and load on the API server.
func (r *RequestRecorder) Conflicts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.conflicts)
}

// Writes counts the requests among these that change something.
func Writes(requests []string) int {
	n := 0
	for _, req := range requests {
		if !strings.HasPrefix(req, http.MethodGet+" ") {
			n++
		}
	}
	return n
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// CreateVectorDeployment creates a VectorDeployment of the vector and returns it.
func CreateVectorDeployment(t testing.TB, c client.Client, namespace, name, vector string) *konfidencev1.VectorDeployment {
	t.Helper()
	vd := &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       konfidencev1.VectorDeploymentSpec{Vector: vector},
	}
	if err := c.Create(context.Background(), vd); err != nil {
		t.Fatal(err)
	}
	return vd
}
