package fluxdeployer

import (
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestBadInput: input the deployer cannot deploy ends as a terminal Ready=False/Stalled=True with the reason
// (and a warning event), never as Flux objects; an ArtifactDeployment of another deployer is not touched.
func TestBadInput(t *testing.T) {
	h := testHarness(t)
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
		if diff := cmp.Diff(ad.ResourceVersion, got.ResourceVersion); diff != "" {
			t.Errorf("ArtifactDeployment of another type was written (-want +got resourceVersion):\n%s", diff)
		}
		if diff := cmp.Diff([]metav1.Condition(nil), got.Status.Conditions, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ArtifactDeployment of another type got conditions (-want +got):\n%s", diff)
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
		secrets            []string // Secrets that exist in the case's namespace
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
		// Verified and deployed could differ: the API server sorts the keys, and the last one would win.
		name: "case-variant access keys", manifestType: KustomizeManifestType,
		resources: []konfidencev1.Resource{resource("bundle", "kustomize",
			`{"type":"ociArtifact","imagereference":"registry.example.com/bundles/evil:1","imageReference":"registry.example.com/bundles/good:1"}`)},
		reason: konfidencev1.InvalidAccessSpecReason, message: `keys "imageReference" and "imagereference" name one field`,
	}, {
		// The vector chose plain HTTP; the pull Secret is the platform's.
		name: "credentials over plain http", manifestType: KustomizeManifestType,
		resources: []konfidencev1.Resource{resource("bundle", "kustomize", ociAccess("ociArtifact", "http://localhost:5000/bundles/backend:1.2.3"))},
		config:    plainHTTPCredentials,
		secrets:   []string{"registry-credentials"},
		reason:    konfidencev1.CredentialsRequireTLSReason, message: "Secret registry-credentials for localhost:5000",
	}, {
		name: "credentials over plain http to a helm repository", manifestType: HelmManifestType,
		resources: []konfidencev1.Resource{resource("chart", "helmChart", `{"type":"helm","helmRepository":"http://localhost:5000/charts","helmChart":"app:1.0.0"}`)},
		config:    plainHTTPCredentials,
		secrets:   []string{"registry-credentials"},
		reason:    konfidencev1.CredentialsRequireTLSReason, message: "Secret registry-credentials for localhost:5000",
	}, {
		name: "invalid configmap", manifestType: HelmManifestType,
		resources: []konfidencev1.Resource{chart},
		config:    map[string]string{waitKey: "sometimes", helmSourceKey: "git", deploymentTargetsKey: "ns: {}"},
		reason:    konfidencev1.InvalidConfigurationReason, message: "invalid deploymentTargets, helmSource, wait: nothing is deployed",
	}, {
		name: "invalid service account", manifestType: KustomizeManifestType,
		resources: []konfidencev1.Resource{resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3"))},
		config:    map[string]string{serviceAccountNameKey: "Flux Applier"},
		reason:    konfidencev1.InvalidConfigurationReason, message: "invalid serviceAccountName",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "bad-" + strings.ReplaceAll(tc.name, " ", "-")
			h.namespace(t, ns)
			h.configMap(t, ns, tc.config)
			for _, name := range tc.secrets {
				h.create(t, pullSecret(ns, name))
			}
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

	t.Run("credentials over plain http to an allowed host", func(t *testing.T) {
		ns := "bad-allowed-plain-http-credentials"
		h.namespace(t, ns)
		h.configMap(t, ns, map[string]string{
			authenticationSecretRefsKey: plainHTTPCredentials[authenticationSecretRefsKey],
			insecureCredentialsHostsKey: "- localhost:5000\n",
		})
		h.create(t, pullSecret(ns, "registry-credentials"))
		r, _ := h.direct(ns)
		ad := artifactDeployment(ns, "backend-1-2-3-e1mvwibzp5", KustomizeManifestType,
			resource("bundle", "kustomize", ociAccess("ociArtifact", "http://localhost:5000/bundles/backend:1.2.3")))
		h.create(t, ad)
		if _, err := h.reconcile(t, r, ad); err != nil {
			t.Fatal(err)
		}
		repo := &sourcev1.OCIRepository{}
		h.get(t, ns, ad.Name, repo)
		type pull struct {
			Insecure  bool
			SecretRef *meta.LocalObjectReference
		}
		if diff := cmp.Diff(pull{true, &meta.LocalObjectReference{Name: "registry-credentials"}}, pull{repo.Spec.Insecure, repo.Spec.SecretRef}); diff != "" {
			t.Errorf("OCIRepository: want the Secret over plain HTTP, as allowed (-want +got):\n%s", diff)
		}
	})

	t.Run("invalid configmap names every error", func(t *testing.T) {
		_, err := parseConfig(map[string]string{waitKey: "sometimes", helmSourceKey: "git", deploymentTargetsKey: "ns: {}", intervalKey: "10us"})
		for _, key := range []string{waitKey, helmSourceKey, deploymentTargetsKey, intervalKey} {
			if err == nil || !strings.Contains(err.Error(), key+":") {
				t.Errorf("error %v does not name %s", err, key)
			}
		}
	})
}

// plainHTTPCredentials configures a pull Secret for a plain-HTTP registry.
var plainHTTPCredentials = map[string]string{authenticationSecretRefsKey: "localhost:5000: registry-credentials\n"}

func pullSecret(namespace, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
}

// TestAccessKeysAreUnique: an access whose keys repeat, exactly or as encoding/json folds them, is refused rather
// than read with whichever key comes last.
func TestAccessKeysAreUnique(t *testing.T) {
	for name, access := range map[string]string{
		"exact duplicate":    `{"type":"ociArtifact","imageReference":"registry.example.com/a/good:1","imageReference":"registry.example.com/a/evil:1"}`,
		"case variant":       `{"type":"ociArtifact","imageReference":"registry.example.com/a/good:1","IMAGEREFERENCE":"registry.example.com/a/evil:1"}`,
		"unicode fold":       `{"type":"helm","helmRepository":"https://good.example.com","helmRepo\u017fitory":"https://evil.example.com","helmChart":"app:1.0.0"}`,
		"type case variant":  `{"type":"ociArtifact","Type":"helm","imageReference":"registry.example.com/a/good:1"}`,
		"unknown keys clash": `{"type":"ociArtifact","imageReference":"registry.example.com/a/good:1","extra":1,"EXTRA":2}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := resolveAccess(ptr.To(resource("r", "kustomize", access)))
			assertFailure(t, err, konfidencev1.InvalidAccessSpecReason, true)
		})
	}
	// Keys that differ beyond case are no clash, nested objects are not read.
	if _, err := resolveAccess(ptr.To(resource("r", "kustomize",
		`{"type":"ociArtifact","imageReference":"registry.example.com/a/good:1","imageReferences":[],"globalAccess":{"type":"x","TYPE":"y"}}`))); err != nil {
		t.Errorf("distinct keys refused: %v", err)
	}
}

// TestAccessSpecs covers every OCM alias of the supported access types and the image reference grammar.
func TestAccessSpecs(t *testing.T) {
	for _, typ := range []string{"OCIImage/v1", "OCIImage", "ociImage/v1", "ociImage", "ociArtifact/v1", "ociArtifact", "ociRegistry/v1", "ociRegistry"} {
		a, err := resolveAccess(ptr.To(resource("r", "kustomize", ociAccess(typ, "registry.example.com/a/b:1"))))
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if diff := cmp.Diff([]string{"oci://registry.example.com/a/b", "1"}, []string{a.ociURL(), a.tag}); diff != "" {
			t.Errorf("%s: URL and tag (-want +got):\n%s", typ, diff)
		}
	}
	for _, typ := range []string{"Helm/v1", "Helm", "helm/v1", "helm"} {
		a, err := resolveAccess(ptr.To(resource("r", "helmChart", `{"type":"`+typ+`","helmRepository":"https://charts.example.com/","helmChart":"app","version":"1.0.0"}`)))
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if diff := cmp.Diff([]string{"https://charts.example.com", "app", "1.0.0"}, []string{a.helmRepositoryURL, a.chart, a.version}); diff != "" {
			t.Errorf("%s: repository, chart and version (-want +got):\n%s", typ, diff)
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
		if err != nil {
			t.Errorf("%s: %v", ref, err)
		} else if diff := cmp.Diff(want, got, cmp.AllowUnexported(artifact{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", ref, diff)
		}
	}
	for _, ref := range []string{"", "app:1", "ghcr.io/org/app", "ghcr.io/Org/app:1", "ghcr.io/org/app:1@sha256", "ghcr.io/org/app:bad:tag", "ghcr.io//app:1", "ftp://ghcr.io/app:1"} {
		if got, err := parseImageReference(ref); err == nil {
			t.Errorf("%q accepted as %+v", ref, got)
		}
	}
}
