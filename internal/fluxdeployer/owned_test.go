package fluxdeployer

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	openapi "k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// intrusion is what another writer of a Flux object adds to its spec: a server-side apply under its own field
// manager (forced), and a merge patch (an Update, as kubectl edit and kubectl patch send). tuned are the tuning
// fields a platform sets (server-side applied under a third field manager), which stay.
type intrusion struct {
	apiVersion, kind        string
	applied, patched, tuned map[string]any // spec fields
}

// TestForeignFields: every field of a Flux object's spec that the deployer leaves unset and that is not a tuning
// field, set by another writer (a second field manager, by server-side apply or by merge patch), is taken back at
// the next reconcile, with a FluxObjectUpdated event: what changes what is deployed, where from, with whose
// rights, through which proxy and CA, and what a teardown leaves behind. A defaulted field goes back to its
// default. The deployer's own fields are as before, the tuning fields a platform set stay, and neither a further
// reconcile nor a restarted deployer's writes anything.
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
				// A teardown that leaves the release and its objects behind, hooks that do not run, drift that
				// is not corrected.
				"uninstall":      map[string]any{"keepHistory": true, "deletionPropagation": "orphan"},
				"install":        map[string]any{"disableHooks": true},
				"driftDetection": map[string]any{"ignore": []any{map[string]any{"paths": []any{"/spec/template"}}}},
				"test":           map[string]any{"enable": true},
			},
			tuned: map[string]any{"timeout": "7m", "maxHistory": int64(3), "uninstall": map[string]any{"timeout": "9m"}},
		}, {
			apiVersion: source, kind: "HelmRepository",
			applied: map[string]any{"passCredentials": true, "certSecretRef": map[string]any{"name": "other-ca"}},
			patched: map[string]any{"secretRef": map[string]any{"name": "other-credentials"}, "provider": "aws"},
			tuned:   map[string]any{"timeout": "2m"},
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
			applied: map[string]any{"ref": map[string]any{"tag": "other"}, "proxySecretRef": map[string]any{"name": "proxy"}},
			patched: map[string]any{"certSecretRef": map[string]any{"name": "other-ca"}, "provider": "gcp"},
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
				// A teardown that orphans the workloads, drift that is not corrected.
				"deletionPolicy": "Orphan",
				"ignore":         []any{map[string]any{"paths": []any{"/spec/replicas"}}},
				"force":          true,
			},
			tuned: map[string]any{"retryInterval": "30s"},
		}, {
			apiVersion: source, kind: "OCIRepository",
			applied: map[string]any{"ref": map[string]any{"semver": ">=0.0.0"}, "layerSelector": map[string]any{"mediaType": "application/vnd.other"}},
			patched: map[string]any{"ignore": "*", "insecure": true, "provider": "azure", "serviceAccountName": "powerful"},
			tuned:   map[string]any{"timeout": "90s"},
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
				in.tune(t, h, ns, ad.Name)
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

			// Taken back, the objects are as desired: the next reconcile only reads, and so does a restarted
			// deployer's, which reads them from the API server with their defaults and tuning fields.
			h.assertReconcileOnlyReads(t, r, ad)
			restarted, _ := h.direct(ns)
			h.assertReconcileOnlyReads(t, restarted, ad)
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

// tune server-side applies in's tuning fields onto the Flux object of the ArtifactDeployment name as field
// manager "platform", and checks that they are stored.
func (in intrusion) tune(t *testing.T, h *harness, namespace, name string) {
	t.Helper()
	if in.tuned == nil {
		return
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": in.apiVersion, "kind": in.kind,
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     in.tuned,
	}}
	if err := h.env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("platform"), client.ForceOwnership); err != nil {
		t.Fatalf("applying %s's tuning fields: %v", in.kind, err)
	}
	if spec := storedSpec(t, h, in, namespace, name); !hasAll(spec, in.tuned) {
		t.Fatalf("%s after tuning: %v", in.kind, spec)
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

func toJSON(v any) string {
	out, _ := json.MarshalIndent(v, "", "  ")
	return string(out)
}

// TestForeignFieldPaths: which fields of a live spec are another writer's, against the deployer's desired spec,
// the allowed (tuning) fields and the schema's defaults.
func TestForeignFieldPaths(t *testing.T) {
	withDefault := func(v any) openapi.Schema { return openapi.Schema{SchemaProps: openapi.SchemaProps{Default: v}} }
	schema := &openapi.Schema{SchemaProps: openapi.SchemaProps{Properties: map[string]openapi.Schema{
		"provider":  withDefault("generic"),
		"force":     withDefault(false),
		"uninstall": {SchemaProps: openapi.SchemaProps{Properties: map[string]openapi.Schema{"deletionPropagation": withDefault("background")}}},
		"labels":    {SchemaProps: openapi.SchemaProps{AdditionalProperties: &openapi.SchemaOrBool{Schema: openapi.StringProperty()}}},
	}}}
	allowed := []string{"suspend", "timeout", "uninstall.timeout"}
	object := func(fields map[string]any) map[string]any { return map[string]any{"spec": fields} }
	for _, tc := range []struct {
		name          string
		desired, live map[string]any
		want          []string
	}{{
		name:    "as desired",
		desired: map[string]any{"url": "oci://a", "ref": map[string]any{"tag": "1"}},
		live:    map[string]any{"url": "oci://a", "ref": map[string]any{"tag": "1"}},
	}, {
		name:    "fields left unset",
		desired: map[string]any{"url": "oci://a"},
		live:    map[string]any{"url": "oci://a", "proxySecretRef": map[string]any{"name": "p"}, "insecure": false},
		want:    []string{"spec.insecure", "spec.proxySecretRef"},
	}, {
		name:    "keys added to a map the deployer sets",
		desired: map[string]any{"ref": map[string]any{"tag": "1"}, "labels": map[string]any{"a": "1"}},
		live:    map[string]any{"ref": map[string]any{"tag": "1", "semver": "*"}, "labels": map[string]any{"a": "1", "b": "2"}},
		want:    []string{"spec.labels.b", "spec.ref.semver"},
	}, {
		name:    "the deployer's values and lists are its apply's",
		desired: map[string]any{"url": "oci://a", "list": []any{"x"}},
		live:    map[string]any{"url": "oci://b", "list": []any{map[string]any{"y": "z"}}},
	}, {
		name:    "allowed fields and what lies below them",
		desired: map[string]any{},
		live:    map[string]any{"suspend": true, "timeout": map[string]any{"any": "thing"}},
	}, {
		name:    "defaults",
		desired: map[string]any{},
		live:    map[string]any{"provider": "generic", "force": false},
	}, {
		name:    "other than the default",
		desired: map[string]any{},
		live:    map[string]any{"provider": "aws", "force": true},
		want:    []string{"spec.force", "spec.provider"},
	}, {
		name:    "an object with an allowed field and others",
		desired: map[string]any{},
		live:    map[string]any{"uninstall": map[string]any{"timeout": "9m", "keepHistory": true, "deletionPropagation": "orphan"}},
		want:    []string{"spec.uninstall.deletionPropagation", "spec.uninstall.keepHistory"},
	}, {
		name:    "an object with only allowed and defaulted fields",
		desired: map[string]any{},
		live:    map[string]any{"uninstall": map[string]any{"timeout": "9m", "deletionPropagation": "background"}},
	}, {
		name:    "an allowed path is no prefix of a longer name",
		desired: map[string]any{},
		live:    map[string]any{"timeouts": "1m", "uninstallation": map[string]any{"timeout": "1m"}},
		want:    []string{"spec.timeouts", "spec.uninstallation"},
	}, {
		name: "no spec desired",
		live: map[string]any{"values": map[string]any{"a": "b"}},
		want: []string{"spec.values"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, path := range foreignFields(object(tc.desired), object(tc.live), allowed, schema) {
				got = append(got, strings.Join(path, "."))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("foreign fields %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTuningFieldsAreInTheSchema: every tuning field, and spec.suspend, names a field of its kind's spec in the
// installed CRD: one Flux renamed would have the platform's setting taken back.
func TestTuningFieldsAreInTheSchema(t *testing.T) {
	h := testHarness(t)
	for _, k := range ownedFluxKinds() {
		props, err := h.schemas.specSchema(k.gvk)
		if err != nil {
			t.Fatal(err)
		}
		for _, field := range slices.Concat(k.tuning, passedOnFields) {
			schema := props
			for _, key := range strings.Split(field, ".") {
				if schema = property(schema, key); schema == nil {
					t.Errorf("%s: the schema has no spec.%s", k.gvk.Kind, field)
					break
				}
			}
		}
	}
}
