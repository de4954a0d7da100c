// The chart's tests live in the module that pins Helm (hack/tools/flux, whose helm the real-node install runs and
// whose Flux controllers are built on Helm's SDK), not in the operator's, which has no use for Helm. They render
// charts/fluxdeployer with Helm's install action as `helm template` does, and compare it with config/default as
// the pinned kustomize builds it.
package chart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The release config/default corresponds to: its objects' names and namespace.
const (
	releaseName = "fluxdeployer"
	namespace   = "fluxdeployer-system"
	kubeVersion = "v1.36.4"
)

var (
	repoRoot = filepath.Join("..", "..", "..", "..")
	chartDir = filepath.Join(repoRoot, "charts", "fluxdeployer")
)

// TestChartRendersConfigDefault: with its default values the chart renders every object of config/default but
// the Namespace (Helm installs into an existing or --create-namespace one), under the same names and equal in
// every field: RBAC rules, the Deployment's pod (containers, args, probes, ports, security contexts, resources,
// priority class, node selector), the Service, the NetworkPolicy, the PriorityClass and the CRDs. What differs
// is Helm's by design: app.kubernetes.io/managed-by, helm.sh/chart, the pods' konfidence.cloud/shard label, the
// CRDs' helm.sh/resource-policy, and selectors that add the release (and the shard) to app.kubernetes.io/name.
func TestChartRendersConfigDefault(t *testing.T) {
	rendered := index(t, render(t, nil))
	want := index(t, slices.DeleteFunc(kustomizeDefault(t), func(u *unstructured.Unstructured) bool { return u.GetKind() == "Namespace" }))
	for key := range want {
		if _, ok := rendered[key]; !ok {
			t.Errorf("the chart does not render %s", key)
		}
	}
	for key, got := range rendered {
		config, ok := want[key]
		if !ok {
			t.Errorf("the chart renders %s, which config/default does not", key)
			continue
		}
		if managedBy := got.GetLabels()["app.kubernetes.io/managed-by"]; managedBy != "Helm" {
			t.Errorf("%s: app.kubernetes.io/managed-by=%q, want Helm", key, managedBy)
		}
		normalizeChart(t, got, config)
		if d := cmp.Diff(config.Object, got.Object); d != "" {
			t.Errorf("%s differs from config/default (-config/default +chart):\n%s", key, d)
		}
	}
}

// normalizeChart removes from a rendered object what Helm adds by design, and takes config/default's selectors
// once it has checked that the chart's select the same pods, narrowed to the release.
func normalizeChart(t *testing.T, chart, config *unstructured.Unstructured) {
	t.Helper()
	dropLabels := func(obj map[string]any, path ...string) {
		m, _, _ := unstructured.NestedStringMap(obj, path...)
		for _, k := range []string{"app.kubernetes.io/managed-by", "helm.sh/chart", "konfidence.cloud/shard"} {
			delete(m, k)
		}
		if err := unstructured.SetNestedStringMap(obj, m, path...); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []*unstructured.Unstructured{chart, config} {
		dropLabels(u.Object, "metadata", "labels")
		if u.GetKind() == "Deployment" {
			dropLabels(u.Object, "spec", "template", "metadata", "labels")
		}
	}
	if a := chart.GetAnnotations(); a["helm.sh/resource-policy"] == "keep" {
		delete(a, "helm.sh/resource-policy")
		chart.SetAnnotations(a)
	}
	var selector []string
	switch chart.GetKind() {
	case "Deployment":
		selector = []string{"spec", "selector", "matchLabels"}
	case "Service":
		selector = []string{"spec", "selector"}
	case "NetworkPolicy":
		selector = []string{"spec", "podSelector", "matchLabels"}
	default:
		return
	}
	got, _, _ := unstructured.NestedStringMap(chart.Object, selector...)
	want, _, _ := unstructured.NestedStringMap(config.Object, selector...)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s %s: selector %v does not narrow config/default's %v", chart.GetKind(), chart.GetName(), got, want)
		}
	}
	if got["app.kubernetes.io/instance"] != releaseName {
		t.Errorf("%s %s: selector %v, want the release's app.kubernetes.io/instance", chart.GetKind(), chart.GetName(), got)
	}
	if err := unstructured.SetNestedStringMap(chart.Object, want, selector...); err != nil {
		t.Fatal(err)
	}
}

