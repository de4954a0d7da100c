package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// runBinary runs the command line as the binary does and returns what it wrote and its exit code.
func runBinary(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// TestExitCodes: 0 for success, 1 for a command that failed, 2 for a command line the binary cannot act on, each
// error printed as "error: …" (a usage error with where to read the usage).
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	ocmtest.WriteCTF(t, dir, fixtures()...)
	ref := dir + "//acme.org/vectors/shop:1.0.0"
	key := publicKeyFile(t, &cliKey(t).PublicKey)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"version"}, exitSuccess},
		{[]string{"vector", "inspect", ref}, exitSuccess},
		{[]string{"vector", "inspect", dir + "//acme.org/vectors/shop:9.9.9"}, exitFailure},
		{[]string{"vector", "verify", ref, "--public-key", key}, exitFailure}, // unsigned
		{[]string{"vector", "verify", ref, "--public-key", filepath.Join(dir, "missing.pem")}, exitFailure},
		{[]string{"vector", "verify", "--public-key", key}, exitUsage}, // no REF
		{[]string{"vector", "verify", ref}, exitUsage},                 // no --public-key
		{[]string{"vector", "verify", ref, "--public-key", key, "--nope"}, exitUsage},
		{[]string{"vector", "inspect", ref, "-o", "xml"}, exitUsage},
		{[]string{"nosuchcommand"}, exitUsage},
		{[]string{"vector", "nosuchcommand"}, exitUsage},
		{[]string{"tree", "a", "b"}, exitUsage},
		{[]string{"reconcile", "pod", "x"}, exitUsage},
		{[]string{"reconcile", "vd"}, exitUsage},
		{[]string{"suspend", "vd", "x", "--all"}, exitUsage},
		{[]string{"reconcile", "ad", "x", "--with-artifacts"}, exitUsage},
		{[]string{"wait", "vd", "x", "-A"}, exitUsage},
		{[]string{"diff", "ad", "x", "--vector", ref}, exitUsage},
		{[]string{"diff", "st", "x"}, exitUsage}, // no --vector
		{[]string{"history", "vd", "x"}, exitUsage},
		{[]string{"history", "st"}, exitUsage},
		{[]string{"rollback", "st", "x", "--to="}, exitUsage},
		{[]string{"rollback", "st", "x", "--wait", "--nope"}, exitUsage},
		{[]string{"tree", "ad/x"}, exitUsage},
		{[]string{"tree", "st/"}, exitUsage},
		{[]string{"wait", "st", "x", "-A"}, exitUsage},
		{[]string{"render", ref, "-n", "Bad_NS"}, exitUsage},
		{[]string{"render", ref, "-n", "shop", "--name", "Shop!"}, exitUsage},
	} {
		stdout, stderr, code := runBinary(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", c.args, code, c.code, stdout, stderr)
		}
		if c.code != exitSuccess && !strings.HasPrefix(stderr, "error: ") {
			t.Errorf("%v: stderr %q does not start with \"error: \"", c.args, stderr)
		}
		if c.code == exitUsage && !strings.Contains(stderr, "--help' for usage.") {
			t.Errorf("%v: stderr %q does not point to the usage", c.args, stderr)
		}
	}
}

