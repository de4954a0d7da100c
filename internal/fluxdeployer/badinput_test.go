package fluxdeployer

import (
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// testBadInput: input the deployer cannot deploy ends as a terminal Ready=False/Stalled=True with the reason
// (and a warning event), never as Flux objects; an ArtifactDeployment of another deployer is not touched.
func testBadInput(t *testing.T, h *harness) {
	chart := resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3"))

	t.Run("unknown manifest type ignored", func(t *testing.T) {
		ns := "bad-unknown-type"
		h.namespace(t, ns)
		h.configMap(t, ns, nil)
		r, recorder := h.direct(ns)
		ad := artifactDeployment(ns, "frontend-1-2-3-e1mvwibzp5", "cloud.konfidence.terraform", chart)
		h.create(t, ad)
		got, err := h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != ad.ResourceVersion || len(got.Status.Conditions) != 0 {
			t.Errorf("ArtifactDeployment of another type was written: resourceVersion %s → %s, conditions %v",
				ad.ResourceVersion, got.ResourceVersion, got.Status.Conditions)
		}
		if evs := drainEvents(recorder); len(evs) != 0 {
			t.Errorf("events for an ignored ArtifactDeployment: %q", evs)
		}
		h.assertNoFluxObjects(t, ns)
	})

	for _, tc := range []struct {
		name, manifestType string
		resources          []konfidencev1.Resource
		config             map[string]string
		reason, message    string
	}{{
		name: "two charts", manifestType: HelmManifestType,
		resources: []konfidencev1.Resource{chart, resource("chart-2", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/other:1.0.0"))},
		reason:    konfidencev1.MultipleHelmChartResourcesReason, message: "[chart chart-2]",
	}, {
		name: "two bundles", manifestType: KustomizeManifestType,
		resources: []konfidencev1.Resource{
			resource("a", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/a:1")),
			resource("b", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/b:1")),
		},
		reason: konfidencev1.MultipleKustomizeResourcesReason, message: "2 resources of type kustomize",
	}, {
		name: "no chart", manifestType: HelmManifestType,
		resources: []konfidencev1.Resource{resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/a:1"))},
		reason:    konfidencev1.NoDeployableResourceReason, message: "no resource of type helmChart",
	}, {
		name: "unsupported access type", manifestType: HelmManifestType,
		resources: []konfidencev1.Resource{resource("chart", "helmChart", `{"type":"localBlob","localReference":"sha256:abc"}`)},
		reason:    konfidencev1.UnsupportedAccessTypeReason, message: `"localBlob"`,
	}, {
		name: "malformed image reference", manifestType: KustomizeManifestType,
		resources: []konfidencev1.Resource{resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/Bundles/UPPER"))},
		reason:    konfidencev1.InvalidAccessSpecReason, message: "registry.example.com/Bundles/UPPER",
	}, {
		name: "invalid configmap", manifestType: HelmManifestType,
		resources: []konfidencev1.Resource{chart},
		config:    map[string]string{waitKey: "sometimes", helmSourceKey: "git", deploymentTargetsKey: "ns: {}"},
		reason:    konfidencev1.InvalidConfigurationReason, message: "wait: strconv.ParseBool",
	}, {
		name: "unknown configmap key", manifestType: HelmManifestType,
		resources: []konfidencev1.Resource{chart},
		config:    map[string]string{"intervall": "5m"},
		reason:    konfidencev1.UnknownConfigurationKeyReason, message: "intervall: unknown key (known: ",
	}, {
		name: "invalid service account", manifestType: KustomizeManifestType,
		resources: []konfidencev1.Resource{resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3"))},
		config:    map[string]string{serviceAccountNameKey: "Flux Applier"},
		reason:    konfidencev1.InvalidConfigurationReason, message: "serviceAccountName:",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "bad-" + strings.ReplaceAll(tc.name, " ", "-")
			h.namespace(t, ns)
			h.configMap(t, ns, tc.config)
			r, recorder := h.direct(ns)
			ad := artifactDeployment(ns, "frontend-1-2-3-e1mvwibzp5", tc.manifestType, tc.resources...)
			h.create(t, ad)
			got, err := h.reconcile(t, r, ad)
			if err != nil {
				t.Fatalf("a terminal failure is not retried, got error %v", err)
			}
			assertCondition(t, got, meta.ReadyCondition, False, tc.reason)
			assertCondition(t, got, meta.StalledCondition, True, tc.reason)
			if msg := conditionOf(got, meta.ReadyCondition).Message; !strings.Contains(msg, tc.message) {
				t.Errorf("Ready message %q does not mention %q", msg, tc.message)
			}
			if got.Status.ObservedGeneration != got.Generation {
				t.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
			}
			assertEvent(t, drainEvents(recorder), corev1.EventTypeWarning, tc.reason)
			h.assertNoFluxObjects(t, ns)
		})
	}

	t.Run("invalid configmap names every error", func(t *testing.T) {
		_, err := parseConfig(map[string]string{waitKey: "sometimes", helmSourceKey: "git", deploymentTargetsKey: "ns: {}", intervalKey: "10us"})
		for _, key := range []string{waitKey, helmSourceKey, deploymentTargetsKey, intervalKey} {
			if err == nil || !strings.Contains(err.Error(), key+":") {
				t.Errorf("error %v does not name %s", err, key)
			}
		}
	})
}

// TestAccessSpecs covers every OCM alias of the supported access types and the image reference grammar.
func TestAccessSpecs(t *testing.T) {
	for _, typ := range []string{"OCIImage/v1", "OCIImage", "ociImage/v1", "ociImage", "ociArtifact/v1", "ociArtifact", "ociRegistry/v1", "ociRegistry"} {
		a, err := resolveAccess(ptr.To(resource("r", "kustomize", ociAccess(typ, "registry.example.com/a/b:1"))))
		if err != nil || a.ociURL() != "oci://registry.example.com/a/b" || a.tag != "1" {
			t.Errorf("%s: %+v, %v", typ, a, err)
		}
	}
	for _, typ := range []string{"Helm/v1", "Helm", "helm/v1", "helm"} {
		a, err := resolveAccess(ptr.To(resource("r", "helmChart", `{"type":"`+typ+`","helmRepository":"https://charts.example.com/","helmChart":"app","version":"1.0.0"}`)))
		if err != nil || a.helmRepositoryURL != "https://charts.example.com" || a.chart != "app" || a.version != "1.0.0" {
			t.Errorf("%s: %+v, %v", typ, a, err)
		}
	}
	for ref, want := range map[string]artifact{
		"localhost:5000/a:1":                        {host: "localhost:5000", repository: "a", tag: "1"},
		"http://localhost:5000/a/b/c:1.0.0_build.1": {host: "localhost:5000", repository: "a/b/c", tag: "1.0.0_build.1", insecure: true},
		"https://ghcr.io/org/app:v1":                {host: "ghcr.io", repository: "org/app", tag: "v1"},
		"oci://ghcr.io/org/app@" + testDigest:       {host: "ghcr.io", repository: "org/app", digest: testDigest},
		"ghcr.io/org/app:v1@" + testDigest:          {host: "ghcr.io", repository: "org/app", tag: "v1", digest: testDigest},
		"[::1]:5000/org/app:v1":                     {host: "[::1]:5000", repository: "org/app", tag: "v1"},
	} {
		got, err := parseImageReference(ref)
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", ref, got, err, want)
		}
	}
	for _, ref := range []string{"", "app:1", "ghcr.io/org/app", "ghcr.io/Org/app:1", "ghcr.io/org/app:1@sha256", "ghcr.io/org/app:bad:tag", "ghcr.io//app:1", "ftp://ghcr.io/app:1"} {
		if got, err := parseImageReference(ref); err == nil {
			t.Errorf("%q accepted as %+v", ref, got)
		}
	}
}
