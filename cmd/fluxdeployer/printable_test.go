package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// hostileStatus is a status message as a hostile registry or tenant may get it written: an OSC 52 sequence that
// sets the terminal's clipboard, a screen clear and a cursor move, BEL, CR, a C1 CSI, DEL and a right-to-left
// override.
const hostileStatus = "failed: \x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[1;1H\r\u009b31m\x7f\u202egnp.exe done"

// assertPrintable fails when out holds a character a terminal would act on instead of showing it.
func assertPrintable(t *testing.T, what, out string) {
	t.Helper()
	if i := strings.IndexFunc(out, func(r rune) bool { return r != '\n' && !unicode.IsPrint(r) }); i >= 0 {
		t.Errorf("%s holds the non-printable %q at byte %d:\n%q", what, []rune(out[i:])[0], i, out)
	}
}

// TestOutputIsPrintable: what the CLI prints of text from a registry or a status (a table's cells, -o json and -o
// yaml, an error) holds no character a terminal acts on; the structured formats keep the values exactly, escaped.
func TestOutputIsPrintable(t *testing.T) {
	inspected := inspection{Vector: "reg//v:1", UID: "u", Artifacts: []inspectedArtifact{{
		Component: "acme.org/\x1b[2Jx", Version: "1.0.0\u202e", Type: "helm\x07", Tasks: []ocm.Task{{Name: "migrate\x1b[1A"}},
		Resources: []inspectedResource{{Name: "chart\r", Type: "t\u009b"}}, Reason: "Unauthorized", Error: hostileStatus,
	}}}
	planned := plan{VectorDeployment: "shop", From: "a\x1b]52;c;eA==\x07", To: "b\u202e", Artifacts: []plannedArtifact{{
		Action: actionFail, Component: "c\x1b[H", Version: "1\r", Reason: "Unauthorized", Message: hostileStatus}}}

	for _, tc := range []struct {
		name  string
		print func(w *bytes.Buffer) error
	}{
		{"vector inspect table", func(w *bytes.Buffer) error { return printArtifactTable(w, inspected) }},
		{"diff table", func(w *bytes.Buffer) error { return printPlan(w, planned) }},
		{"json", func(w *bytes.Buffer) error { return printStructured(w, outputJSON, planned) }},
		{"yaml", func(w *bytes.Buffer) error { return printStructured(w, outputYAML, planned) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.print(&b); err != nil {
				t.Fatal(err)
			}
			assertPrintable(t, tc.name, b.String())
			if !strings.Contains(b.String(), "gnp.exe done") {
				t.Errorf("the message's words are gone:\n%s", b.String())
			}
		})
	}
	for _, format := range []string{outputJSON, outputYAML} {
		var b bytes.Buffer
		if err := printStructured(&b, format, planned); err != nil {
			t.Fatal(err)
		}
		var got plan
		if err := yaml.UnmarshalStrict(b.Bytes(), &got); err != nil { // JSON is YAML too
			t.Fatalf("-o %s does not parse: %v\n%s", format, err, b.String())
		}
		if diff := cmp.Diff(planned, got); diff != "" {
			t.Errorf("-o %s changed the values (-want +got):\n%s", format, diff)
		}
	}
}

// TestInspectErrorIsPrintable: `vector inspect` of a registry that refuses every request with 6 KiB of escapes
// fails with the registry's words on stderr, none of its escapes. Before, the terminal got them all.
func TestInspectErrorIsPrintable(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	reg.SetRefusing(ocmtest.HostileText(6 << 10))
	stdout, stderr, code := runBinary(t, "vector", "inspect", reg.Ref("", "acme.org/vectors/shop", "1.0.0"))
	if code != exitFailure || !strings.Contains(stderr, "registry says no") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	assertPrintable(t, "stdout", stdout)
	assertPrintable(t, "stderr", stderr)
}

// TestClusterOutputIsPrintable: the commands that show a VectorDeployment's or an ArtifactDeployment's status
// (wait, tree, get, in each of their formats) print a status message full of escapes without any of them. Before,
// wait printed the Ready and the Stalled message as they were, and -o json and -o yaml the bidirectional override.
func TestClusterOutputIsPrintable(t *testing.T) {
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	c := env.Client
	ns := newTestNamespace(t, c, "printable")
	cli, _ := envtestCLI(t, kubeconfigWithContexts(t, env.Kubeconfig, ns))

	shop := testenv.CreateVectorDeployment(t, c, ns, "shop", "registry.example.com/vectors//acme.org/vectors/shop:1.0.0")
	frontend := artifactDeployment(ns, "shop-frontend", "acme.org/artifacts/frontend", "1.2.3", "cloud.konfidence.flux.helm", shop)
	create(t, c, frontend)
	setStatus(t, c, shop, func() {
		shop.Status.ObservedGeneration = shop.Generation
		shop.Status.ResultingArtifactDeployments = map[string]konfidencev1.ResultingArtifactDeployment{
			"acme.org/artifacts/frontend": {Name: frontend.Name}}
		shop.Status.Conditions = []metav1.Condition{readyCondition(metav1.ConditionTrue, meta.SucceededReason, hostileStatus)}
	})
	setStatus(t, c, frontend, func() {
		frontend.Status.ObservedGeneration = frontend.Generation
		stalled := readyCondition(metav1.ConditionTrue, "InstallFailed", hostileStatus)
		stalled.Type = meta.StalledCondition
		frontend.Status.Conditions = []metav1.Condition{readyCondition(metav1.ConditionFalse, "InstallFailed", hostileStatus), stalled}
	})

	for _, args := range [][]string{
		{"wait", "vd", "shop", "--timeout", "30s"},
		{"wait", "ad", "shop-frontend", "--timeout", "30s"},
		{"tree", "shop"},
		{"tree", "shop", "-o", "json"},
		{"tree", "shop", "-o", "yaml"},
		{"get", "vd"},
		{"get", "ad", "-o", "json"},
		{"get", "ad", "-o", "yaml"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			stdout, stderr, _ := cli(args...)
			if !strings.Contains(stdout+stderr, "gnp.exe done") {
				t.Errorf("the message is not shown:\n%s%s", stdout, stderr)
			}
			assertPrintable(t, "stdout", stdout)
			assertPrintable(t, "stderr", stderr)
		})
	}
}
