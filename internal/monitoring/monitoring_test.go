package monitoring_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/monitoring"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// rulesFile is the name testdata/rules_test.yaml gives the PrometheusRule's groups.
const rulesFile = "fluxdeployer.rules.yaml"

// TestAlertRules checks the PrometheusRule with Prometheus' own rule checker and runs its unit tests in
// Prometheus' rule test engine (promtool test rules): each alert fires on the series it is for and stays silent
// on the others.
func TestAlertRules(t *testing.T) {
	root := testenv.RepoRoot()
	groups, err := monitoring.RuleGroups(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests, err := os.ReadFile(filepath.Join(monitoring.Dir(root), "testdata", "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{rulesFile: groups, "rules_test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	promtool, err := monitoring.BuildPromtool(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if out, err := monitoring.Promtool(promtool, "check", "rules", filepath.Join(dir, rulesFile)); err != nil {
		t.Fatalf("promtool check rules: %v", err)
	} else {
		t.Logf("promtool check rules:\n%s", out)
	}
	if out, err := monitoring.Promtool(promtool, "test", "rules", filepath.Join(dir, "rules_test.yaml")); err != nil {
		t.Fatalf("promtool test rules: %v", err)
	} else {
		t.Logf("promtool test rules:\n%s", out)
	}
}

// TestEveryAlertIsTested: each alert of the PrometheusRule has a unit test where it fires and one where it does
// not, so that neither an alert that never fires nor one that always does passes.
func TestEveryAlertIsTested(t *testing.T) {
	root := testenv.RepoRoot()
	rules, err := monitoring.Rules(root)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(monitoring.Dir(root), "testdata", "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	firing, silent := map[string]bool{}, map[string]bool{}
	for _, test := range file.Tests {
		for _, c := range test.AlertRuleTest {
			if len(c.ExpAlerts) > 0 {
				firing[c.Alertname] = true
			} else {
				silent[c.Alertname] = true
			}
		}
	}
	if len(rules) == 0 {
		t.Fatal("the PrometheusRule has no rules")
	}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		if !firing[r.Alert] {
			t.Errorf("alert %s has no test case where it fires", r.Alert)
		}
		if !silent[r.Alert] {
			t.Errorf("alert %s has no test case where it does not fire", r.Alert)
		}
	}
}

// TestKitOnTheAPIServer builds config/monitoring with the real kustomize and applies it to an API server with the
// Prometheus Operator's CRDs, which validates the PodMonitor and the PrometheusRule against their schemas; the
// dashboard's ConfigMap carries the dashboard file unchanged, with the label Grafana's sidecar loads.
func TestKitOnTheAPIServer(t *testing.T) {
	objs, err := controlplane.Kustomize("config/monitoring")
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, filepath.Join("testdata", "crds"))
	ctx := context.Background()
	kinds := map[string]int{}
	for _, obj := range objs {
		kinds[obj.GetKind()]++
		if obj.GetNamespace() != "fluxdeployer-system" {
			t.Errorf("%s %s is in namespace %q, want fluxdeployer-system", obj.GetKind(), obj.GetName(), obj.GetNamespace())
		}
	}
	if want := map[string]int{"PodMonitor": 1, "PrometheusRule": 1, "ConfigMap": 1}; !maps.Equal(kinds, want) {
		t.Errorf("config/monitoring has %v, want %v", kinds, want)
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fluxdeployer-system"}}); err != nil {
		t.Fatal(err)
	}
	if err := controlplane.Apply(ctx, env.Client, objs); err != nil {
		t.Fatal(err)
	}

	dashboard, err := os.ReadFile(filepath.Join(monitoring.Dir(testenv.RepoRoot()), "dashboards", "fluxdeployer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "fluxdeployer-system", Name: "fluxdeployer-grafana-dashboards"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["fluxdeployer.json"] != string(dashboard) {
		t.Error("the dashboard ConfigMap does not hold dashboards/fluxdeployer.json")
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap has labels %v, want grafana_dashboard=1", cm.Labels)
	}
}
