package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// TestRoleGrantsOnlyWhatTheOperatorUses runs the operator as its ServiceAccount, with exactly config/rbac's
// rights, through a scenario that exercises every code path that talks to the API server (creating, adopting
// and salting ArtifactDeployments, building and observing Flux objects, pull Secrets, deployment results,
// suspend, resume and reconcile requests, leader election, events), records every request it makes, and fails
// on any rule of config/rbac/role.yaml that grants a verb no request used, and on any request refused.
func TestRoleGrantsOnlyWhatTheOperatorUses(t *testing.T) {
	s := startOperatorAs(t, true)
	s.run(t, "tenant")
	s.assertNoRefusal(t)

	used := s.recorder.used()
	var unused []string
	for _, grant := range grantedVerbs(t) {
		if !used[grant] {
			unused = append(unused, grant.String())
		}
	}
	if len(unused) > 0 {
		t.Errorf("config/rbac grants verbs the operator never used (narrow the kubebuilder markers):\n%s\nused: %v",
			strings.Join(unused, "\n"), used)
	}
}

// TestWatchOneNamespaceNeedsOnlyARoleBinding: with --watch-all-namespaces=false the operator watches and reads only
// its own namespace, so the ClusterRole can be bound with a RoleBinding there instead of a ClusterRoleBinding: the
// same scenario succeeds without a single refused request.
func TestWatchOneNamespaceNeedsOnlyARoleBinding(t *testing.T) {
	s := startOperatorAs(t, false)
	s.run(t, controlplane.OperatorNamespace)
	s.assertNoRefusal(t)
}

// operatorScenario is an API server with config/default installed and the operator's manager running as its
// ServiceAccount, every request recorded.
type operatorScenario struct {
	env      *testenv.Env
	recorder *verbRecorder
}

// startOperatorAs starts the API server and the operator. With allNamespaces false, the operator watches only its
// own namespace and its ClusterRole is bound there by a RoleBinding only.
func startOperatorAs(t *testing.T, allNamespaces bool) *operatorScenario {
	t.Helper()
	ctx := context.Background()
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	if err := controlplane.InstallOperator(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
	if !allNamespaces {
		namespacedBinding(t, env.Client)
	}
	kubeconfig, err := env.ServiceAccountKubeconfig(ctx, controlplane.OperatorNamespace, controlplane.OperatorServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	s := &operatorScenario{env: env, recorder: &verbRecorder{}}
	t.Setenv("RUNTIME_NAMESPACE", controlplane.OperatorNamespace)
	o := parseRunOptions(t, "--metrics-addr=0", "--health-addr=0", "--enable-leader-election",
		"--leader-election-retry-period=1s", fmt.Sprintf("--watch-all-namespaces=%t", allNamespaces))
	o.reuseControllerNames = true
	mgr, err := newManager(s.recorder.wrap(cfg), o)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(t, mgr)
	return s
}

// namespacedBinding replaces config/rbac's ClusterRoleBinding by a RoleBinding of the same ClusterRole in the
// operator's namespace.
func namespacedBinding(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fluxdeployer"}}
	if err := c.Delete(ctx, crb); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: controlplane.OperatorNamespace, Name: "fluxdeployer-cluster-rules"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fluxdeployer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: controlplane.OperatorNamespace,
			Name: controlplane.OperatorServiceAccount}},
	}
	if err := c.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
}

