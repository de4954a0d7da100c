package fluxdeployer

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
}

func newHarness(t *testing.T) *harness {
	env := testenv.Start(t, fluxCRDs)
	for _, add := range []func(*runtime.Scheme) error{sourcev1.AddToScheme, helmv2.AddToScheme, kustomizev1.AddToScheme} {
		if err := add(env.Scheme); err != nil {
			t.Fatal(err)
		}
	}
	h := &harness{env: env, claims: indexedCache(t, env)}
	h.namespace(t, configNamespace)
	return h
}

// indexedCache runs an informer cache of ArtifactDeployments with the deployer's index until the test ends.
func indexedCache(t *testing.T, env *testenv.Env) client.Reader {
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := indexWorkloadNames(ctx, c); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }() // returns when the test ends
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return c
}

// startDeployer runs the deployer in a manager, as the binary does, with the ConfigMap configName, until the test
// ends.
func (h *harness) startDeployer(t *testing.T, cfg *rest.Config, configName string) *Reconciler {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 h.env.Scheme,
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
	recorder := record.NewFakeRecorder(100)
	c := h.env.Client
	return &Reconciler{
		client: c, apiReader: c, secrets: newSecretPresence(c), configReader: c, serviceReader: c, claims: h.claims,
		scheme: h.env.Scheme, recorder: recorder,
		configKey: types.NamespacedName{Namespace: configNamespace, Name: configName},
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

// setStatus writes conditions on a Flux object's status subresource as its controller would, for the object's
// current generation.
func (h *harness) setStatus(t *testing.T, obj fluxObject, conds ...metav1.Condition) {
	t.Helper()
	h.get(t, obj.GetNamespace(), obj.GetName(), obj)
	setter := obj.(conditions.Setter)
	for _, c := range conds {
		c.ObservedGeneration = obj.GetGeneration()
		c.LastTransitionTime = metav1.Now()
		conditions.Set(setter, &c)
	}
	switch o := obj.(type) {
	case *sourcev1.OCIRepository:
		o.Status.ObservedGeneration = o.Generation
	case *sourcev1.HelmChart:
		o.Status.ObservedGeneration = o.Generation
	case *helmv2.HelmRelease:
		o.Status.ObservedGeneration = o.Generation
	case *kustomizev1.Kustomization:
		o.Status.ObservedGeneration = o.Generation
	}
	if err := h.env.Client.Status().Update(context.Background(), obj); err != nil {
		t.Fatalf("status of %T %s: %v", obj, obj.GetName(), err)
	}
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

// assertCondition fails unless ad has condition t with the given status and reason.
func assertCondition(t *testing.T, ad *konfidencev1.ArtifactDeployment, condType string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := conditions.Get(ad, condType)
	if c == nil {
		t.Errorf("%s: no %s condition (conditions: %v)", ad.Name, condType, ad.Status.Conditions)
		return
	}
	if c.Status != status || c.Reason != reason {
		t.Errorf("%s: %s = %s/%s (%q), want %s/%s", ad.Name, condType, c.Status, c.Reason, c.Message, status, reason)
	}
}

// assertNoFluxObjects fails if any Flux object exists in the namespace.
func (h *harness) assertNoFluxObjects(t *testing.T, namespace string) {
	t.Helper()
	for _, list := range []client.ObjectList{&sourcev1.HelmRepositoryList{}, &sourcev1.OCIRepositoryList{}, &helmv2.HelmReleaseList{}, &kustomizev1.KustomizationList{}} {
		if err := h.env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		if n := apimeta.LenList(list); n > 0 {
			t.Errorf("%T in %s has %d items, want none", list, namespace, n)
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
