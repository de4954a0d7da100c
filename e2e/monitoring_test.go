package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/monitoring"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// checkMonitoringKit checks that every metric the alert rules and the dashboard of config/monitoring name is
// served by the running operator at url, which has reconciled a VectorDeployment (the series of its objects
// exist only then), except those monitoring.NotServed names with the program that serves them.
func checkMonitoringKit(t *testing.T, url string) {
	root := testenv.RepoRoot()
	rules, err := monitoring.Rules(root)
	if err != nil {
		t.Fatal(err)
	}
	queries, err := monitoring.DashboardQueries(root)
	if err != nil {
		t.Fatal(err)
	}
	exprs := slices.Clone(queries)
	for _, r := range rules {
		exprs = append(exprs, r.Expr)
	}
	names, err := monitoring.MetricNames(root, exprs)
	if err != nil {
		t.Fatal(err)
	}
	var served map[string]bool
	testenv.Eventually(t, 30*time.Second, func() error {
		served = servedNames(scrape(t, url))
		for _, lazy := range []string{"gotk_reconcile_condition", "fluxdeployer_vectordeployment_artifacts"} {
			if !served[lazy] {
				return fmt.Errorf("%s is not served yet", lazy)
			}
		}
		return nil
	})
	checked := 0
	for _, expr := range exprs {
		if len(names[expr]) == 0 {
			t.Errorf("%q names no metric", expr)
		}
		for _, name := range names[expr] {
			checked++
			_, elsewhere := monitoring.NotServed[name]
			switch {
			case elsewhere && served[name]:
				t.Errorf("%s is listed as served by another program, but the operator serves it", name)
			case !elsewhere && !served[name]:
				t.Errorf("%s, named by %q, is not served by the operator", name, expr)
			}
		}
	}
	t.Logf("%d metric names of %d rule and dashboard expressions checked against %d served", checked, len(exprs), len(served))
}

// servedNames are the names a query can select among the families: a histogram's or a summary's series are
// named with the suffixes of its parts.
func servedNames(families map[string]*dto.MetricFamily) map[string]bool {
	served := map[string]bool{}
	for name, f := range families {
		served[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			served[name+"_bucket"], served[name+"_sum"], served[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			served[name+"_sum"], served[name+"_count"] = true, true
		}
	}
	return served
}

// checkAlertRouting applies config/monitoring/notification/alert.yaml to ns as docs/operating.md says, with the
// name of the ArtifactDeployment adName, on the API server with notification-controller's CRDs; and checks that
// the API server refuses the same Alert naming the operator's kinds (so that the Flux objects are the way), that
// each of its event sources selects the operator's Flux objects of its kind, and that Flux's controllers did
// record events on those objects, the events notification-controller matches against the Alert.
func checkAlertRouting(t *testing.T, ns, adName string) {
	ctx := context.Background()
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(testenv.RepoRoot(), "e2e", "testdata", "notification")}, ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatal(err)
	}
	manifests, err := os.ReadFile(filepath.Join(monitoring.Dir(testenv.RepoRoot()), "notification", "alert.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := controlplane.Decode(manifests)
	if err != nil {
		t.Fatal(err)
	}
	var alert *unstructured.Unstructured
	for _, obj := range objs {
		obj.SetNamespace(ns)
		if obj.GetKind() == "Alert" {
			alert = obj
			setMatchedArtifactDeployment(t, obj, adName)
		}
	}
	if alert == nil {
		t.Fatal("alert.yaml has no Alert")
	}

	refused := alert.DeepCopy()
	refused.SetName("vectordeployments")
	if err := unstructured.SetNestedSlice(refused.Object, []any{map[string]any{"kind": "VectorDeployment", "name": "*"}}, "spec", "eventSources"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, refused); !apierrors.IsInvalid(err) {
		t.Errorf("an Alert selecting VectorDeployments: %v, want the API server to refuse it as invalid", err)
	}
	for _, obj := range objs {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating the documented %s: %v", obj.GetKind(), err)
		}
	}

	sources, _, err := unstructured.NestedSlice(alert.Object, "spec", "eventSources")
	if err != nil {
		t.Fatal(err)
	}
	selected := 0
	for _, s := range sources {
		source, _ := s.(map[string]any)
		kind, _ := source["kind"].(string)
		matchLabels, _, _ := unstructured.NestedStringMap(source, "matchLabels")
		gvk, ok := fluxKindsOfAlerts[kind]
		if !ok {
			t.Errorf("the Alert selects %s, which the operator does not create", kind)
			continue
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind + "List"))
		if err := env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(matchLabels)); err != nil {
			t.Fatal(err)
		}
		for _, obj := range list.Items {
			if !ownedBy(&obj, adName) {
				t.Errorf("the Alert's source %s %v selects %s, which ArtifactDeployment %s does not own", kind, matchLabels, obj.GetName(), adName)
				continue
			}
			selected++
			waitForFluxEvent(t, ns, kind, obj.GetName())
		}
	}
	if selected == 0 {
		t.Errorf("the Alert's sources select none of the Flux objects of ArtifactDeployment %s", adName)
	}
}