// run deploys a vector of a reusable Helm chart and a per-instance Kustomize bundle in namespace ns, with the
// Flux controllers' status writes played by the test, and operates it as a platform team would.
func (s *operatorScenario) run(t *testing.T, ns string) {
	ctx := context.Background()
	c := s.env.Client
	if ns != controlplane.OperatorNamespace {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	reg := ocmtest.NewRegistry(t)
	chart := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3", "cloud.konfidence.flux.helm", true)
	bundle := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", "cloud.konfidence.flux.kustomize", false)
	bundle.Resources[1] = ocmtest.BundleResource("0.4.0", "registry.example.com/bundles/config:0.4.0")
	reg.Push(t, "", chart, bundle, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", chart, bundle))

	// The deployer's configuration names a pull Secret, which exists in the namespace.
	create(t, c,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: controlplane.OperatorNamespace, Name: "flux-deployer-configuration"},
			Data: map[string]string{"authenticationSecretRefs": "ghcr.io: pull-secret\n"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull-secret"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}})
	// Another artifact already holds the chart's name: the VectorDeployment salts it (a status write).
	unsalted, _, err := naming.ArtifactDeploymentName(chart.Name, chart.Version, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	create(t, c, &konfidencev1.ArtifactDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: unsalted, Annotations: map[string]string{
			konfidencev1.ArtifactComponentAnnotation: "acme.org/artifacts/squatter", konfidencev1.ArtifactVersionAnnotation: "1.2.3",
			konfidencev1.ArtifactHashAnnotation: unsalted[strings.LastIndex(unsalted, "-")+1:],
		}},
		Spec: konfidencev1.ArtifactDeploymentSpec{
			Manifest:  konfidencev1.ArtifactManifest{Type: "cloud.konfidence.other", AllowReuse: true},
			Component: konfidencev1.Component{Name: "acme.org/artifacts/squatter", Version: "1.2.3"},
		},
	})

	vd := testenv.CreateVectorDeployment(t, c, ns, "shop", reg.Ref("", "acme.org/vectors/shop", "1.0.0"))
	var ads []*konfidencev1.ArtifactDeployment
	testenv.Eventually(t, time.Minute, func() error {
		var err error
		ads, err = ownedArtifactDeployments(ctx, c, vd)
		if err == nil && len(ads) != 2 {
			err = fmt.Errorf("%d ArtifactDeployments of %s, want 2", len(ads), vd.Name)
		}
		return err
	})
	for _, ad := range ads {
		s.playFlux(t, ad)
	}
	waitFor(t, c, vd, func() error {
		if !conditions.IsReady(vd) {
			return fmt.Errorf("VectorDeployment not Ready: %+v", vd.Status.Conditions)
		}
		return nil
	})

	// A second VectorDeployment of the vector adopts the reusable chart.
	second := testenv.CreateVectorDeployment(t, c, ns, "shop-2", reg.Ref("", "acme.org/vectors/shop", "1.0.0"))
	waitFor(t, c, second, func() error {
		if !conditions.IsTrue(second, konfidencev1.ArtifactDeploymentsCreatedCondition) {
			return fmt.Errorf("ArtifactDeploymentsCreated: %+v", conditions.Get(second, konfidencev1.ArtifactDeploymentsCreatedCondition))
		}
		return nil
	})

	// Suspend, a reconcile request, resume: each reaches the Flux objects.
	ad := ads[0]
	for _, step := range []map[string]any{
		{"spec": map[string]any{"suspend": true}},
		{"metadata": map[string]any{"annotations": map[string]any{meta.ReconcileRequestAnnotation: "now"}}},
		{"spec": map[string]any{"suspend": false}},
	} {
		patch, _ := json.Marshal(step)
		if err := c.Patch(ctx, ad, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, c, ad, func() error {
		if ad.Status.LastHandledReconcileAt != "now" {
			return fmt.Errorf("reconcile request not handled: %q", ad.Status.LastHandledReconcileAt)
		}
		return nil
	})
	// Two changes of the configuration update every Flux object twice: the second, identical event of each is
	// a patch of the first's count.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: controlplane.OperatorNamespace, Name: "flux-deployer-configuration"}}
	for _, interval := range []string{"5m", "10m", "5m", "10m"} {
		patch := fmt.Sprintf(`{"data":{"interval":%q}}`, interval)
		if err := c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
		hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ads[0].Name}}
		if ads[0].Spec.Manifest.Type != "cloud.konfidence.flux.helm" {
			hr.Name = ads[1].Name
		}
		waitFor(t, c, hr, func() error {
			if got := hr.Spec.Interval.Duration.String(); got != map[string]string{"5m": "5m0s", "10m": "10m0s"}[interval] {
				return fmt.Errorf("HelmRelease interval %s, want %s", got, interval)
			}
			return nil
		})
	}
	// Leader election renews its Lease every retry period (1s).
	time.Sleep(3 * time.Second)
}

// playFlux does what Flux's controllers would for an ArtifactDeployment's objects once the deployer created them:
// report them Ready, create the HelmChart of a HelmRepository, and render a Service that is a deployment result.
func (s *operatorScenario) playFlux(t *testing.T, ad *konfidencev1.ArtifactDeployment) {
	t.Helper()
	c := s.env.Client
	if ad.Spec.Manifest.Type == "cloud.konfidence.flux.helm" {
		create(t, c, &sourcev1.HelmChart{
			ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Namespace + "-" + ad.Name, Labels: map[string]string{
				"helm.toolkit.fluxcd.io/name": ad.Name, "helm.toolkit.fluxcd.io/namespace": ad.Namespace}},
			Spec: sourcev1.HelmChartSpec{Chart: "podinfo", Version: "6.9.1", Interval: metav1.Duration{Duration: time.Minute},
				SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: ad.Name}},
		})
	}
	s.replayFlux(t, ad)
	create(t, c, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Name, Labels: map[string]string{konfidencev1.ArtifactDeploymentLabel: ad.Name},
			Annotations: map[string]string{konfidencev1.DeploymentResultLabel: ""}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	})
}

