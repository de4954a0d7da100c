// Package monitoring reads the monitoring kit of config/monitoring — the PrometheusRule, the Grafana dashboard and
// the kube-state-metrics configuration — for the tests that check it: the rule unit tests run by Prometheus'
// promtool (this package's tests), and the end-to-end test that checks every metric the kit names against what
// the running binary serves. The Prometheus tools are pinned in hack/tools/prometheus and built with the go command there.
package monitoring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// Dir is config/monitoring under the repository root.
func Dir(root string) string { return filepath.Join(root, "config", "monitoring") }

// NotServed are the metrics the kit may name although the operator does not serve them, each with the reason.
var NotServed = map[string]string{
	// Per-object conditions of both kinds, as Flux's monitoring example gets them for Flux's kinds: the operator
	// keeps no condition series per ArtifactDeployment (docs/performance.md, memory).
	"gotk_resource_info": "kube-state-metrics' custom-resource-state metric, from config/monitoring/kube-state-metrics",
	// The operator's own container, as the kubelet reports it: a process cannot count the times it was killed.
	"kube_pod_container_status_last_terminated_reason": "kube-state-metrics' pod metric",
	"kube_pod_container_status_restarts_total":         "kube-state-metrics' pod metric",
}

// RuleGroups returns the spec of the PrometheusRule, which is a Prometheus rule file: its groups.
func RuleGroups(root string) ([]byte, error) {
	var rule struct {
		Kind string          `json:"kind"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := readYAML(filepath.Join(Dir(root), "prometheusrule.yaml"), &rule); err != nil {
		return nil, err
	}
	if rule.Kind != "PrometheusRule" || len(rule.Spec) == 0 {
		return nil, fmt.Errorf("prometheusrule.yaml: kind %q with no spec, want a PrometheusRule", rule.Kind)
	}
	return yaml.JSONToYAML(rule.Spec)
}

// Rule is an alerting or recording rule of the PrometheusRule.
type Rule struct {
	Alert string `json:"alert"`
	Expr  string `json:"expr"`
}

// Rules returns every rule of the PrometheusRule.
func Rules(root string) ([]Rule, error) {
	groups, err := RuleGroups(root)
	if err != nil {
		return nil, err
	}
	var spec struct {
		Groups []struct {
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(groups, &spec); err != nil {
		return nil, fmt.Errorf("prometheusrule.yaml: %w", err)
	}
	var rules []Rule
	for _, g := range spec.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules, nil
}

// DashboardQueries returns the PromQL of every panel target of the dashboard and of every query variable, with
// Grafana's variables replaced by values PromQL parses: a duration for the interval variables, a regular
// expression matching everything for the rest (they stand in label matchers). A variable query label_values(q,
// label) yields q.
func DashboardQueries(root string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(Dir(root), "dashboards", "fluxdeployer.json"))
	if err != nil {
		return nil, err
	}
	var dashboard struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		return nil, fmt.Errorf("the dashboard: %w", err)
	}
	var queries []string
	var walk func([]panel)
	walk = func(panels []panel) {
		for _, p := range panels {
			for _, t := range p.Targets {
				queries = append(queries, t.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dashboard.Panels)
	for _, v := range dashboard.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			return nil, fmt.Errorf("the dashboard's variable query %s: %w", v.Query, err)
		}
		queries = append(queries, q.Query)
	}
	for i, q := range queries {
		if m := labelValues.FindStringSubmatch(q); m != nil {
			q = m[1]
		}
		q = intervalVariable.ReplaceAllString(q, "5m")
		queries[i] = variable.ReplaceAllString(q, ".*")
	}
	return queries, nil
}

type panel struct {
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

var (
	labelValues      = regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)
	intervalVariable = regexp.MustCompile(`\$__(rate_interval|interval|range)\b`)
	variable         = regexp.MustCompile(`\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?`)
)

// MetricNames returns the metric names each PromQL expression selects, parsed by Prometheus' own parser
// (hack/tools/prometheus/promql-names).
func MetricNames(root string, exprs []string) (map[string][]string, error) {
	in, err := json.Marshal(exprs)
	if err != nil {
		return nil, err
	}
	out, err := tool(root, bytes.NewReader(in), "run", "./promql-names")
	if err != nil {
		return nil, err
	}
	names := map[string][]string{}
	if err := json.Unmarshal(out, &names); err != nil {
		return nil, fmt.Errorf("promql-names wrote %q: %w", out, err)
	}
	return names, nil
}

// BuildPromtool builds Prometheus' promtool, pinned in hack/tools/prometheus, into dir and returns its path. It is
// built without Prometheus' service discoveries (the remove_all_sd build tag): checking and testing rules uses
// none, and the discoveries' cloud SDKs are most of what a build of promtool compiles otherwise.
func BuildPromtool(root, dir string) (string, error) {
	bin := filepath.Join(dir, "promtool")
	_, err := tool(root, nil, "build", "-tags", "remove_all_sd", "-o", bin, "github.com/prometheus/prometheus/cmd/promtool")
	return bin, err
}

// Promtool runs the promtool BuildPromtool built and returns what it wrote; a failure carries the standard error.
func Promtool(bin string, args ...string) ([]byte, error) {
	return output(exec.Command(bin, args...), nil)
}

// tool runs the go command in the tools module hack/tools/prometheus (go build, go run) and returns its standard
// output; a failure carries the standard error.
func tool(root string, stdin *bytes.Reader, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(root, "hack", "tools", "prometheus")
	return output(cmd, stdin)
}

// output runs cmd with stdin, if any, and returns its standard output; a failure carries the standard error.
func output(cmd *exec.Cmd, stdin *bytes.Reader) ([]byte, error) {
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s: %w\n%s%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), nil
}

// KubeStateMetricsConfig returns kube-state-metrics' custom-resource-state configuration from the values of
// config/monitoring/kube-state-metrics: the file its --custom-resource-state-config-file reads.
func KubeStateMetricsConfig(root string) ([]byte, error) {
	var values struct {
		KSM struct {
			CustomResourceState struct {
				Config json.RawMessage `json:"config"`
			} `json:"customResourceState"`
		} `json:"kube-state-metrics"`
	}
	if err := readYAML(filepath.Join(Dir(root), "kube-state-metrics", "values.yaml"), &values); err != nil {
		return nil, err
	}
	if len(values.KSM.CustomResourceState.Config) == 0 {
		return nil, fmt.Errorf("kube-state-metrics/values.yaml has no kube-state-metrics.customResourceState.config")
	}
	return yaml.JSONToYAML(values.KSM.CustomResourceState.Config)
}

func readYAML(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