// fluxKindsOfAlerts are the Flux kinds the operator creates, which an Alert can select.
var fluxKindsOfAlerts = map[string]schema.GroupVersionKind{
	"Kustomization":  {Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"},
	"HelmRelease":    {Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"},
	"OCIRepository":  {Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"},
	"HelmRepository": {Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "HelmRepository"},
}

// setMatchedArtifactDeployment puts adName into every matchLabels of the Alert's event sources, as the
// documentation tells a user to.
func setMatchedArtifactDeployment(t *testing.T, alert *unstructured.Unstructured, adName string) {
	t.Helper()
	sources, _, err := unstructured.NestedSlice(alert.Object, "spec", "eventSources")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sources {
		source, _ := s.(map[string]any)
		if _, ok := source["matchLabels"]; !ok {
			t.Fatalf("event source %v has no matchLabels", source)
		}
		if err := unstructured.SetNestedField(source, adName, "matchLabels", konfidencev1.ArtifactDeploymentLabel); err != nil {
			t.Fatal(err)
		}
	}
	if err := unstructured.SetNestedSlice(alert.Object, sources, "spec", "eventSources"); err != nil {
		t.Fatal(err)
	}
}

func ownedBy(obj client.Object, adName string) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "ArtifactDeployment" && ref.Name == adName {
			return true
		}
	}
	return false
}

// waitForFluxEvent waits for an event on the Flux object by a Flux controller: what its recorder writes as a
// Kubernetes event it also posts, with the same involved object, to notification-controller.
func waitForFluxEvent(t *testing.T, ns, kind, name string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func() error {
		var events corev1.EventList
		if err := env.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && slices.Contains(fluxControllers, e.Source.Component) {
				return nil
			}
		}
		return fmt.Errorf("no event of a Flux controller on %s %s/%s", kind, ns, name)
	})
}

// fluxControllers are the event sources of Flux's controllers.
var fluxControllers = []string{"source-controller", "kustomize-controller", "helm-controller"}

// checkKubeStateMetrics runs kube-state-metrics, the binary KUBE_STATE_METRICS names, with the custom-resource-state
// configuration of config/monitoring/kube-state-metrics against the API server, and checks the gotk_resource_info
// series it serves for vd and its ArtifactDeployment adName. kube-state-metrics' module is not served by the Go
// module proxy, so the binary is built from its repository (docs/development.md says how) and the check is skipped
// without it.
func checkKubeStateMetrics(t *testing.T, vd *konfidencev1.VectorDeployment, adName string) {
	bin := os.Getenv("KUBE_STATE_METRICS")
	if bin == "" {
		t.Skip("KUBE_STATE_METRICS names no kube-state-metrics binary (docs/development.md, \"kube-state-metrics\")")
	}
	config, err := monitoring.KubeStateMetricsConfig(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	configFile := filepath.Join(t.TempDir(), "custom-resource-state.yaml")
	if err := os.WriteFile(configFile, config, 0o644); err != nil {
		t.Fatal(err)
	}
	addr, telemetry := testenv.FreeAddr(t), testenv.FreeAddr(t)
	host, port, _ := strings.Cut(addr, ":")
	_, telemetryPort, _ := strings.Cut(telemetry, ":")
	startProcess(t, "kube-state-metrics", cluster.AdminKubeconfig, bin, "--kubeconfig="+cluster.AdminKubeconfig, "--custom-resource-state-only",
		"--custom-resource-state-config-file="+configFile, "--host="+host, "--port="+port,
		"--telemetry-host="+host, "--telemetry-port="+telemetryPort)
	// The labels Prometheus would show; a scrape target's own namespace is not part of kube-state-metrics' output.
	want := map[string]map[string]string{
		"VectorDeployment": {"customresource_group": konfidencev1.GroupVersion.Group, "name": vd.Name,
			"exported_namespace": vd.Namespace, "ready": "True", "stalled": "", "suspended": "", "revision": vd.Spec.Vector,
			"ready_artifacts": vd.Status.ReadySummary},
		"ArtifactDeployment": {"customresource_group": konfidencev1.GroupVersion.Group, "name": adName,
			"exported_namespace": vd.Namespace, "ready": "True", "flux_kind": "Kustomization"},
	}
	testenv.Eventually(t, time.Minute, func() error {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return err
		}
		for kind, labels := range want {
			found := false
			for _, m := range families["gotk_resource_info"].GetMetric() {
				if matches(m, with(labels, map[string]string{"customresource_kind": kind})) && value(m) == 1 {
					found = true
					t.Logf("gotk_resource_info%v", m.GetLabel())
				}
			}
			if !found {
				return fmt.Errorf("no gotk_resource_info%v of kind %s among %v", labels, kind, families["gotk_resource_info"].GetMetric())
			}
		}
		return nil
	})
}
