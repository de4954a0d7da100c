package monitoring_test

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

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
	if out, err := monitoring.Promtool(root, "check", "rules", filepath.Join(dir, rulesFile)); err != nil {
		t.Fatalf("promtool check rules: %v", err)
	} else {
		t.Logf("promtool check rules:\n%s", out)
	}
	if out, err := monitoring.Promtool(root, "test", "rules", filepath.Join(dir, "rules_test.yaml")); err != nil {
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