// replayFlux reports an ArtifactDeployment's Flux objects Ready for their current generation, as Flux's
// controllers do after every change of their spec.
func (s *operatorScenario) replayFlux(t *testing.T, ad *konfidencev1.ArtifactDeployment) {
	t.Helper()
	ready := metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason, Message: "done"}
	var objs []fluxStatusObject
	if ad.Spec.Manifest.Type == "cloud.konfidence.flux.helm" {
		released := ready
		released.Type = helmv2.ReleasedCondition
		chart := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Namespace + "-" + ad.Name}}
		objs = []fluxStatusObject{{chart, []metav1.Condition{ready}}, {&helmv2.HelmRelease{}, []metav1.Condition{ready, released}}}
	} else {
		healthy := ready
		healthy.Type = meta.HealthyCondition
		objs = []fluxStatusObject{{&sourcev1.OCIRepository{}, []metav1.Condition{ready}}, {&kustomizev1.Kustomization{}, []metav1.Condition{ready, healthy}}}
	}
	for _, o := range objs {
		if o.obj.GetName() == "" {
			o.obj.SetNamespace(ad.Namespace)
			o.obj.SetName(ad.Name)
		}
		setFluxStatus(t, s.env.Client, o.obj, o.conditions)
	}
}

type fluxStatusObject struct {
	obj        client.Object
	conditions []metav1.Condition
}

// setFluxStatus writes conditions for the object's current generation, waiting until the deployer created it.
func setFluxStatus(t *testing.T, c client.Client, obj client.Object, conds []metav1.Condition) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		setter := obj.(conditions.Setter)
		for _, cond := range conds {
			cond.ObservedGeneration = obj.GetGeneration()
			conditions.Set(setter, &cond)
		}
		switch o := obj.(type) {
		case *sourcev1.HelmChart:
			o.Status.ObservedGeneration = o.Generation
		case *sourcev1.OCIRepository:
			o.Status.ObservedGeneration = o.Generation
		case *helmv2.HelmRelease:
			o.Status.ObservedGeneration = o.Generation
		case *kustomizev1.Kustomization:
			o.Status.ObservedGeneration = o.Generation
		}
		return c.Status().Update(context.Background(), obj)
	})
}

func ownedArtifactDeployments(ctx context.Context, c client.Client, vd *konfidencev1.VectorDeployment) ([]*konfidencev1.ArtifactDeployment, error) {
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := c.List(ctx, list, client.InNamespace(vd.Namespace)); err != nil {
		return nil, err
	}
	var owned []*konfidencev1.ArtifactDeployment
	for i := range list.Items {
		if slices.ContainsFunc(list.Items[i].OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == vd.UID }) {
			owned = append(owned, &list.Items[i])
		}
	}
	return owned, nil
}

func waitFor(t *testing.T, c client.Client, obj client.Object, check func() error) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		return check()
	})
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

func (s *operatorScenario) assertNoRefusal(t *testing.T) {
	t.Helper()
	if refused := s.recorder.refusedRequests(); len(refused) > 0 {
		t.Errorf("the API server refused the operator:\n%s", strings.Join(refused, "\n"))
	}
}

