package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// The controllers' names, as controller-runtime labels their metrics.
const (
	vectorDeploymentController = "vectordeployment"
	fluxDeployerController     = "fluxdeployer"
)

// TestSteadyStateWritesNothing converges a small landscape, then has every object reconciled again twice: by a
// new manager (its informers' initial lists enqueue every VectorDeployment and ArtifactDeployment, as after a
// restart or a leader change; the process's OCM client, and with it its cache, is the same), and by a change of the
// Flux deployer's ConfigMap, which requeues every ArtifactDeployment. Neither may write to the API server, emit
// an event or ask the registry anything.
func TestSteadyStateWritesNothing(t *testing.T) {
	env := testenv.Start(t, controlplane.FluxCRDDirs()...)
	reg := ocmtest.NewRegistry(t)
	l := landscape{vectorDeployments: 4, artifacts: 3, distinct: 2}
	resolver := ocm.NewClient(ocm.Options{})
	ns, _ := converge(t, env, reg, l, resolver)

	steady := steadyState(t, env, reg, l, resolver, ns)
	if steady.writes != 0 || steady.events != 0 || steady.registry != 0 {
		t.Errorf("steady state: %d writes, %d events, %d registry requests, want none (requests: %q)",
			steady.writes, steady.events, steady.registry, steady.requests)
	}
	t.Logf("steady state: %d reads from the API server for %d VectorDeployments and %d ArtifactDeployments, reconciled twice",
		steady.reads, l.vectorDeployments, l.total())
}

// converge runs an operator until it has converged the landscape in a new namespace and is idle, and stops it. It
// returns the namespace and the operator's requests.
func converge(t testing.TB, env *testenv.Env, reg *ocmtest.Registry, l landscape, resolver *ocm.Client) (string, requestCounts) {
	t.Helper()
	vectors := l.publish(t, reg)
	ns := namespace(t, env, "steady-")
	w := watch(t, env, ns)
	defer w.stop()
	op := startOperator(t, env, resolver, concurrency())
	defer op.stop()
	start := time.Now()
	for i := range l.vectorDeployments {
		testenv.CreateVectorDeployment(t, env.Client, ns, fmt.Sprintf("vd-%d", i), vectorOf(vectors, i).ref)
	}
	w.waitFor(t, start, convergeTimeout, l.artifacts, operatorDone(l))
	waitIdle(t)
	return ns, countRequests(op.requests.Take(), op.requests.Conflicts())
}

// steadyCounts are the requests of a steady-state pass.
type steadyCounts struct {
	requestCounts
	registry int64
	requests []string
}

// steadyState starts a new operator on a converged landscape and reconciles every object twice (see
// TestSteadyStateWritesNothing), and returns what that cost.
func steadyState(t testing.TB, env *testenv.Env, reg *ocmtest.Registry, l landscape, resolver *ocm.Client, ns string) steadyCounts {
	t.Helper()
	registryBefore := reg.Requests()
	vdBefore, fdBefore := reconciles(t, vectorDeploymentController), reconciles(t, fluxDeployerController)
	op := startOperator(t, env, resolver, concurrency())
	defer op.stop()
	waitReconciled(t, vectorDeploymentController, vdBefore+float64(l.vectorDeployments))
	waitReconciled(t, fluxDeployerController, fdBefore+float64(l.total()))

	// The Flux deployer's configuration changes (to the defaults it had): every ArtifactDeployment is requeued.
	fdBefore = reconciles(t, fluxDeployerController)
	createDeployerConfig(t, env)
	waitReconciled(t, fluxDeployerController, fdBefore+float64(l.total()))
	waitIdle(t)
	requests := op.requests.Take()
	return steadyCounts{requestCounts: countRequests(requests, op.requests.Conflicts()), registry: reg.Requests() - registryBefore, requests: writesOf(requests)}
}

// createDeployerConfig creates the Flux deployer's ConfigMap with the defaults it had without one: every
// ArtifactDeployment is requeued, and none has anything to change.
func createDeployerConfig(t testing.TB, env *testenv.Env) {
	t.Helper()
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fluxdeployer-system"}},
		deployerConfig(),
	} {
		if err := env.Client.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// deployerConfig is the Flux deployer's ConfigMap, empty.
func deployerConfig() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "flux-deployer-configuration", Namespace: "fluxdeployer-system"}}
}

func writesOf(requests []string) []string {
	var out []string
	for _, req := range requests {
		if !strings.HasPrefix(req, http.MethodGet+" ") {
			out = append(out, req)
		}
	}
	return out
}

// reconciles is the number of reconciles the controller has run in this process (controller-runtime's
// controller_runtime_reconcile_total, whatever the result).
func reconciles(t testing.TB, controller string) float64 {
	t.Helper()
	return sumMetric(t, "controller_runtime_reconcile_total", "controller", controller)
}

// sumMetric sums the series of a metric of the controller-runtime registry whose label has the value.
func sumMetric(t testing.TB, name, label, value string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabel(m, label, value) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

func waitReconciled(t testing.TB, controller string, want float64) {
	t.Helper()
	testenv.Eventually(t, convergeTimeout, func() error {
		if got := reconciles(t, controller); got < want {
			return fmt.Errorf("%s: %v reconciles, want %v", controller, got, want)
		}
		return nil
	})
}

// waitIdle waits until neither controller has work queued or under way.
func waitIdle(t testing.TB) {
	t.Helper()
	testenv.Eventually(t, convergeTimeout, func() error {
		for _, c := range []string{vectorDeploymentController, fluxDeployerController} {
			if depth, active := sumMetric(t, "workqueue_depth", "name", c), sumMetric(t, "controller_runtime_active_workers", "controller", c); depth+active > 0 {
				return fmt.Errorf("%s: %v queued, %v reconciling", c, depth, active)
			}
		}
		return nil
	})
}
