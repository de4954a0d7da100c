package fluxdeployer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// configNamespace holds the deployer's ConfigMaps in the tests; each test names its own ConfigMap.
const configNamespace = "fluxdeployer-system"

// fluxCRDs are the Flux CRDs the tests install (see testdata/crds/README.md).
var fluxCRDs = filepath.Join("testdata", "crds")

// harness is one API server shared by the tests of this package (starting one takes seconds), with the Flux
// types in its scheme.
type harness struct {
	env *testenv.Env
	// claims is a cache with the workload-name index, as the manager's: the API server cannot answer the index.
	claims client.Reader
	// schemas are the Flux kinds' spec schemas as the API server publishes them, read once for every test.
	schemas *specSchemas
}

// The package's harness, set up once by TestMain for every test, so that any test runs alone by name too.
var (
	sharedHarness *harness
	harnessErr    error
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(env *testenv.Env) { sharedHarness, harnessErr = newHarness(env) }, fluxCRDs)
}

// testHarness returns the package's harness, failing the test when it could not be set up.
func testHarness(t testing.TB) *harness {
	t.Helper()
	if harnessErr != nil {
		t.Fatalf("setting up the harness: %v", harnessErr)
	}
	return sharedHarness
}

func newHarness(env *testenv.Env) (*harness, error) {
	for _, add := range []func(*runtime.Scheme) error{sourcev1.AddToScheme, helmv2.AddToScheme, kustomizev1.AddToScheme} {
		if err := add(env.Scheme); err != nil {
			return nil, err
		}
	}
	claims, err := indexedCache(env)
	if err != nil {
		return nil, err
	}
	schemas, err := newSpecSchemas(env.Config)
	if err != nil {
		return nil, err
	}
	h := &harness{env: env, claims: claims, schemas: schemas}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: configNamespace}}
	return h, env.Client.Create(context.Background(), ns)
}

// indexedCache runs an informer cache of ArtifactDeployments with the deployer's index for the test binary's
// lifetime.
func indexedCache(env *testenv.Env) (client.Reader, error) {
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err := indexWorkloadNames(ctx, c); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }() // runs until the test binary exits
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("cache did not sync")
	}
	return c, nil
}

// startDeployer runs the deployer in a manager, as the binary does, with the ConfigMap configName, until the test
// ends.
func (h *harness) startDeployer(t *testing.T, cfg *rest.Config, configName string) *Reconciler {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 h.env.Scheme,
		Cache:                  operating.CacheOptions(nil, "", TrimFluxStatus),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := (&Options{ConfigName: configName, ConfigNamespace: configNamespace}).setup(mgr, operating.Options{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(t, mgr)
	return r
}

// direct returns a reconciler reading straight from the API server, with the ConfigMap configName, so a test
// decides when reconciles happen and sees their effect at once.
func (h *harness) direct(configName string) (*Reconciler, *record.FakeRecorder) {
	return h.directVia(configName, h.env.Client)
}

// directVia is direct with c for every request of the reconciler but the claims (an indexed cache).
func (h *harness) directVia(configName string, c client.Client) (*Reconciler, *record.FakeRecorder) {
	recorder := record.NewFakeRecorder(100)
	return &Reconciler{
		client: c, apiReader: c, secrets: newPresence(c, "Secret"), serviceAccounts: newPresence(c, "ServiceAccount"), serviceReader: c, claims: h.claims,
		scheme: h.env.Scheme, recorder: recorder, schemas: h.schemas,
		config: &configSource{reader: c, key: types.NamespacedName{Namespace: configNamespace, Name: configName}, recorder: recorder},
	}, recorder
}

func (h *harness) namespace(t *testing.T, name string) {
	t.Helper()
	if err := h.env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := h.env.Client.Create(context.Background(), obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

func (h *harness) configMap(t *testing.T, name string, data map[string]string) {
	t.Helper()
	h.create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: configNamespace}, Data: data})
}

func (h *harness) get(t *testing.T, namespace, name string, obj client.Object) {
	t.Helper()
	if err := h.env.Client.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, obj); err != nil {
		t.Fatalf("getting %T %s/%s: %v", obj, namespace, name, err)
	}
}

