package ui

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) { env = e }, controlplane.FluxCRDDirs()...)
}

// The landscape every test of the view reads: written once into the API server, as the controllers would have
// written it, with fixed times so that the pages are the same on every run.
var (
	fixtureTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fixtureNow  = fixtureTime.Add(time.Hour)
)

const (
	shop       = "shop"
	teamB      = "team-b"
	webAD      = "web-1-0-0-8pnd3sxwzq"
	configAD   = "config-0-4-0-s8kqlvwffn"
	hostileMsg = `<script>alert("owned")</script> registry said: <img src=x onerror=alert(1)>`
)

var fixtureOnce = map[*rest.Config]bool{}

// fixture writes the landscape once per API server.
func fixture(t *testing.T) {
	t.Helper()
	if fixtureOnce[env.Config] {
		return
	}
	fixtureOnce[env.Config] = true
	c := env.Client
	for _, ns := range []string{shop, teamB} {
		create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	ready := func(typ, reason, message string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(fixtureTime), ObservedGeneration: 1}
	}
	failed := func(typ, reason, message string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: message,
			LastTransitionTime: metav1.NewTime(fixtureTime.Add(30 * time.Minute)), ObservedGeneration: 1}
	}
	vd := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "shop"},
		Spec: konfidencev1.VectorDeploymentSpec{Vector: "registry.example/acme.org/vectors/shop:1.0.0"},
		Status: konfidencev1.VectorDeploymentStatus{ObservedGeneration: 1, VectorDigest: "sha256:7d121f9ca0191b70fa9439210992274309a02589a1f1b3cd690665b8e6bdbc90",
			Artifacts: 2, Ready: 1, ReadySummary: "1/2",
			Conditions: []metav1.Condition{failed(konfidencev1.ReadyCondition, "ArtifactFailed", "1/2 artifacts ready: config "+hostileMsg),
				ready(konfidencev1.VectorDownloadedCondition, meta.SucceededReason, "read vector and its 2 artifacts")},
			ResultingArtifactDeployments: map[string]konfidencev1.ResultingArtifactDeployment{"acme.org/artifacts/web": {Name: webAD}, "acme.org/artifacts/config": {Name: configAD}},
			DeploymentResults: map[string][]konfidencev1.DeploymentResult{"acme.org/artifacts/web": {{Name: "web", Type: "service",
				Spec: &apiextensionsv1.JSON{Raw: []byte(`{"url":"http://web.shop.svc:80"}`)}}}},
		}}
	other := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "storefront"},
		Spec: konfidencev1.VectorDeploymentSpec{Vector: "registry.example/acme.org/vectors/storefront:2.0.0", Suspend: true},
		Status: konfidencev1.VectorDeploymentStatus{ObservedGeneration: 1, Artifacts: 1, Ready: 1,
			Conditions: []metav1.Condition{ready(konfidencev1.ReadyCondition, meta.SucceededReason, "1/1 artifacts ready")}}}
	billing := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "billing"},
		Spec:   konfidencev1.VectorDeploymentSpec{Vector: "registry.example/acme.org/vectors/billing:3.1.0"},
		Status: konfidencev1.VectorDeploymentStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{ready(konfidencev1.ReadyCondition, meta.SucceededReason, "0/0 artifacts ready")}}}
	stage := &konfidencev1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "prod"},
		Spec: konfidencev1.StageSpec{Vector: "registry.example/acme.org/vectors/shop", Semver: ">=1.0.0"},
		Status: konfidencev1.StageStatus{ObservedGeneration: 1, ActiveVectorDeployment: "shop", LastAppliedVector: "registry.example/acme.org/vectors/shop:1.0.0",
			Conditions: []metav1.Condition{ready(konfidencev1.ReadyCondition, "Promoted", "registry.example/acme.org/vectors/shop:1.0.0 runs as VectorDeployment shop")},
			History: []konfidencev1.StageHistoryEntry{
				{Vector: "registry.example/acme.org/vectors/shop:1.0.0", Digest: "sha256:7d12", VectorDeployment: "shop", Started: metav1.NewTime(fixtureTime), Outcome: "Promoted"},
				{Vector: "registry.example/acme.org/vectors/shop:0.9.0", Digest: "sha256:0a1b", VectorDeployment: "prod-0-9-0-aaaaaaaaaa", Started: metav1.NewTime(fixtureTime.Add(-time.Hour)),
					Ended: new(metav1.NewTime(fixtureTime)), Outcome: "Failed", Message: "ProgressDeadlineExceeded: " + hostileMsg}}}}
	for _, o := range []client.Object{vd, other, billing, stage} {
		create(t, o)
	}
	controller := true
	vd.OwnerReferences = []metav1.OwnerReference{{APIVersion: konfidencev1.GroupVersion.String(), Kind: "Stage", Name: "prod", UID: stage.UID, Controller: &controller}}
	if err := c.Update(context.Background(), vd); err != nil {
		t.Fatal(err)
	}
	owner := func(v *konfidencev1.VectorDeployment) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: konfidencev1.GroupVersion.String(), Kind: "VectorDeployment", Name: v.Name, UID: v.UID}
	}
	labels := func(ad string) map[string]string { return map[string]string{konfidencev1.ArtifactDeploymentLabel: ad} }
	objs := []client.Object{
		&konfidencev1.ArtifactDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: webAD, OwnerReferences: []metav1.OwnerReference{owner(vd), owner(other)}},
			Spec: konfidencev1.ArtifactDeploymentSpec{Manifest: konfidencev1.ArtifactManifest{Type: "helm", AllowReuse: true},
				Component: konfidencev1.Component{Name: "acme.org/artifacts/web", Version: "1.0.0"}},
			Status: konfidencev1.ArtifactDeploymentStatus{ObservedGeneration: 1, FluxKind: helmv2.HelmReleaseKind, ReleaseName: webAD,
				Conditions: []metav1.Condition{ready(konfidencev1.ReadyCondition, meta.SucceededReason, "Deployed acme.org/artifacts/web:1.0.0"),
					ready(konfidencev1.ArtifactFetchedCondition, meta.SucceededReason, "chart pulled"), ready(konfidencev1.ArtifactDeployedCondition, meta.SucceededReason, "released"),
					ready(konfidencev1.AppHealthyCondition, meta.SucceededReason, "healthy")},
				DeploymentResult: []konfidencev1.DeploymentResult{{Name: "web", Type: "service", Spec: &apiextensionsv1.JSON{Raw: []byte(`{"url":"http://web.shop.svc:80"}`)}}}}},
		&konfidencev1.ArtifactDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: configAD, OwnerReferences: []metav1.OwnerReference{owner(vd)}},
			Spec: konfidencev1.ArtifactDeploymentSpec{Manifest: konfidencev1.ArtifactManifest{Type: "kustomize"},
				Component: konfidencev1.Component{Name: "acme.org/artifacts/config", Version: "0.4.0"}},
			Status: konfidencev1.ArtifactDeploymentStatus{ObservedGeneration: 1, FluxKind: kustomizev1.KustomizationKind, NameSuffix: "-0-4-0-s8kqlvwffn",
				Conditions: []metav1.Condition{failed(konfidencev1.ReadyCondition, "ArtifactFailed", hostileMsg),
					failed(konfidencev1.ArtifactFetchedCondition, "ArtifactFailed", hostileMsg)}}},
		&sourcev1.HelmRepository{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: webAD, Labels: labels(webAD)},
			Spec: sourcev1.HelmRepositorySpec{URL: "oci://registry.example/charts", Type: sourcev1.HelmRepositoryTypeOCI}},
		&helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: webAD, Labels: labels(webAD)},
			Spec: helmv2.HelmReleaseSpec{ReleaseName: webAD, Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "web", Version: "1.0.0",
				SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: webAD}}}},
			Status: helmv2.HelmReleaseStatus{ObservedGeneration: 1, LastAttemptedRevision: "1.0.0",
				ReconcileRequestStatus: meta.ReconcileRequestStatus{LastHandledReconcileAt: "2026-01-01T00:00:00Z"},
				Conditions:             []metav1.Condition{ready(meta.ReadyCondition, "InstallSucceeded", "Helm install succeeded")},
				Inventory:              &helmv2.ResourceInventory{Entries: []helmv2.ResourceRef{{ID: shop + "_web_apps_Deployment", Version: "v1"}, {ID: shop + "_web__Service", Version: "v1"}}}}},
		&sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: configAD, Labels: labels(configAD)},
			Spec: sourcev1.OCIRepositorySpec{URL: "oci://registry.example/bundles/config", Interval: metav1.Duration{Duration: time.Minute}},
			Status: sourcev1.OCIRepositoryStatus{ObservedGeneration: 1,
				Conditions: []metav1.Condition{failed(meta.ReadyCondition, "OCIPullFailed", hostileMsg)}}},
		&kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: configAD, Labels: labels(configAD)},
			Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Minute}, Prune: true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: configAD}},
			Status: kustomizev1.KustomizationStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{failed(meta.ReadyCondition, "ArtifactFailed", "source not ready")}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "web", Generation: 1},
			Spec: appsv1.DeploymentSpec{Replicas: new(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1.0.0"}}}}},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, UnavailableReplicas: 1}},
		pod("web-6d4cf56db6-abcde", true, nil), pod("web-6d4cf56db6-fghij", false, &corev1.ContainerStatus{Name: "web",
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}),
		event("e1", "ArtifactDeployment", configAD, corev1.EventTypeWarning, "ArtifactFailed", hostileMsg, 20*time.Minute),
		event("e2", "VectorDeployment", "shop", corev1.EventTypeNormal, "ArtifactDeploymentCreated", "created ArtifactDeployment "+configAD, 10*time.Minute),
		event("e3", "HelmRelease", webAD, corev1.EventTypeNormal, "InstallSucceeded", "Helm install succeeded for release shop/"+webAD, 15*time.Minute),
		event("e4", "VectorDeployment", "storefront", corev1.EventTypeNormal, "Unrelated", "an event of another VectorDeployment", 25*time.Minute),
	}
	for _, o := range objs {
		create(t, o)
	}
}

