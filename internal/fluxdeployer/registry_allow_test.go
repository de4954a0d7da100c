package fluxdeployer

import (
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestRegistryAllowList: with --allowed-registries, an ArtifactDeployment a tenant created directly, whose artifact
// would be pulled from a host the list does not name (an OCI registry, a Helm repository, a cloud metadata address),
// gets RegistryNotAllowed (Stalled, a Warning event naming the host) and no Flux object, so source-controller never
// pulls from it; Flux objects applied while the host was allowed are suspended. Before, the Flux objects were
// applied whatever the host.
func TestRegistryAllowList(t *testing.T) {
	h := testHarness(t)
	allowed := []string{"registry.example.com"}
	for _, tc := range []struct {
		name, manifestType string
		resource           konfidencev1.Resource
		host               string
	}{
		{"oci chart", HelmManifestType, resource("chart", "helmChart", ociAccess("ociArtifact", "169.254.169.254/charts/app:1.0.0")), "169.254.169.254"},
		{"helm repository", HelmManifestType, resource("chart", "helmChart",
			`{"type":"helm","helmRepository":"https://100.100.100.200/charts","helmChart":"app:1.0.0"}`), "100.100.100.200"},
		{"kustomize bundle on another port", KustomizeManifestType, resource("bundle", "kustomize",
			ociAccess("ociArtifact", "http://registry.example.com:8080/bundles/backend:1.2.3")), "registry.example.com:8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "registry-allow-" + strings.ReplaceAll(tc.name, " ", "-")
			h.namespace(t, ns)
			r, recorder := h.direct(ns)
			r.allowedRegistries = allowed
			ad := artifactDeployment(ns, "backend-1-2-3-e1mvwibzp5", tc.manifestType, tc.resource)
			h.create(t, ad)
			got, err := h.reconcile(t, r, ad)
			if err != nil {
				t.Fatalf("a refused registry is terminal, not retried: %v", err)
			}
			assertCondition(t, got, meta.ReadyCondition, False, konfidencev1.RegistryNotAllowedReason)
			assertCondition(t, got, meta.StalledCondition, True, konfidencev1.RegistryNotAllowedReason)
			if msg := conditions.GetMessage(got, meta.ReadyCondition); !strings.Contains(msg, tc.host+",") {
				t.Errorf("Ready message %q does not name %s", msg, tc.host)
			}
			assertEvent(t, drainEvents(recorder), corev1.EventTypeWarning, konfidencev1.RegistryNotAllowedReason)
			h.assertNoFluxObjects(t, ns)
		})
	}

	t.Run("a host taken off the list", func(t *testing.T) {
		ns := "registry-allow-taken-off"
		h.namespace(t, ns)
		r, _ := h.direct(ns)
		r.allowedRegistries = allowed
		ad := deployed(t, h, r, ns) // its bundle is on registry.example.com

		// The list is a flag: the operator restarted with another one.
		restarted, recorder := h.direct(ns)
		restarted.allowedRegistries = []string{"other.example.com"}
		got, err := h.reconcile(t, restarted, ad)
		if err != nil {
			t.Fatalf("a refused registry is terminal, not retried: %v", err)
		}
		assertCondition(t, got, meta.StalledCondition, True, konfidencev1.RegistryNotAllowedReason)
		assertEvent(t, drainEvents(recorder), corev1.EventTypeWarning, konfidencev1.RegistryNotAllowedReason)
		k := &kustomizev1.Kustomization{}
		h.get(t, ns, ad.Name, k)
		if !k.Spec.Suspend {
			t.Error("the Kustomization applied while the host was allowed still acts: not suspended")
		}
	})
}