// TestClusterCommandsExplainTheirConnection: without a kubeconfig, and with an API server that does not answer,
// the cluster commands say so in words, without client-go's KUBERNETES_MASTER hint or Go type names.
func TestClusterCommandsExplainTheirConnection(t *testing.T) {
	home := t.TempDir()
	// A KUBECONFIG naming no file, as client-go reads ~/.kube/config from the HOME the process started with.
	t.Setenv("KUBECONFIG", filepath.Join(home, "missing"))
	unreachable := filepath.Join(home, "unreachable")
	if err := os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: shop}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tree", "shop"}, "error: no kubeconfig: set KUBECONFIG, pass --kubeconfig"},
		{[]string{"wait", "vd", "shop"}, "error: no kubeconfig"},
		{[]string{"tree", "shop", "--kubeconfig", unreachable}, "error: cannot reach the API server https://127.0.0.1:1: dial tcp 127.0.0.1:1"},
		{[]string{"tree", "-A", "--kubeconfig", unreachable}, "error: cannot reach the API server https://127.0.0.1:1"},
		{[]string{"reconcile", "vd", "shop", "--kubeconfig", unreachable}, "error: cannot reach the API server https://127.0.0.1:1"},
		{[]string{"tree", "shop", "--kubeconfig", unreachable, "--context", "other"}, "error: kubeconfig: "},
	} {
		_, stderr, code := runBinary(t, c.args...)
		if code != exitFailure || !strings.HasPrefix(stderr, c.want) || strings.Contains(stderr, "KUBERNETES_MASTER") ||
			strings.Contains(stderr, "*v1alpha1") || strings.Contains(stderr, "namespaced") {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and %q", c.args, code, stderr, c.want)
		}
	}
}

// TestOutputYAML: every command that prints objects prints them as YAML too, with the JSON field names.
func TestOutputYAML(t *testing.T) {
	dir := t.TempDir()
	ocmtest.WriteCTF(t, dir, fixtures()...)
	ref := dir + "//acme.org/vectors/shop:1.0.0"
	for _, args := range [][]string{
		{"vector", "inspect", ref},
		{"name", "--component", "acme.org/x/app", "--version", "1.2.3"},
		{"version"},
	} {
		asJSON, stderr, code := runBinary(t, append(args, "-o", "json")...)
		if code != exitSuccess {
			t.Fatalf("%v -o json: exit %d: %s", args, code, stderr)
		}
		asYAML, stderr, code := runBinary(t, append(args, "-o", "yaml")...)
		if code != exitSuccess {
			t.Fatalf("%v -o yaml: exit %d: %s", args, code, stderr)
		}
		var fromJSON, fromYAML any
		if err := json.Unmarshal([]byte(asJSON), &fromJSON); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(asYAML), &fromYAML); err != nil {
			t.Fatalf("%v -o yaml: %v\n%s", args, err, asYAML)
		}
		if a, b := toYAML(t, fromJSON), toYAML(t, fromYAML); a != b {
			t.Errorf("%v: -o yaml differs from -o json:\n%s\n%s", args, b, a)
		}
	}
}

// TestInspectReportsEveryArtifact: an artifact that cannot be read is one line with its reason; the others are
// listed with their names, as the operator would deploy them, and the command exits 1.
func TestInspectReportsEveryArtifact(t *testing.T) {
	cvs := fixtures()
	missing := ocmtest.Artifact("acme.org/artifacts/missing", "3.0.0", "cloud.konfidence.flux.helm", true)
	vector := ocmtest.Vector("acme.org/vectors/shop", "1.0.0", cvs[0], missing, cvs[1])
	dir := t.TempDir()
	ocmtest.WriteCTF(t, dir, cvs[0], cvs[1], vector) // the vector's second artifact is not published
	ref := dir + "//acme.org/vectors/shop:1.0.0"

	stdout, stderr, code := runBinary(t, "vector", "inspect", ref, "-o", "json")
	var got inspection
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if code != exitFailure || !strings.Contains(stderr, "1 of 3 artifacts would not deploy") || len(got.Artifacts) != 3 {
		t.Fatalf("exit %d, stderr %q, artifacts %+v", code, stderr, got.Artifacts)
	}
	if a := got.Artifacts[1]; a.Component != "acme.org/artifacts/missing" || a.Version != "3.0.0" || a.Reason != "NotFound" || a.Name != "" ||
		!strings.Contains(a.Error, "in CTF directory "+dir) {
		t.Errorf("missing artifact = %+v", a)
	}
	for _, i := range []int{0, 2} {
		if a := got.Artifacts[i]; a.Name == "" || a.Error != "" {
			t.Errorf("artifact %d = %+v, want a name and no error", i, a)
		}
	}
	table, _, _ := runBinary(t, "vector", "inspect", ref)
	if lines := strings.Split(table, "\n"); len(lines) < 4 || !strings.Contains(lines[2], "NotFound: ") || !strings.HasSuffix(strings.TrimSpace(lines[1]), "ok") {
		t.Errorf("table:\n%s", table)
	} else if strings.Count(lines[2], "NotFound") != 1 {
		t.Errorf("the STATUS column names the reason more than once: %s", lines[2])
	}
}