// TestChartValues renders the chart with each value changed and checks the objects it changes.
func TestChartValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		check  func(t *testing.T, objs map[string]*unstructured.Unstructured)
	}{
		{"image by digest", map[string]any{"image": map[string]any{
			"repository": "registry.example/fluxdeployer", "tag": "1.2.3", "pullPolicy": "Always",
			"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		}}, func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			c := container(t, objs, "fluxdeployer")
			if c["image"] != "registry.example/fluxdeployer:1.2.3@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" ||
				c["imagePullPolicy"] != "Always" {
				t.Errorf("image %v, pull policy %v", c["image"], c["imagePullPolicy"])
			}
		}},
		{"flags and extra args", map[string]any{
			"flags": map[string]any{
				"concurrent": 8, "allowed-registries": []any{"registry.example", "ghcr.io"}, "require-signatures": true,
				"requeue-dependency": "1m", "registry-host-concurrency": 100000000,
			},
			"extraArgs": []any{"--log-level=debug"},
		}, func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			want := []any{"run", "--enable-leader-election", "--metrics-addr=:8080", "--health-addr=:9440",
				"--allowed-registries=registry.example,ghcr.io", "--concurrent=8", "--registry-host-concurrency=100000000",
				"--requeue-dependency=1m", "--require-signatures=true", "--log-level=debug"}
			if d := cmp.Diff(want, container(t, objs, "fluxdeployer")["args"]); d != "" {
				t.Errorf("args (-want +got):\n%s", d)
			}
		}},
		{"allowed registries", map[string]any{"allowedRegistries": []any{"registry.example", "ghcr.io:5000"}},
			func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				want := []any{"run", "--enable-leader-election", "--metrics-addr=:8080", "--health-addr=:9440",
					"--allowed-registries=registry.example,ghcr.io:5000"}
				if d := cmp.Diff(want, container(t, objs, "fluxdeployer")["args"]); d != "" {
					t.Errorf("args (-want +got):\n%s", d)
				}
			}},
		{"resources", map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}}},
			func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				limit, _, _ := unstructured.NestedString(container(t, objs, "fluxdeployer"), "resources", "limits", "memory")
				if limit != "1Gi" {
					t.Errorf("memory limit %q, want 1Gi", limit)
				}
			}},
		{"no ConfigMap by default", nil, func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			if cm := objs["ConfigMap/"+namespace+"/flux-deployer-configuration"]; cm != nil {
				t.Errorf("ConfigMap rendered without fluxDeployerConfig: %v", cm.Object)
			}
		}},
		{"the Flux deployer's ConfigMap", map[string]any{"fluxDeployerConfig": map[string]any{
			"interval": "5m", "wait": "true", "authenticationSecretRefs": map[string]any{"registry.example": "registry-pull"},
		}}, func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			cm := objs["ConfigMap/"+namespace+"/flux-deployer-configuration"]
			if cm == nil {
				t.Fatalf("no ConfigMap flux-deployer-configuration in %v", keys(objs))
			}
			data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
			if d := cmp.Diff(map[string]string{"interval": "5m", "wait": "true", "authenticationSecretRefs": "registry.example: registry-pull"}, data); d != "" {
				t.Errorf("ConfigMap data (-want +got):\n%s", d)
			}
		}},
		{"shards", map[string]any{"shards": []any{"shard1", "shard2"}}, func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			main := container(t, objs, "fluxdeployer")["args"].([]any)
			if !slices.Contains(main, "--watch-label-selector=!sharding.fluxcd.io/key") || !slices.Contains(main, "--enable-leader-election") {
				t.Errorf("main Deployment's args %v, want leader election and the unsharded VectorDeployments", main)
			}
			// config/sharding's admission policy: an object's shard key is its Namespace's.
			policy := objs["ValidatingAdmissionPolicy//fluxdeployer-shard-key"]
			binding := objs["ValidatingAdmissionPolicyBinding//fluxdeployer-shard-key"]
			if policy == nil || binding == nil {
				t.Fatalf("no ValidatingAdmissionPolicy and binding fluxdeployer-shard-key in %v", keys(objs))
			}
			if name, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName"); name != policy.GetName() {
				t.Errorf("the binding names policy %q, want %q", name, policy.GetName())
			}
			if rules, _, _ := unstructured.NestedSlice(policy.Object, "spec", "validations"); len(rules) != 1 {
				t.Errorf("policy validations %v, want config/sharding's", rules)
			}
			var pods []labels.Set
			for _, shard := range []string{"shard1", "shard2"} {
				d := objs["Deployment/"+namespace+"/fluxdeployer-"+shard]
				if d == nil {
					t.Fatalf("no Deployment fluxdeployer-%s in %v", shard, keys(objs))
				}
				args := container(t, objs, "fluxdeployer-"+shard)["args"].([]any)
				want := []any{"run", "--enable-leader-election", "--metrics-addr=:8080", "--health-addr=:9440",
					"--watch-label-selector=sharding.fluxcd.io/key in (" + shard + ")"}
				if d := cmp.Diff(want, args); d != "" {
					t.Errorf("shard %s args (-want +got):\n%s", shard, d)
				}
				// Leader election per shard: the replicas and the rolling update of the main Deployment.
				replicas, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas")
				if _, set, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "strategy"); fmt.Sprint(replicas) != "1" || set {
					t.Errorf("shard %s: %v replicas, strategy set %t; want the default replicas and strategy", shard, replicas, set)
				}
			}
			// No Deployment selects another's pods; the metrics Service and the NetworkPolicy select all of them.
			var deployments []*unstructured.Unstructured
			for _, u := range objs {
				if u.GetKind() == "Deployment" {
					deployments = append(deployments, u)
					l, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
					pods = append(pods, l)
				}
			}
			for i, d := range deployments {
				sel, _, _ := unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels")
				for j, pod := range pods {
					if labels.SelectorFromSet(sel).Matches(pod) != (i == j) {
						t.Errorf("Deployment %s selects %v; pod labels of Deployment %s: %v", d.GetName(), sel, deployments[j].GetName(), pod)
					}
				}
			}
			svc, _, _ := unstructured.NestedStringMap(objs["Service/"+namespace+"/fluxdeployer-metrics"].Object, "spec", "selector")
			np, _, _ := unstructured.NestedStringMap(objs["NetworkPolicy/"+namespace+"/fluxdeployer"].Object, "spec", "podSelector", "matchLabels")
			for _, pod := range pods {
				if !labels.SelectorFromSet(svc).Matches(pod) || !labels.SelectorFromSet(np).Matches(pod) {
					t.Errorf("pods labelled %v: not selected by the metrics Service (%v) or the NetworkPolicy (%v)", pod, svc, np)
				}
			}
		}},
		{"ServiceMonitor", map[string]any{"serviceMonitor": map[string]any{"enabled": true, "interval": "30s", "labels": map[string]any{"release": "prometheus"}}},
			func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				sm := objs["ServiceMonitor/"+namespace+"/fluxdeployer"]
				if sm == nil || sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetLabels()["release"] != "prometheus" {
					t.Fatalf("no monitoring.coreos.com/v1 ServiceMonitor labelled release=prometheus in %v", keys(objs))
				}
				svc := objs["Service/"+namespace+"/fluxdeployer-metrics"]
				sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
				namespaces, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
				endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
				ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
				if !labels.SelectorFromSet(sel).Matches(labels.Set(svc.GetLabels())) || !slices.Equal(namespaces, []string{namespace}) ||
					len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != ports[0].(map[string]any)["name"] ||
					endpoints[0].(map[string]any)["interval"] != "30s" {
					t.Errorf("ServiceMonitor selects %v in %v, endpoints %v; the metrics Service is labelled %v with ports %v",
						sel, namespaces, endpoints, svc.GetLabels(), ports)
				}
			}},
		{"no ServiceMonitor by default", nil, func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			if objs["ServiceMonitor/"+namespace+"/fluxdeployer"] != nil {
				t.Error("ServiceMonitor rendered by default")
			}
		}},
		{"NetworkPolicy off", map[string]any{"networkPolicy": map[string]any{"enabled": false}}, func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			if objs["NetworkPolicy/"+namespace+"/fluxdeployer"] != nil {
				t.Error("NetworkPolicy rendered with networkPolicy.enabled=false")
			}
		}},
		{"metrics from Prometheus' namespace only", map[string]any{"networkPolicy": map[string]any{"metricsFrom": []any{
			map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}},
		}}}, func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			ingress, _, _ := unstructured.NestedSlice(objs["NetworkPolicy/"+namespace+"/fluxdeployer"].Object, "spec", "ingress")
			peers := map[string]string{} // port: who may reach it
			for _, rule := range ingress {
				from, _ := json.Marshal(rule.(map[string]any)["from"])
				ports, _ := rule.(map[string]any)["ports"].([]any)
				for _, p := range ports {
					peers[fmt.Sprint(p.(map[string]any)["port"])] = string(from)
				}
			}
			want := map[string]string{
				"http-metrics": `[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`,
				"healthz":      "null", // the kubelet's probes come from the node
			}
			if !maps.Equal(peers, want) {
				t.Errorf("ingress by port %v, want %v", peers, want)
			}
		}},
		{"one namespace watched", map[string]any{"flags": map[string]any{"watch-all-namespaces": false}},
			func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				if objs["ClusterRoleBinding//fluxdeployer"] != nil {
					t.Error("ClusterRoleBinding rendered with --watch-all-namespaces=false")
				}
				rb := objs["RoleBinding/"+namespace+"/fluxdeployer-clusterrole"]
				if rb == nil {
					t.Fatalf("no RoleBinding fluxdeployer-clusterrole in %v", keys(objs))
				}
				if ref, _, _ := unstructured.NestedStringMap(rb.Object, "roleRef"); ref["kind"] != "ClusterRole" || ref["name"] != "fluxdeployer" {
					t.Errorf("RoleBinding fluxdeployer-clusterrole binds %v, want the ClusterRole fluxdeployer in the release's namespace", ref)
				}
				if !slices.Contains(container(t, objs, "fluxdeployer")["args"].([]any), "--watch-all-namespaces=false") {
					t.Error("no --watch-all-namespaces=false in the args")
				}
			}},
		{"CRDs installed otherwise", map[string]any{"crds": map[string]any{"install": false}}, func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			for key := range objs {
				if strings.HasPrefix(key, "CustomResourceDefinition/") {
					t.Errorf("%s rendered with crds.install=false", key)
				}
			}
		}},
		{"CRDs deleted on uninstall", map[string]any{"crds": map[string]any{"keep": false}}, func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			crd := objs["CustomResourceDefinition//vectordeployments.konfidence.cloud"]
			if _, ok := crd.GetAnnotations()["helm.sh/resource-policy"]; ok {
				t.Errorf("crds.keep=false: annotations %v", crd.GetAnnotations())
			}
		}},
		{"another release", map[string]any{"fullnameOverride": "platform-deployer", "priorityClass": map[string]any{"create": false}},
			func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				if objs["Deployment/"+namespace+"/platform-deployer"] == nil || objs["ClusterRole//platform-deployer-edit"] == nil {
					t.Errorf("objects %v, want them named platform-deployer", keys(objs))
				}
				pod, _, _ := unstructured.NestedMap(objs["Deployment/"+namespace+"/platform-deployer"].Object, "spec", "template", "spec")
				if _, ok := pod["priorityClassName"]; ok || objs["PriorityClass//platform-deployer"] != nil {
					t.Errorf("priorityClass.create=false: pod priority class %v", pod["priorityClassName"])
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, index(t, render(t, tc.values))) })
	}
}

