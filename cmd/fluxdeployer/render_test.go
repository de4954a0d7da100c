package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestRenderIsWhatTheOperatorCreates renders a vector (a reusable and a non-reusable chart, a Kustomize bundle;
// chartRef mode, a pull Secret), applies the rendered objects to a real API server, then deletes them and lets
// the running operator (both reconcilers) create its own for a VectorDeployment of that vector; every object
// must be the same, field by field: spec, labels, annotations and owner references, UIDs aside, and no object
// more or less.
func TestRenderIsWhatTheOperatorCreates(t *testing.T) {
	ctx := context.Background()
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	reg := ocmtest.NewRegistry(t)
	frontend := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3+build.5", "cloud.konfidence.flux.helm", true)
	database := ocmtest.Artifact("acme.org/artifacts/database", "16.4.0", "cloud.konfidence.flux.helm", false)
	config := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", "cloud.konfidence.flux.kustomize", true)
	config.Resources[1] = ocmtest.BundleResource("0.4.0", "ghcr.io/acme/bundles/config:0.4.0")
	reg.Push(t, "", frontend, database, config, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", frontend, database, config))
	ref := reg.Ref("", "acme.org/vectors/shop", "1.0.0")

	ns := newTestNamespace(t, env.Client, "render")
	configNS := newTestNamespace(t, env.Client, "operator")
	configData := map[string]string{"helmSource": "chartRef", "interval": "5m", "authenticationSecretRefs": "ghcr.io: ghcr-pull"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: configNS, Name: "flux-deployer-configuration"}, Data: configData}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	configFile := filepath.Join(t.TempDir(), "config.yaml")
	writeYAML(t, configFile, cm)
	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghcr-pull"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	if err := env.Client.Create(ctx, pull); err != nil {
		t.Fatal(err)
	}
	// The VectorDeployment exists before the operator runs, so its UID can be given to render.
	vd := testenv.CreateVectorDeployment(t, env.Client, ns, "shop", ref)

	out, err := runCLI(t, "render", ref, "--namespace", ns, "--uid", string(vd.UID), "--flux-deployer-config", configFile, "--secret", "ghcr-pull")
	if err != nil {
		t.Fatalf("render: %v\n%s", err, out)
	}
	rendered := decodeObjects(t, out)
	if kinds := countKinds(rendered); !reflect.DeepEqual(kinds, map[string]int{"ArtifactDeployment": 3, "OCIRepository": 3, "HelmRelease": 2, "Kustomization": 1}) {
		t.Fatalf("rendered kinds %v\n%s", kinds, out)
	}
	var want []map[string]any
	for _, u := range rendered {
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner("kubectl")); err != nil {
			t.Fatalf("applying rendered %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		want = append(want, mustGetComparable(t, env.Client, u))
	}
	for _, u := range rendered {
		if err := env.Client.Delete(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, u := range rendered {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy()); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s %s still there (%v)", u.GetKind(), u.GetName(), err)
			}
		}
		return nil
	})

	mgr, err := newManager(env.Config, parseRunOptions(t, "--metrics-addr=0", "--health-addr=0", "--flux-deployer-config-namespace="+configNS))
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(t, mgr)
	testenv.Eventually(t, time.Minute, func() error {
		var errs []error
		for i, u := range rendered {
			got, err := getComparable(env.Client, u)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !reflect.DeepEqual(got, want[i]) {
				errs = append(errs, fmt.Errorf("%s %s as the operator created it:\n%s\nrendered:\n%s", u.GetKind(), u.GetName(), toYAML(t, got), toYAML(t, want[i])))
			}
		}
		return errors.Join(errs...)
	})
	// And nothing the render left out.
	for kind, list := range map[string]string{"ArtifactDeployment": "konfidence.cloud/v1alpha1", "OCIRepository": "source.toolkit.fluxcd.io/v1",
		"HelmRepository": "source.toolkit.fluxcd.io/v1", "HelmRelease": "helm.toolkit.fluxcd.io/v2", "Kustomization": "kustomize.toolkit.fluxcd.io/v1"} {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(list)
		l.SetKind(kind + "List")
		if err := env.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if got := len(l.Items); got != countKinds(rendered)[kind] {
			t.Errorf("the operator created %d %s objects, render printed %d", got, kind, countKinds(rendered)[kind])
		}
	}
}