// TestInspectAndRenderNameAlike: without --uid, vector inspect and render name a non-reusable artifact for the
// same placeholder VectorDeployment UID, and both say so.
func TestInspectAndRenderNameAlike(t *testing.T) {
	frontend := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3", "cloud.konfidence.flux.helm", true)
	database := ocmtest.Artifact("acme.org/artifacts/database", "16.4.0", "cloud.konfidence.flux.helm", false)
	dir := t.TempDir()
	ocmtest.WriteCTF(t, dir, frontend, database, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", frontend, database))
	ref := dir + "//acme.org/vectors/shop:1.0.0"
	stdout, stderr, code := runBinary(t, "vector", "inspect", ref, "-o", "json")
	var inspected inspection
	if err := json.Unmarshal([]byte(stdout), &inspected); code != exitSuccess || err != nil {
		t.Fatalf("inspect: exit %d, %v: %s", code, err, stderr)
	}
	if inspected.UID != string(placeholderUID) || !inspected.UIDPlaceholder {
		t.Errorf("inspect uid %q (placeholder %t), want the placeholder %s", inspected.UID, inspected.UIDPlaceholder, placeholderUID)
	}
	rendered, stderr, code := runBinary(t, "render", ref, "-n", "shop")
	if code != exitSuccess {
		t.Fatalf("render: exit %d: %s", code, stderr)
	}
	renderedNames := map[string]bool{}
	for _, u := range decodeObjects(t, rendered) {
		if u.GetKind() == "ArtifactDeployment" {
			renderedNames[u.GetName()] = true
		}
	}
	for _, a := range inspected.Artifacts {
		if !renderedNames[a.Name] {
			t.Errorf("inspect names %s %s, render does not (render: %v)", a.Component, a.Name, renderedNames)
		}
	}
	table, _, _ := runBinary(t, "vector", "inspect", ref)
	if !strings.Contains(table, "placeholder VectorDeployment UID "+string(placeholderUID)) ||
		!strings.Contains(rendered, "placeholder "+string(placeholderUID)) {
		t.Errorf("the placeholder is not named:\n%s\n%s", table, rendered)
	}
}

// TestRenderRefusesAnUnknownConfigurationKey: a key the deployer does not read is an error of render, with the
// reason the ArtifactDeployments would carry.
func TestRenderRefusesAnUnknownConfigurationKey(t *testing.T) {
	frontend := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3", "cloud.konfidence.flux.helm", true)
	dir := t.TempDir()
	ocmtest.WriteCTF(t, dir, frontend, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", frontend))
	if _, stderr, code := runBinary(t, "render", dir+"//acme.org/vectors/shop:1.0.0", "-n", "shop"); code != exitSuccess {
		t.Fatalf("render without a ConfigMap: exit %d, %s", code, stderr)
	}
	config := filepath.Join(t.TempDir(), "config.yaml")
	writeYAML(t, config, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "flux-deployer-configuration"}, Data: map[string]string{"intervall": "5m"}})
	_, stderr, code := runBinary(t, "render", dir+"//acme.org/vectors/shop:1.0.0", "-n", "shop", "--flux-deployer-config", config)
	if code != exitFailure || !strings.Contains(stderr, konfidencev1.UnknownConfigurationKeyReason+": intervall: unknown key") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