// TestChartRefusesConflictingValues: values that cannot work together fail the render with a message.
func TestChartRefusesConflictingValues(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"a shard named main":       {map[string]any{"shards": []any{"main"}}, "the name main is the main Deployment's"},
		"shards and own selectors": {map[string]any{"shards": []any{"s1"}, "flags": map[string]any{"watch-label-selector": "a=b"}}, "cannot be combined with shards"},
		"the allow-list twice": {map[string]any{"allowedRegistries": []any{"registry.example"}, "flags": map[string]any{"allowed-registries": []any{"ghcr.io"}}},
			"set the same flag"},
	} {
		if _, err := renderErr(tc.values); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

// TestChartRefusesUnknownValues: values.schema.json makes Helm refuse a value the chart does not read, a typo
// among them, rather than install without it.
func TestChartRefusesUnknownValues(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"a misspelt top-level value":       {"replica": 2},
		"a misspelt ConfigMap key":         {"fluxDeployerConfig": map[string]any{"intervall": "5m"}},
		"a ConfigMap value of no meaning":  {"fluxDeployerConfig": map[string]any{"helmSource": "git"}},
		"a misspelt key of a nested value": {"image": map[string]any{"tags": "v1"}},
	} {
		if _, err := renderErr(values); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s: %v, want the schema's refusal", name, err)
		}
	}
	if _, err := renderErr(map[string]any{"fluxDeployerConfig": map[string]any{"interval": "5m", "serviceAccountNames": map[string]any{"team-a": "deployer"}}}); err != nil {
		t.Errorf("known ConfigMap keys refused: %v", err)
	}
}