// grant is one verb on one resource (with its subresource) of one API group, as an RBAC rule names it.
type grant struct{ group, resource, verb string }

func (g grant) String() string { return fmt.Sprintf("%s %s.%s", g.verb, g.resource, g.group) }

// grantedVerbs reads every rule of config/rbac/role.yaml (the ClusterRole and the Role).
func grantedVerbs(t *testing.T) []grant {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := controlplane.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	var grants []grant
	for _, u := range objs {
		role := &rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, role); err != nil {
			t.Fatal(err)
		}
		for _, rule := range role.Rules {
			if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
				t.Fatalf("%s %s: rules with resourceNames or nonResourceURLs are not checked here: %+v", u.GetKind(), u.GetName(), rule)
			}
			for _, g := range rule.APIGroups {
				for _, r := range rule.Resources {
					for _, v := range rule.Verbs {
						grants = append(grants, grant{g, r, v})
					}
				}
			}
		}
	}
	return grants
}

// verbRecorder records the RBAC verb of every request that passes through a rest.Config, the verbs the API server
// authorizes along with it, and the requests it refused.
type verbRecorder struct {
	mu      sync.Mutex
	verbs   map[grant]bool
	refused []string
}

func (r *verbRecorder) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTrip(func(req *http.Request) (*http.Response, error) {
			body := requestBody(req)
			resp, err := next.RoundTrip(req)
			r.record(req, body, resp)
			return resp, err
		})
	})
	return cfg
}

func (r *verbRecorder) record(req *http.Request, body []byte, resp *http.Response) {
	group, resource, named, ok := parseResourcePath(req.URL.Path)
	if !ok {
		return // discovery and other non-resource requests
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.verbs == nil {
		r.verbs = map[grant]bool{}
	}
	if resp != nil && resp.StatusCode == http.StatusForbidden {
		r.refused = append(r.refused, req.Method+" "+req.URL.String())
	}
	for _, g := range authorizedVerbs(req, group, resource, named, body) {
		r.verbs[g] = true
	}
}

// authorizedVerbs are the verbs the API server checks for a request: the request's own, list for a watch, create for a
// server-side apply (it creates a missing object), and for an object that gets owner references, delete on it
// and update on the finalizers of every owner whose deletion it blocks (the OwnerReferencesPermissionEnforcement
// admission plugin).
func authorizedVerbs(req *http.Request, group, resource string, named bool, body []byte) []grant {
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[req.Method]
	switch {
	case req.Method == http.MethodGet && named:
		verb = "get"
	case req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true":
		verb = "watch"
	case req.Method == http.MethodGet:
		verb = "list"
	case req.Method == http.MethodDelete && !named:
		verb = "deletecollection"
	}
	grants := []grant{{group, resource, verb}}
	if verb == "watch" {
		// An informer's first list is a streaming watch where the API server serves one (WatchList); where it
		// does not, client-go falls back to a LIST.
		grants = append(grants, grant{group, resource, "list"})
	}
	if strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
		grants = append(grants, grant{group, resource, "create"})
	}
	var obj struct {
		Metadata struct {
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &obj) == nil && len(obj.Metadata.OwnerReferences) > 0 && !strings.Contains(resource, "/") {
		grants = append(grants, grant{group, resource, "delete"})
		for _, ref := range obj.Metadata.OwnerReferences {
			if ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				ownerGroup, _, _ := strings.Cut(ref.APIVersion, "/")
				grants = append(grants, grant{ownerGroup, strings.ToLower(ref.Kind) + "s/finalizers", "update"})
			}
		}
	}
	return grants
}

// parseResourcePath splits /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE]] and its /apis/GROUP/VERSION form.
func parseResourcePath(path string) (group, resource string, named, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return "", "", false, false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource = parts[0]
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	return group, resource, len(parts) >= 2, true
}

func requestBody(req *http.Request) []byte {
	if req.GetBody == nil {
		return nil
	}
	rc, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	return bytes.TrimSpace(b)
}

func (r *verbRecorder) used() map[grant]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.verbs)
}

func (r *verbRecorder) refusedRequests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.refused)
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