// TestRenderRefusesABrokenArtifact: an artifact the operator would fail on fails the render, with its reason.
func TestRenderRefusesABrokenArtifact(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	broken := ocmtest.Artifact("acme.org/artifacts/broken", "1.0.0", "cloud.konfidence.flux.kustomize", true)
	broken.Resources[1] = ocmtest.Resource{Name: "bundle", Version: "1.0.0", Type: "kustomize", Access: map[string]string{"type": "s3", "bucket": "b"}}
	reg.Push(t, "", broken, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", broken))
	out, err := runCLI(t, "render", reg.Ref("", "acme.org/vectors/shop", "1.0.0"), "-n", "shop")
	if err == nil || !strings.Contains(err.Error(), konfidencev1.UnsupportedAccessTypeReason) {
		t.Fatalf("render of an unsupported access: err %v, output:\n%s", err, out)
	}
}

func newTestNamespace(t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func writeYAML(t *testing.T, file string, obj any) {
	t.Helper()
	if err := os.WriteFile(file, []byte(toYAML(t, obj)), 0o600); err != nil {
		t.Fatal(err)
	}
}

func toYAML(t *testing.T, obj any) string {
	t.Helper()
	y, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(y)
}

// decodeObjects reads the YAML documents render printed, as kubectl does.
func decodeObjects(t *testing.T, out string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func countKinds(objs []*unstructured.Unstructured) map[string]int {
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
	}
	return kinds
}

func mustGetComparable(t *testing.T, c client.Client, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	got, err := getComparable(c, u)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// getComparable reads the object named like u and returns what render promises: spec, labels, annotations and
// owner references with the UIDs of ArtifactDeployments (placeholders in the render) left out.
func getComparable(c client.Client, u *unstructured.Unstructured) (map[string]any, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(u), live); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	refs := live.GetOwnerReferences()
	for i := range refs {
		if refs[i].Kind == "ArtifactDeployment" {
			refs[i].UID = ""
		}
	}
	return map[string]any{
		"spec": live.Object["spec"], "labels": live.GetLabels(), "annotations": live.GetAnnotations(), "ownerReferences": refs,
	}, nil
}

// TestRenderPinsDigests: render, in the default configuration (helmSource helmRepository), shows what the operator
// deploys for artifacts with digests: every source an OCIRepository whose ref holds the digest and no tag, the
// chart's HelmRelease referring to it by chartRef, and no HelmRepository, which would select the chart by its tag.
func TestRenderPinsDigests(t *testing.T) {
	ctx := context.Background()
	reg := ocmtest.NewRegistry(t)
	chart, err := ocmtest.PushPinnedChart(ctx, reg.Host, "charts", ocmtest.WebChart("web", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	bundleRef, err := ocmtest.PushKustomizeBundle(ctx, reg.Host, "bundles/config", "0.4.0", ocmtest.ConfigBundle)
	if err != nil {
		t.Fatal(err)
	}
	bundleDigest, err := ocmtest.ManifestDigest(ctx, bundleRef)
	if err != nil {
		t.Fatal(err)
	}
	web := ocmtest.Artifact("acme.org/artifacts/web", "1.0.0", "cloud.konfidence.flux.helm", true)
	web.Resources[1] = chart
	config := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", "cloud.konfidence.flux.kustomize", true)
	config.Resources[1] = ocmtest.BundleResource("0.4.0", bundleRef).WithOCIDigest(bundleDigest)
	reg.Push(t, "", web, config, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", web, config))

	out, err := runCLI(t, "render", reg.Ref("", "acme.org/vectors/shop", "1.0.0"), "--namespace", "shop")
	if err != nil {
		t.Fatalf("render: %v\n%s", err, out)
	}
	rendered := decodeObjects(t, out)
	if kinds := countKinds(rendered); !reflect.DeepEqual(kinds, map[string]int{"ArtifactDeployment": 2, "OCIRepository": 2, "HelmRelease": 1, "Kustomization": 1}) {
		t.Fatalf("rendered kinds %v, want OCIRepositories only as sources\n%s", kinds, out)
	}
	digests := map[string]bool{}
	for _, u := range rendered {
		switch u.GetKind() {
		case "OCIRepository":
			ref, _, _ := unstructured.NestedStringMap(u.Object, "spec", "ref")
			if len(ref) != 1 || ref["digest"] == "" {
				t.Errorf("OCIRepository %s ref %v, want a digest and nothing else", u.GetName(), ref)
			}
			digests[ref["digest"]] = true
		case "HelmRelease":
			chartRef, _, _ := unstructured.NestedStringMap(u.Object, "spec", "chartRef")
			_, hasChart, _ := unstructured.NestedMap(u.Object, "spec", "chart")
			if chartRef["kind"] != "OCIRepository" || chartRef["name"] != u.GetName() || hasChart {
				t.Errorf("HelmRelease %s: chartRef %v, chart set %v; want chartRef to its OCIRepository only", u.GetName(), chartRef, hasChart)
			}
		}
	}
	if want := map[string]bool{"sha256:" + chart.Digest.Value: true, bundleDigest: true}; !reflect.DeepEqual(digests, want) {
		t.Errorf("OCIRepository digests %v, want %v", digests, want)
	}
}
