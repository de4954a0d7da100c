package fluxdeployer

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// intrusion is what another writer of a Flux object adds to its spec: a server-side apply under its own field
// manager (forced), and a merge patch (an Update, as kubectl edit and kubectl patch send).
type intrusion struct {
	apiVersion, kind string
	applied, patched map[string]any // spec fields
}

// TestForeignFields: fields of a Flux object's spec that change what is deployed, where from or with whose rights,
// set by another writer (a second field manager, by server-side apply or by merge patch), are taken back at the
// next reconcile, with a FluxObjectUpdated event; the deployer's own fields are as before, and a further
// reconcile writes nothing.
func TestForeignFields(t *testing.T) {
	h := testHarness(t)
	kustomization := "kustomize.toolkit.fluxcd.io/v1"
	helmRelease := "helm.toolkit.fluxcd.io/v2"
	source := "source.toolkit.fluxcd.io/v1"
	for _, tc := range []struct {
		name       string
		config     map[string]string
		ad         func(ns string) *konfidencev1.ArtifactDeployment
		intrusions []intrusion
	}{{
		name: "helm",
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "frontend-1-2-3-build-5-e1mvwibzp5", HelmManifestType,
				resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3")))
		},
		intrusions: []intrusion{{
			apiVersion: helmRelease, kind: "HelmRelease",
			applied: map[string]any{
				"values":         map[string]any{"greeting": "altered"},
				"postRenderers":  []any{map[string]any{"kustomize": map[string]any{"images": []any{map[string]any{"name": "web", "newName": "evil.example.com/web"}}}}},
				"chart":          map[string]any{"spec": map[string]any{"sourceRef": map[string]any{"namespace": "elsewhere"}, "valuesFiles": []any{"evil.yaml"}}},
				"commonMetadata": map[string]any{"labels": map[string]any{"extra": "label"}, "annotations": map[string]any{"extra": "annotation"}},
			},
			patched: map[string]any{
				"valuesFrom":         []any{map[string]any{"kind": "ConfigMap", "name": "altered-values"}},
				"serviceAccountName": "powerful",
			},
		}, {
			apiVersion: source, kind: "HelmRepository",
			applied: map[string]any{"passCredentials": true},
			patched: map[string]any{"secretRef": map[string]any{"name": "other-credentials"}},
		}},
	}, {
		name:   "helm chartref",
		config: map[string]string{helmSourceKey: HelmSourceChartRef},
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "frontend-1-2-3-build-5-e1mvwibzp5", HelmManifestType,
				resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3@"+testDigest)))
		},
		intrusions: []intrusion{{
			apiVersion: helmRelease, kind: "HelmRelease",
			applied: map[string]any{"chartRef": map[string]any{"namespace": "elsewhere"}},
		}, {
			apiVersion: source, kind: "OCIRepository",
			applied: map[string]any{"ref": map[string]any{"tag": "other"}},
		}},
	}, {
		name: "kustomize",
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "backend-1-2-3-build-5-e1mvwibzp5", KustomizeManifestType,
				resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3")))
		},
		intrusions: []intrusion{{
			apiVersion: kustomization, kind: "Kustomization",
			applied: map[string]any{
				"patches":   []any{map[string]any{"patch": "- op: replace\n  path: /data/greeting\n  value: altered\n", "target": map[string]any{"kind": "ConfigMap"}}},
				"images":    []any{map[string]any{"name": "web", "newName": "evil.example.com/web"}},
				"sourceRef": map[string]any{"namespace": "elsewhere"},
			},
			patched: map[string]any{
				"postBuild":  map[string]any{"substitute": map[string]any{"greeting": "altered"}},
				"namePrefix": "other-",
				"components": []any{"../altered"},
			},
		}, {
			apiVersion: source, kind: "OCIRepository",
			applied: map[string]any{"ref": map[string]any{"semver": ">=0.0.0"}, "layerSelector": map[string]any{"mediaType": "application/vnd.other"}},
			patched: map[string]any{"ignore": "*", "insecure": true},
		}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "foreign-" + strings.ReplaceAll(tc.name, " ", "-")
			h.namespace(t, ns)
			h.configMap(t, ns, tc.config)
			r, recorder := h.direct(ns)
			ad := tc.ad(ns)
			h.create(t, ad)
			if _, err := h.reconcile(t, r, ad); err != nil {
				t.Fatal(err)
			}
			before := map[string]map[string]any{}
			for _, in := range tc.intrusions {
				before[in.kind] = storedSpec(t, h, in, ns, ad.Name)
				in.intrude(t, h, ns, ad.Name)
				if spec := storedSpec(t, h, in, ns, ad.Name); !hasAll(spec, in.applied) || !hasAll(spec, in.patched) {
					t.Fatalf("%s after the intrusion: %v", in.kind, spec)
				}
			}
			drainEvents(recorder)

			if _, err := h.reconcile(t, r, ad); err != nil {
				t.Fatal(err)
			}
			for _, in := range tc.intrusions {
				if spec := storedSpec(t, h, in, ns, ad.Name); !equalJSON(spec, before[in.kind]) {
					t.Errorf("%s spec after the reconcile:\n%s\nwant it as the deployer applied it:\n%s", in.kind, toJSON(spec), toJSON(before[in.kind]))
				}
			}
			evs := drainEvents(recorder)
			assertEvent(t, evs, corev1.EventTypeNormal, konfidencev1.FluxObjectUpdatedReason)

			// Taken back, the objects are as desired: the next reconcile only reads.
			h.assertReconcileOnlyReads(t, r, ad)
		})
	}
}

// intrude writes in's fields onto the Flux object of the ArtifactDeployment name: applied by server-side apply as
// field manager "intruder", patched by a merge patch as field manager "editor".
func (in intrusion) intrude(t *testing.T, h *harness, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	if in.applied != nil {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": in.apiVersion, "kind": in.kind,
			"metadata": map[string]any{"name": name, "namespace": namespace},
			"spec":     in.applied,
		}}
		if err := h.env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("intruder"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s as another field manager: %v", in.kind, err)
		}
	}
	if in.patched != nil {
		data, err := json.Marshal(map[string]any{"spec": in.patched})
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(in.apiVersion)
		u.SetKind(in.kind)
		u.SetNamespace(namespace)
		u.SetName(name)
		if err := h.env.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, data), client.FieldOwner("editor")); err != nil {
			t.Fatalf("patching %s as another field manager: %v", in.kind, err)
		}
	}
}

// storedSpec reads the spec of in's kind as the API server stores it.
func storedSpec(t *testing.T, h *harness, in intrusion, namespace, name string) map[string]any {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(in.apiVersion)
	u.SetKind(in.kind)
	h.get(t, namespace, name, u)
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	return spec
}

// hasAll tells whether spec holds every field of want with its value (maps may hold more).
func hasAll(spec, want map[string]any) bool {
	return want == nil || contains(spec, want)
}

func equalJSON(a, b any) bool { return toJSON(a) == toJSON(b) }

func toJSON(v any) string {
	out, _ := json.MarshalIndent(v, "", "  ")
	return string(out)
}
