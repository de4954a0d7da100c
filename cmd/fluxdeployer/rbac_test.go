package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
// suspend, resume and reconcile requests, leader election, events), reads every request it made from the API
// server's audit log, and fails on any rule of config/rbac/role.yaml that grants a verb no request used, and on
// any request refused.
func TestRoleGrantsOnlyWhatTheOperatorUses(t *testing.T) {
	s := startOperatorAs(t, true)
	s.run(t, "tenant")
	s.assertNoRefusal(t)

	used := s.usedGrants(t)
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
// ServiceAccount, every request of the operator in the API server's audit log.
type operatorScenario struct {
	env   *testenv.Env
	audit *controlplane.AuditLog
}

// operatorUser is the user the API server authenticates the operator's ServiceAccount as.
var operatorUser = "system:serviceaccount:" + controlplane.OperatorNamespace + ":" + controlplane.OperatorServiceAccount

// startOperatorAs starts the API server and the operator. With allNamespaces false, the operator watches only its
// own namespace and its ClusterRole is bound there by a RoleBinding only.
func startOperatorAs(t *testing.T, allNamespaces bool) *operatorScenario {
	t.Helper()
	ctx := context.Background()
	env, audit := testenv.StartAudited(t, operatorUser, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
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
	s := &operatorScenario{env: env, audit: audit}
	t.Setenv("RUNTIME_NAMESPACE", controlplane.OperatorNamespace)
	o := parseRunOptions(t, "--metrics-addr=0", "--health-addr=0", "--enable-leader-election",
		"--leader-election-retry-period=1s", fmt.Sprintf("--watch-all-namespaces=%t", allNamespaces))
	o.reuseControllerNames = true
	mgr, err := newManager(cfg, o)
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
	reg.Push(t, "", chart, bundle, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", chart, bundle), ocmtest.Vector("acme.org/vectors/shop", "2.0.0", chart))

	// The deployer's configuration names a pull Secret and the ServiceAccount the Flux objects run as, which
	// exist in the namespace.
	create(t, c,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: controlplane.OperatorNamespace, Name: "flux-deployer-configuration"},
			Data: map[string]string{"authenticationSecretRefs": "ghcr.io: pull-secret\n", "serviceAccountName": "flux-applier"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flux-applier"}},
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
		if ad.Spec.Manifest.Type == "cloud.konfidence.flux.helm" {
			s.playRollout(t, ad)
		}
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

	s.moveStage(t, ns, reg)

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
	// Leader election renews its Lease every retry period (1s): wait for a renewal.
	testenv.Eventually(t, time.Minute, func() error {
		events, err := s.audit.Events()
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(events, func(e controlplane.AuditEvent) bool {
			return e.Verb == "update" && e.ObjectRef != nil && e.ObjectRef.Resource == "leases"
		}) {
			return errors.New("the operator has not renewed its leader-election Lease yet")
		}
		return nil
	})
}

// moveStage runs a Stage on the vector, then moves it to the next one: the Stage creates a VectorDeployment per
// vector, its instance of the non-reusable bundle is deployed (Flux played), and the first VectorDeployment is
// deleted once the second is Ready.
func (s *operatorScenario) moveStage(t *testing.T, ns string, reg *ocmtest.Registry) {
	t.Helper()
	ctx := context.Background()
	c := s.env.Client
	st := &konfidencev1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landscape"},
		Spec: konfidencev1.StageSpec{Vector: reg.Ref("", "acme.org/vectors/shop", "1.0.0")}}
	create(t, c, st)
	var instance *konfidencev1.ArtifactDeployment
	testenv.Eventually(t, time.Minute, func() error {
		list := &konfidencev1.ArtifactDeploymentList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		for i := range list.Items {
			if list.Items[i].Annotations[konfidencev1.StageUIDAnnotation] == string(st.UID) {
				instance = &list.Items[i]
				return nil
			}
		}
		return fmt.Errorf("the Stage's instance of the bundle is not there yet")
	})
	s.playFlux(t, instance)
	waitFor(t, c, st, func() error {
		if !conditions.IsReady(st) || st.Status.ActiveVectorDeployment == "" {
			return fmt.Errorf("Stage not Ready: %+v", st.Status.Conditions)
		}
		return nil
	})
	first := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: st.Status.ActiveVectorDeployment}}
	patch := fmt.Sprintf(`{"spec":{"vector":%q}}`, reg.Ref("", "acme.org/vectors/shop", "2.0.0"))
	if err := c.Patch(ctx, st, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, st, func() error {
		if !conditions.IsReady(st) || st.Status.ActiveVectorDeployment == first.Name || st.Status.ObservedGeneration != st.Generation {
			return fmt.Errorf("Stage not moved: active %s, %+v", st.Status.ActiveVectorDeployment, st.Status.Conditions)
		}
		return nil
	})
	testenv.Eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(first), first); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VectorDeployment %s of the first vector still there (%v)", first.Name, err)
		}
		return nil
	})
}