// TestChartRefusesOldKubernetes: the chart's kubeVersion constraint makes Helm refuse a Kubernetes older than the
// operator supports (1.29, for the CRDs' validation rules).
func TestChartRefusesOldKubernetes(t *testing.T) {
	if _, err := renderAt("v1.28.9", nil); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("Kubernetes 1.28: %v, want a refusal naming kubeVersion", err)
	}
}

// TestChartLints: helm lint (strict: warnings fail too) passes with the default values and with every optional
// object rendered.
func TestChartLints(t *testing.T) {
	for _, values := range []map[string]any{nil, {
		"shards": []any{"shard1"}, "serviceMonitor": map[string]any{"enabled": true},
		"fluxDeployerConfig": map[string]any{"interval": "5m"}, "flags": map[string]any{"watch-all-namespaces": false},
	}} {
		lint := action.NewLint()
		lint.Strict = true
		lint.Namespace = namespace
		result := lint.Run([]string{chartDir}, values)
		for _, m := range result.Messages {
			t.Log(m)
		}
		if len(result.Errors) > 0 || result.TotalChartsLinted != 1 {
			t.Errorf("helm lint with %v: %d charts linted, errors %v", values, result.TotalChartsLinted, result.Errors)
		}
	}
}

// render renders the chart as `helm template fluxdeployer charts/fluxdeployer -n fluxdeployer-system` with values.
func render(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderErr(values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func renderErr(values map[string]any) ([]*unstructured.Unstructured, error) {
	return renderAt(kubeVersion, values)
}

// renderAt renders the chart for a cluster of Kubernetes version version.
func renderAt(version string, values map[string]any) ([]*unstructured.Unstructured, error) {
	chart, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRunStrategy = action.DryRunClient
	// The version the tests' kube-apiserver runs, for the templates' .Capabilities (Helm assumes 1.20 otherwise)
	// and the chart's kubeVersion constraint.
	if install.KubeVersion, err = common.ParseKubeVersion(version); err != nil {
		return nil, err
	}
	install.ReleaseName, install.Namespace, install.Replace = releaseName, namespace, true
	r, err := install.Run(chart, values)
	if err != nil {
		return nil, err
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("helm returned a %T", r)
	}
	return decode([]byte(rel.Manifest))
}

// kustomizeDefault builds config/default with the pinned kustomize, as make build-installer does.
func kustomizeDefault(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	cmd := exec.Command("go", "tool", "-modfile=hack/tools/kustomize/go.mod", "kustomize", "build", "config/default")
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build config/default: %v\n%s", err, stderr.String())
	}
	objs, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// decode splits a multi-document YAML stream as Helm does and decodes each object, skipping empty documents.
func decode(manifests []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	docs := releaseutil.SplitManifests(string(manifests))
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(docs[name]), &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", name, err, docs[name])
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs, nil
}

// index maps kind/namespace/name to each object, failing on a duplicate.
func index(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	m := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		key := u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
		if m[key] != nil {
			t.Errorf("%s rendered twice", key)
		}
		m[key] = u
	}
	return m
}

func keys(objs map[string]*unstructured.Unstructured) []string {
	var k []string
	for key := range objs {
		k = append(k, key)
	}
	slices.Sort(k)
	return k
}

// container returns the manager container of the Deployment name in the release's namespace.
func container(t *testing.T, objs map[string]*unstructured.Unstructured, name string) map[string]any {
	t.Helper()
	d := objs["Deployment/"+namespace+"/"+name]
	if d == nil {
		t.Fatalf("no Deployment %s in %v", name, keys(objs))
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("Deployment %s: containers %v", name, containers)
	}
	return containers[0].(map[string]any)
}

// TestValuesAreDocumented: every value of values.yaml is in the values table of docs/operating.md ("Installing
// with Helm"), itself or through a parent (resources covers resources.limits.memory), and every value the table
// names exists.
func TestValuesAreDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Installing with Helm\n")
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	for line := range strings.Lines(section) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, name := range strings.Split(first, ", ") {
			documented[strings.Trim(name, "`")] = true
		}
	}
	chart, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(prefix string, values map[string]any)
	walk = func(prefix string, values map[string]any) {
		for k, v := range values {
			path := prefix + k
			if documented[path] {
				delete(documented, path)
				continue
			}
			if m, ok := v.(map[string]any); ok && len(m) > 0 {
				walk(path+".", m)
				continue
			}
			t.Errorf("value %s is not in docs/operating.md's values table", path)
		}
	}
	walk("", chart.Values)
	for name := range documented {
		t.Errorf("docs/operating.md's values table names %s, which values.yaml does not have", name)
	}
}