// reconcile runs one reconcile of ad and returns the ArtifactDeployment as stored afterwards.
func (h *harness) reconcile(t *testing.T, r *Reconciler, ad *konfidencev1.ArtifactDeployment) (*konfidencev1.ArtifactDeployment, error) {
	t.Helper()
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)})
	got := &konfidencev1.ArtifactDeployment{}
	h.get(t, ad.Namespace, ad.Name, got)
	return got, err
}

func cond(t string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: t, Status: status, Reason: reason, Message: message}
}

// artifactDeployment returns an ArtifactDeployment with the annotations the VectorDeployment reconciler writes.
func artifactDeployment(namespace, name, manifestType string, resources ...konfidencev1.Resource) *konfidencev1.ArtifactDeployment {
	return &konfidencev1.ArtifactDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: map[string]string{
			konfidencev1.ArtifactComponentAnnotation: "acme.org/artifacts/frontend",
			konfidencev1.ArtifactVersionAnnotation:   "1.2.3+build.5",
			konfidencev1.ArtifactHashAnnotation:      "e1mvwibzp5",
		}},
		Spec: konfidencev1.ArtifactDeploymentSpec{
			Manifest:  konfidencev1.ArtifactManifest{Type: manifestType, AllowReuse: true},
			Component: konfidencev1.Component{Name: "acme.org/artifacts/frontend", Version: "1.2.3+build.5", Resources: resources},
		},
	}
}

func resource(name, resourceType, access string) konfidencev1.Resource {
	return konfidencev1.Resource{Name: name, Type: resourceType, Content: &apiextensionsv1.JSON{Raw: []byte(access)}}
}

func ociAccess(accessType, ref string) string {
	return fmt.Sprintf(`{"type":%q,"imageReference":%q}`, accessType, ref)
}

// differs returns an error with go-cmp's diff when got is not want, naming what was compared, or nil.
func differs(what string, want, got any, opts ...cmp.Option) error {
	if diff := cmp.Diff(want, got, opts...); diff != "" {
		return fmt.Errorf("%s (-want +got):\n%s", what, diff)
	}
	return nil
}

// assertFailure fails unless err is a step's failure with the reason, stalling or not.
func assertFailure(t *testing.T, err error, reason string, stalled bool) {
	t.Helper()
	var e *outcome.Error
	if !errors.As(err, &e) {
		t.Errorf("error %v is not a step's failure (outcome.Error)", err)
		return
	}
	type failure struct {
		Reason  string
		Stalled bool
	}
	if diff := cmp.Diff(failure{reason, stalled}, failure{e.Reason, e.Stalled}); diff != "" {
		t.Errorf("failure %v (-want +got):\n%s", err, diff)
	}
}

// assertCondition fails unless ad has condition t with the given status and reason.
func assertCondition(t *testing.T, ad *konfidencev1.ArtifactDeployment, condType string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := conditions.Get(ad, condType)
	if c == nil {
		t.Errorf("%s: no %s condition (conditions: %v)", ad.Name, condType, ad.Status.Conditions)
		return
	}
	type state struct {
		Status metav1.ConditionStatus
		Reason string
	}
	if diff := cmp.Diff(state{status, reason}, state{c.Status, c.Reason}); diff != "" {
		t.Errorf("%s: %s (message %q) (-want +got):\n%s", ad.Name, condType, c.Message, diff)
	}
}

// assertNoFluxObjects fails if any Flux object of a kind the deployer writes exists in the namespace.
func (h *harness) assertNoFluxObjects(t *testing.T, namespace string) {
	t.Helper()
	for _, k := range ownedFluxKinds() {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
		if err := h.env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		if n := len(list.Items); n > 0 {
			t.Errorf("%d %s in %s, want none", n, k.gvk.Kind, namespace)
		}
	}
}

// drainEvents drains the recorder: "<type> <reason> <message>" each.
func drainEvents(recorder *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func assertEvent(t *testing.T, got []string, eventType, reason string) {
	t.Helper()
	for _, e := range got {
		if strings.HasPrefix(e, eventType+" "+reason+" ") {
			return
		}
	}
	t.Errorf("no %s event with reason %s in %q", eventType, reason, got)
}
