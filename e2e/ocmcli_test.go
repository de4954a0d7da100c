package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// ocmCLIVector is the vector of the OCM CLI fixture (internal/ocm/testdata/ocmcli, shown in docs/vectors.md).
const ocmCLIVector = "acme.org/vectors/shop:1.0.0"

// inspectedArtifact is what the test compares of `vector inspect -o json`'s artifacts.
type inspectedArtifact struct {
	Component  string `json:"component"`
	Version    string `json:"version"`
	Type       string `json:"type"`
	AllowReuse bool   `json:"allowReuse"`
	Name       string `json:"name"`
	Resources  []struct {
		Name   string         `json:"name"`
		Type   string         `json:"type"`
		Access map[string]any `json:"access"`
	} `json:"resources"`
}

// TestOCMCLIVectorThroughOperator: the vector the OCM CLI published (its CTF copied into the registry, as `ocm
// transfer ctf` would) is read by the running operator as `vector inspect` reads the CTF: exactly the
// ArtifactDeployments inspect names for the VectorDeployment's UID, with the same component, version, manifest and
// resources; and the Flux sources `render` makes for them fetch exactly the constructor's chart and bundle
// references. Those live at registry.example, which does not exist and which a test must not look up (the DNS
// query would leave loopback), so only the VectorDeployment reconciler runs: no Flux source is created that
// source-controller would fetch.
func TestOCMCLIVectorThroughOperator(t *testing.T) {
	ctx := context.Background()
	ctf := filepath.Join(testenv.RepoRoot(), "internal", "ocm", "testdata", "ocmcli", "ctf")
	reg := newRegistry(t)
	reg.PushCTF(t, "ocmcli", ctf)

	startFluxdeployer(t, nil, "--controllers=vectordeployment")
	ns := newNamespace(t, "ocmcli")
	vd := createVectorDeployment(t, ns, "shop", reg.Ref("ocmcli", "acme.org/vectors/shop", "1.0.0"))

	var inspected struct {
		Artifacts []inspectedArtifact `json:"artifacts"`
	}
	out := fluxdeployerCLI(t, "vector", "inspect", "ctf::"+ctf+"//"+ocmCLIVector, "--uid", string(vd.UID), "-o", "json")
	if err := json.Unmarshal([]byte(out), &inspected); err != nil {
		t.Fatalf("vector inspect output %q: %v", out, err)
	}
	want := map[string]inspectedArtifact{}
	for _, a := range inspected.Artifacts {
		want[a.Name] = a
	}
	if len(want) != 3 {
		t.Fatalf("vector inspect names %d ArtifactDeployments, the constructor's vector references 3: %s", len(want), out)
	}

	ads := &konfidencev1.ArtifactDeploymentList{}
	testenv.Eventually(t, 2*time.Minute, func() error {
		if err := env.Client.List(ctx, ads, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(ads.Items) < len(want) {
			return fmt.Errorf("%d ArtifactDeployments, want %d", len(ads.Items), len(want))
		}
		return nil
	})
	for _, ad := range ads.Items {
		if err := matchesInspected(ad, want[ad.Name]); err != nil {
			t.Errorf("ArtifactDeployment %s: %v", ad.Name, err)
		}
		delete(want, ad.Name)
	}
	for name := range want {
		t.Errorf("no ArtifactDeployment %s, which vector inspect names", name)
	}

	assertRenderedSources(t, ctf, vd, inspected.Artifacts)

	// Nothing was handed to Flux: no source would have sent source-controller to registry.example.
	for _, list := range []client.ObjectList{&sourcev1.HelmRepositoryList{}, &sourcev1.OCIRepositoryList{}} {
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if n := meta.LenList(list); n != 0 {
			t.Errorf("%d Flux sources %T were created", n, list)
		}
	}
}

// assertRenderedSources checks that the Flux objects `fluxdeployer render` makes for the VectorDeployment, which the
// Flux deployer would apply, fetch exactly the chart and bundle references the component constructor gives.
func assertRenderedSources(t *testing.T, ctf string, vd *konfidencev1.VectorDeployment, artifacts []inspectedArtifact) {
	t.Helper()
	var want []string
	for _, a := range artifacts {
		for _, r := range a.Resources {
			ref, _ := r.Access["imageReference"].(string)
			want = append(want, ref)
		}
	}
	var rendered struct {
		Items []unstructured.Unstructured `json:"items"`
	}
	out := fluxdeployerCLI(t, "render", "ctf::"+ctf+"//"+ocmCLIVector, "-n", vd.Namespace, "--uid", string(vd.UID), "-o", "json")
	if err := json.Unmarshal([]byte(out), &rendered); err != nil {
		t.Fatalf("render output %q: %v", out, err)
	}
	urls := map[string]string{} // HelmRepository name → URL
	for _, item := range rendered.Items {
		if item.GetKind() == sourcev1.HelmRepositoryKind {
			urls[item.GetName()], _, _ = unstructured.NestedString(item.Object, "spec", "url")
		}
	}
	var got []string
	for _, item := range rendered.Items {
		switch item.GetKind() {
		case sourcev1.OCIRepositoryKind:
			url, _, _ := unstructured.NestedString(item.Object, "spec", "url")
			tag, _, _ := unstructured.NestedString(item.Object, "spec", "ref", "tag")
			got = append(got, strings.TrimPrefix(url, "oci://")+":"+tag)
		case helmv2.HelmReleaseKind:
			chart, _, _ := unstructured.NestedString(item.Object, "spec", "chart", "spec", "chart")
			version, _, _ := unstructured.NestedString(item.Object, "spec", "chart", "spec", "version")
			source, _, _ := unstructured.NestedString(item.Object, "spec", "chart", "spec", "sourceRef", "name")
			// Helm stores chart version 1.2.3+build as tag 1.2.3_build.
			got = append(got, strings.TrimPrefix(urls[source], "oci://")+"/"+chart+":"+strings.ReplaceAll(version, "+", "_"))
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the rendered Flux sources fetch %v, the constructor's resources are at %v", got, want)
	}
}

// matchesInspected says how an ArtifactDeployment's spec differs from the artifact vector inspect shows for it.
func matchesInspected(ad konfidencev1.ArtifactDeployment, a inspectedArtifact) error {
	c := ad.Spec.Component
	if a.Name == "" {
		return fmt.Errorf("vector inspect names no such ArtifactDeployment")
	}
	if c.Name != a.Component || c.Version != a.Version {
		return fmt.Errorf("component %s:%s, inspect's %s:%s", c.Name, c.Version, a.Component, a.Version)
	}
	if ad.Spec.Manifest.Type != a.Type || ad.Spec.Manifest.AllowReuse != a.AllowReuse {
		return fmt.Errorf("manifest %+v, inspect's type %s, allowReuse %v", ad.Spec.Manifest, a.Type, a.AllowReuse)
	}
	if len(c.Resources) != len(a.Resources) {
		return fmt.Errorf("resources %+v, inspect's %+v", c.Resources, a.Resources)
	}
	for i, r := range c.Resources {
		var access map[string]any
		if r.Content != nil {
			if err := json.Unmarshal(r.Content.Raw, &access); err != nil {
				return err
			}
		}
		if r.Name != a.Resources[i].Name || r.Type != a.Resources[i].Type || !reflect.DeepEqual(access, a.Resources[i].Access) {
			return fmt.Errorf("resource %s %s at %v, inspect's %s %s at %v", r.Name, r.Type, access, a.Resources[i].Name, a.Resources[i].Type, a.Resources[i].Access)
		}
	}
	return nil
}