func pod(name string, ready bool, cs *corev1.ContainerStatus) *corev1.Pod {
	status := corev1.ConditionFalse
	reason := "ContainersNotReady"
	if ready {
		status, reason = corev1.ConditionTrue, ""
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: name, Labels: map[string]string{"app": "web"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1.0.0"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status, Reason: reason}}}}
	if cs != nil {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{*cs}
	}
	return p
}

func event(name, kind, object, typ, reason, message string, after time.Duration) *corev1.Event {
	at := metav1.NewTime(fixtureTime.Add(after))
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: shop, Name: object, APIVersion: "konfidence.cloud/v1alpha1"},
		Type:           typ, Reason: reason, Message: message, Count: 1, FirstTimestamp: at, LastTimestamp: at, Source: corev1.EventSource{Component: "fluxdeployer"}}
}

// create writes obj and then its status, as the object's controller would have.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	withStatus := obj.DeepCopyObject().(client.Object)
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	raw, err := json.Marshal(withStatus)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["status"]; !ok {
		return
	}
	withStatus.SetResourceVersion(obj.GetResourceVersion())
	withStatus.SetUID(obj.GetUID())
	withStatus.SetOwnerReferences(obj.GetOwnerReferences())
	if err := env.Client.Status().Update(ctx, withStatus); err != nil {
		t.Fatalf("writing the status of %T %s: %v", obj, obj.GetName(), err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
}

// startView runs the view as the given credentials (nil: the API server's administrator) in namespace (empty:
// every namespace) and serves it on a loopback test server.
func startView(t *testing.T, cfg *rest.Config, namespace string, actions bool) (*Server, *httptest.Server) {
	t.Helper()
	if cfg == nil {
		cfg = env.Config
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ts := httptest.NewUnstartedServer(nil)
	s, err := Run(ctx, Options{Config: cfg, Scheme: env.Scheme, Namespace: namespace, Actions: actions, Addr: ts.Listener.Addr().String(),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("starting the view: %v", err)
	}
	s.now = func() time.Time { return fixtureNow }
	ts.Config.Handler = s
	ts.Start()
	t.Cleanup(ts.Close)
	return s, ts
}

func get(t *testing.T, ts *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