// playFlux does what Flux's controllers would for an ArtifactDeployment's objects once the deployer created them:
// report them Ready, create the HelmChart of a HelmRepository, and render a Service that is a deployment result.
func (s *operatorScenario) playFlux(t *testing.T, ad *konfidencev1.ArtifactDeployment) {
	t.Helper()
	c := s.env.Client
	if ad.Spec.Manifest.Type == "cloud.konfidence.flux.helm" {
		create(t, c, &sourcev1.HelmChart{
			ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Namespace + "-" + ad.Name, Labels: chartLabels(t, c, ad)},
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

// playRollout does what helm-controller does while it installs ad's chart: it reports the install running and
// has rendered the chart's Deployment (whose pods do not run here). The deployer lists the workloads and their
// pods meanwhile.
func (s *operatorScenario) playRollout(t *testing.T, ad *konfidencev1.ArtifactDeployment) {
	t.Helper()
	selector := map[string]string{"app.kubernetes.io/instance": ad.Name}
	create(t, s.env.Client, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Name, Labels: map[string]string{konfidencev1.ArtifactDeploymentLabel: ad.Name}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: selector}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: selector},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1.2.3"}}},
		}},
	})
	testenv.SetFluxStatus(t, s.env.Client, &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Name}},
		metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionUnknown, Reason: meta.ProgressingReason, Message: "Running 'install' action with timeout of 5m0s"})
	testenv.Eventually(t, time.Minute, func() error {
		events, err := s.audit.Events()
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(events, func(e controlplane.AuditEvent) bool {
			return e.Verb == "list" && e.ObjectRef != nil && e.ObjectRef.Resource == "pods"
		}) {
			return errors.New("the operator has not listed the pods of the installing release yet")
		}
		return nil
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
		if err := s.env.Client.Get(context.Background(), client.ObjectKeyFromObject(chart), chart); err != nil {
			t.Fatal(err)
		}
		// helm-controller applies the HelmChart again from the template of a changed HelmRelease.
		chart.Labels = chartLabels(t, s.env.Client, ad)
		if err := s.env.Client.Update(context.Background(), chart); err != nil {
			t.Fatal(err)
		}
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
		testenv.SetFluxStatus(t, s.env.Client, o.obj, o.conditions...)
	}
}

// chartLabels are the labels helm-controller gives the HelmChart of ad's HelmRelease: its chart template's, and
// its own that name the HelmRelease.
func chartLabels(t *testing.T, c client.Client, ad *konfidencev1.ArtifactDeployment) map[string]string {
	t.Helper()
	hr := &helmv2.HelmRelease{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(ad), hr); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"helm.toolkit.fluxcd.io/name": ad.Name, "helm.toolkit.fluxcd.io/namespace": ad.Namespace}
	if hr.Spec.Chart != nil && hr.Spec.Chart.ObjectMeta != nil {
		maps.Copy(labels, hr.Spec.Chart.ObjectMeta.Labels)
	}
	return labels
}

type fluxStatusObject struct {
	obj        testenv.FluxObject
	conditions []metav1.Condition
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
	events, err := s.audit.Events()
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, e := range events {
		if e.ResponseStatus != nil && e.ResponseStatus.Code == http.StatusForbidden {
			refused = append(refused, e.Verb+" "+e.RequestURI)
		}
	}
	if len(refused) > 0 {
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

// usedGrants are the verbs the API server authorized for the operator's requests, as its audit log has them:
// each request's verb and resource, and the checks the API server makes along with some requests, of which the
// audit log has no event of their own:
//   - list with a watch: an informer's first list is a streaming watch where the API server serves one, a LIST
//     where it does not, and the role must work with both;
//   - create for a server-side apply that created its object (answered 201 Created);
//   - delete on an object that is given owner references, and update on the finalizers of every owner whose
//     deletion it blocks (the OwnerReferencesPermissionEnforcement admission plugin).
func (s *operatorScenario) usedGrants(t *testing.T) map[grant]bool {
	t.Helper()
	events, err := s.audit.Events()
	if err != nil {
		t.Fatal(err)
	}
	used := map[grant]bool{}
	for _, e := range events {
		code := 0
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		if e.ObjectRef == nil || code == http.StatusForbidden {
			continue // discovery and other non-resource requests, and refusals (see assertNoRefusal)
		}
		resource := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			resource += "/" + e.ObjectRef.Subresource
		}
		g := grant{e.ObjectRef.APIGroup, resource, e.Verb}
		used[g] = true
		switch {
		case e.Verb == "watch":
			used[grant{g.group, g.resource, "list"}] = true
		case e.Verb == "patch" && code == http.StatusCreated:
			used[grant{g.group, g.resource, "create"}] = true
		}
		for _, o := range ownerReferenceGrants(e, g) {
			used[o] = true
		}
	}
	return used
}

// ownerReferenceGrants are the grants OwnerReferencesPermissionEnforcement checks for a request of g whose object
// has owner references: delete on the object, and update on the finalizers of each owner whose deletion it blocks.
func ownerReferenceGrants(e controlplane.AuditEvent, g grant) []grant {
	if e.ObjectRef.Subresource != "" || len(e.RequestObject) == 0 {
		return nil
	}
	var obj struct {
		Metadata struct {
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if json.Unmarshal(e.RequestObject, &obj) != nil || len(obj.Metadata.OwnerReferences) == 0 {
		return nil
	}
	grants := []grant{{g.group, g.resource, "delete"}}
	for _, ref := range obj.Metadata.OwnerReferences {
		if ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
			group, _, _ := strings.Cut(ref.APIVersion, "/")
			grants = append(grants, grant{group, strings.ToLower(ref.Kind) + "s/finalizers", "update"})
		}
	}
	return grants
}
