package e2e

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// alterations are what another writer of the Flux objects (anyone who may patch them) adds to change what a
// verified vector deploys: values for the chart, a patch for the bundle, each changing the greeting; and what a
// teardown leaves behind: the release's objects orphaned on uninstall, the bundle's on deletion.
var alterations = map[string]map[string]any{
	"HelmRelease": {"values": map[string]any{"greeting": "altered"}, "uninstall": map[string]any{"deletionPropagation": "orphan"}},
	"Kustomization": {
		"patches":        []any{map[string]any{"patch": "- op: replace\n  path: /data/greeting\n  value: altered\n", "target": map[string]any{"kind": "ConfigMap"}}},
		"deletionPolicy": "Orphan",
	},
}

// TestAlteredFluxObjectsAreTakenBack: a vector's chart and bundle run under the real helm-controller and
// kustomize-controller; another field manager server-side applies spec.values and an orphaning
// uninstall.deletionPropagation onto the HelmRelease, spec.patches and deletionPolicy Orphan onto the
// Kustomization. fluxdeployer takes every field back and Flux deploys the verified content again. Once with the
// operator running (it reverts as the change arrives), once with the operator stopped, so that Flux first deploys
// the altered content, which is reverted when the operator is back.
func TestAlteredFluxObjectsAreTakenBack(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	chart := helmArtifact(t, reg, "acme.org/artifacts/web", "1.0.0", true, ocmtest.WebChart("web", "1.0.0"))
	bundle := kustomizeArtifact(t, reg, "acme.org/artifacts/config", "0.4.0", ocmtest.ConfigBundle)
	reg.Push(t, "", chart, bundle, ocmtest.Vector("acme.org/vectors/owned", "1.0.0", chart, bundle))

	ns := newNamespace(t, "owned")
	stop := startFluxdeployer(t, nil)
	vd := createVectorDeployment(t, ns, "owned", reg.Ref("", "acme.org/vectors/owned", "1.0.0"))
	waitReady(t, 3*time.Minute, vd)
	release := adName(t, chart, nil)
	bundleName, hash := artifactName(t, bundle)
	fluxObjects := map[string]client.Object{
		"HelmRelease":   &helmv2.HelmRelease{},
		"Kustomization": &kustomizev1.Kustomization{},
	}
	names := map[string]string{"HelmRelease": release, "Kustomization": bundleName}
	configMaps := map[string]string{"HelmRelease": release + "-config", "Kustomization": "app-config-0-4-0-" + hash}
	greetings := func(want string) error {
		for kind, name := range configMaps {
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
				return err
			}
			if got := cm.Data["greeting"]; got != want {
				return fmt.Errorf("the %s's ConfigMap %s says %q, want %q", kind, name, got, want)
			}
		}
		return nil
	}
	// The verified content, deployed by Flux for the objects' current generation, none of the alterations left.
	verified := func() error {
		for kind, obj := range fluxObjects {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names[kind]}, obj); err != nil {
				return err
			}
			u := &unstructured.Unstructured{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names[kind]}, withKind(t, u, obj)); err != nil {
				return err
			}
			for _, path := range leaves([]string{"spec"}, alterations[kind]) {
				altered, _, _ := unstructured.NestedFieldNoCopy(map[string]any{"spec": alterations[kind]}, path...)
				if value, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...); found && reflect.DeepEqual(value, altered) {
					return fmt.Errorf("%s %s still has %s: %v", kind, names[kind], strings.Join(path, "."), value)
				}
			}
			if fo := obj.(interface {
				client.Object
				conditions.Getter
			}); !conditions.IsReady(fo) || conditions.Get(fo, "Ready").ObservedGeneration != fo.GetGeneration() {
				return fmt.Errorf("%s %s generation %d: Ready %+v", kind, names[kind], fo.GetGeneration(), conditions.Get(fo, "Ready"))
			}
		}
		return greetings("hello")
	}
	alter := func() {
		t.Helper()
		for kind, spec := range alterations {
			u := withKind(t, &unstructured.Unstructured{}, fluxObjects[kind])
			u.SetNamespace(ns)
			u.SetName(names[kind])
			u.Object["spec"] = spec
			if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("intruder"), client.ForceOwnership); err != nil {
				t.Fatalf("altering %s %s: %v", kind, names[kind], err)
			}
		}
	}
	testenv.Eventually(t, time.Minute, verified)

	alter()
	testenv.Eventually(t, 3*time.Minute, verified)

	if stop == nil {
		t.Log("on an existing cluster the installed operator cannot be stopped: the operator-down case is not run")
		return
	}
	stop()
	alter()
	testenv.Eventually(t, 3*time.Minute, func() error { return greetings("altered") })
	startFluxdeployer(t, nil)
	testenv.Eventually(t, 3*time.Minute, verified)
}

// leaves lists the paths of m's values that are not maps, below path.
func leaves(path []string, m map[string]any) [][]string {
	var out [][]string
	for key, value := range m {
		p := append(slices.Clone(path), key)
		if sub, ok := value.(map[string]any); ok {
			out = append(out, leaves(p, sub)...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// withKind sets u's apiVersion and kind to typed's.
func withKind(t *testing.T, u *unstructured.Unstructured, typed client.Object) *unstructured.Unstructured {
	t.Helper()
	gvk, err := env.Client.GroupVersionKindFor(typed)
	if err != nil {
		t.Fatal(err)
	}
	u.SetGroupVersionKind(gvk)
	return u
}
