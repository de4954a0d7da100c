package vectordeployment

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	testenv.Main(m, func(e *testenv.Env) { env = e })
}

const (
	helmType      = "cloud.konfidence.flux.helm"
	kustomizeType = "cloud.konfidence.flux.kustomize"
)

// managerOptions tune a test manager.
type managerOptions struct {
	hashLength int
	resolver   *ocm.Client
	// requests, when set, records the manager's requests to the API server.
	requests *testenv.RequestRecorder
	// requeueDependency is the reconciler's RequeueDependency.
	requeueDependency time.Duration
	// maxArtifacts is the reconciler's maxArtifacts; zero means konfidencev1.MaxArtifactsPerVector.
	maxArtifacts int
	// credentials are the reconciler's registry credentials.
	credentials RegistryCredentials
	// trust is the reconciler's operator-wide verification policy.
	trust TrustDefault
	// reconciles, when set, counts the manager's reconciles by VectorDeployment.
	reconciles *reconcileCounter
	// queue, when set, observes the controller's work queue (see settle).
	queue *testenv.Queue
	// finalizers are the reconciler's Finalizers: the types a deployer of the process handles.
	finalizers map[string]string
	// bypassInterval is the reconciler's bound of reads around the cache; zero means operating.MinBypassInterval.
	bypassInterval time.Duration
}

// reconcileCounter counts reconciles by VectorDeployment.
type reconcileCounter struct {
	mu sync.Mutex
	n  map[client.ObjectKey]int
}

func (c *reconcileCounter) add(key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[client.ObjectKey]int{}
	}
	c.n[key]++
}

// of returns how often vd was reconciled.
func (c *reconcileCounter) of(vd *konfidencev1.VectorDeployment) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[client.ObjectKeyFromObject(vd)]
}

// startManager runs the VectorDeployment reconciler in its own manager against the shared API server, as a
// replica of the operator would, and returns a function that stops it.
func startManager(t testing.TB, o managerOptions) (stop func()) {
	t.Helper()
	if o.hashLength == 0 {
		o.hashLength = naming.HashLength
	}
	if o.resolver == nil {
		o.resolver = ocm.NewClient(ocm.Options{})
	}
	if o.maxArtifacts == 0 {
		o.maxArtifacts = konfidencev1.MaxArtifactsPerVector
	}
	if o.bypassInterval == 0 {
		o.bypassInterval = operating.MinBypassInterval
	}
	cfg := env.Config
	if o.requests != nil {
		cfg = o.requests.Wrap(cfg)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	recorder, err := events.NewRecorder(mgr, ctrl.Log, "", "vectordeployment-controller")
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		OCM:               o.resolver,
		Credentials:       o.credentials,
		Recorder:          recorder,
		hashLength:        o.hashLength,
		maxArtifacts:      o.maxArtifacts,
		RequeueDependency: o.requeueDependency,
		TrustDefault:      o.trust,
		Finalizers:        o.finalizers,
		bypass:            operating.CacheBypass{Interval: o.bypassInterval},
	}
	if o.reconciles != nil {
		r.reconciled = o.reconciles.add
	}
	// Several managers live in one test binary, so the controller name repeats.
	shared := operating.Options{Concurrent: 2, SkipNameValidation: true}
	opts := shared.ControllerOptions()
	if o.queue != nil {
		opts.NewQueue = o.queue.New
	}
	if err := r.setupWithManager(mgr, shared, opts); err != nil {
		t.Fatal(err)
	}
	return testenv.RunManager(t, mgr)
}

func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "vd-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func createVectorDeployment(t testing.TB, namespace, name, vector string) *konfidencev1.VectorDeployment {
	t.Helper()
	return testenv.CreateVectorDeployment(t, env.Client, namespace, name, vector)
}

func getVD(t testing.TB, vd *konfidencev1.VectorDeployment) *konfidencev1.VectorDeployment {
	t.Helper()
	got := &konfidencev1.VectorDeployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(vd), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func listADs(t testing.TB, namespace string) map[string]*konfidencev1.ArtifactDeployment {
	t.Helper()
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	out := map[string]*konfidencev1.ArtifactDeployment{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// waitForCondition waits until the VectorDeployment's condition has the status and reason.
func waitForCondition(t testing.TB, vd *konfidencev1.VectorDeployment, condType string, status metav1.ConditionStatus, reason string) *konfidencev1.VectorDeployment {
	t.Helper()
	var got *konfidencev1.VectorDeployment
	testenv.Eventually(t, 30*time.Second, func() error {
		got = getVD(t, vd)
		c := conditions.Get(got, condType)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("%s: condition %s = %+v, want %s/%s", vd.Name, condType, c, status, reason)
		}
		return nil
	})
	return got
}

// eventMessages returns the messages of the events with a reason recorded for an object.
func eventMessages(t testing.TB, namespace, objectName, reason string) []string {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == objectName && e.Reason == reason {
			msgs = append(msgs, e.Message)
		}
	}
	return msgs
}

func waitForEvent(t testing.TB, namespace, objectName, reason string, contains ...string) string {
	t.Helper()
	var found string
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, m := range eventMessages(t, namespace, objectName, reason) {
			ok := true
			for _, c := range contains {
				ok = ok && strings.Contains(m, c)
			}
			if ok {
				found = m
				return nil
			}
		}
		list := &corev1.EventList{}
		_ = env.Client.List(context.Background(), list, client.InNamespace(namespace))
		var seen []string
		for _, e := range list.Items {
			seen = append(seen, e.InvolvedObject.Name+"/"+e.Reason+": "+e.Message)
		}
		return fmt.Errorf("no %s event on %s containing %q; events: %q", reason, objectName, contains, seen)
	})
	return found
}

// markReady sets an ArtifactDeployment's Ready condition as the Flux deployer would.
func markReady(t testing.TB, ad *konfidencev1.ArtifactDeployment, results ...konfidencev1.DeploymentResult) {
	t.Helper()
	conditions.MarkTrue(ad, konfidencev1.ReadyCondition, "Succeeded", "deployed")
	ad.Status.DeploymentResult = results
	if err := env.Client.Status().Update(context.Background(), ad); err != nil {
		t.Fatal(err)
	}
}

func pushVector(t testing.TB, reg *ocmtest.Registry, vector string, artifacts ...ocmtest.ComponentVersion) string {
	t.Helper()
	reg.Push(t, "", artifacts...)
	reg.Push(t, "", ocmtest.Vector(vector, "1.0.0", artifacts...))
	return reg.Ref("", vector, "1.0.0")
}

// expectArtifacts checks the fluxdeployer_vectordeployment_artifacts gauge of vd.
func expectArtifacts(t testing.TB, vd *konfidencev1.VectorDeployment, want artifactCounts) {
	t.Helper()
	for state, n := range map[string]int{"ready": want.ready, "not_ready": want.notReady, "failed": want.failed} {
		if got := testutil.ToFloat64(artifactStates.WithLabelValues(vd.Namespace, vd.Name, state)); got != float64(n) {
			t.Errorf("fluxdeployer_vectordeployment_artifacts{state=%q} of %s = %v, want %d", state, vd.Name, got, n)
		}
	}
}

// counts are a VectorDeployment's status counts, as the Artifacts printer column shows them.
type counts struct {
	Artifacts, Ready int32
	ReadySummary     string
}

func countsOf(vd *konfidencev1.VectorDeployment) counts {
	return counts{vd.Status.Artifacts, vd.Status.Ready, vd.Status.ReadySummary}
}
