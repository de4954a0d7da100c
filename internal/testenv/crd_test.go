package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
)

// One API server for the tests of the package, with the Flux CRDs: starting one takes a few seconds.
var env *Env

func TestMain(m *testing.M) {
	Main(m, func(e *Env) { env = e }, controlplane.FluxCRDDirs()...)
}

func newVectorDeployment(name string) *konfidencev1.VectorDeployment {
	return &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       konfidencev1.VectorDeploymentSpec{Vector: "http://registry:5000//acme.org/vectors/shop:1.0.0"},
	}
}

func newArtifactDeployment(name string) *konfidencev1.ArtifactDeployment {
	return &konfidencev1.ArtifactDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: konfidencev1.ArtifactDeploymentSpec{
			Manifest: konfidencev1.ArtifactManifest{Type: "helm", AllowReuse: true},
			TaskManifests: []konfidencev1.TaskManifest{{
				Name: "migrate", Type: "job", DependsOn: []string{"init"},
				Spec: &apiextensionsv1.JSON{Raw: []byte(`{"image":"migrate:1","args":["--all"]}`)},
			}},
			Component: konfidencev1.Component{
				Name: "acme.org/artifacts/frontend", Version: "1.2.3+build.5",
				Resources: []konfidencev1.Resource{{
					Name: "chart", Type: "helmChart",
					Content: &apiextensionsv1.JSON{Raw: []byte(`{"type":"ociArtifact","imageReference":"registry:5000/charts/frontend:1.2.3"}`)},
				}},
			},
		},
	}
}

func TestCRDsInstalledWithPrinterColumnsAndCategory(t *testing.T) {
	ctx := context.Background()
	for name, columns := range map[string][]string{
		"vectordeployments.konfidence.cloud":   {"Ready", "Reason", "Age"},
		"artifactdeployments.konfidence.cloud": {"Fetched", "Deployed", "Healthy", "Ready", "Reason", "Age"},
	} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatalf("CRD %s: %v", name, err)
		}
		if crd.Spec.Names.Categories[0] != "konfidence" || len(crd.Spec.Names.ShortNames) == 0 {
			t.Errorf("%s: categories %v, short names %v", name, crd.Spec.Names.Categories, crd.Spec.Names.ShortNames)
		}
		got := map[string]bool{}
		for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
			got[c.Name] = true
		}
		for _, c := range columns {
			if !got[c] {
				t.Errorf("%s lacks printer column %s", name, c)
			}
		}
	}
	if err := env.Client.List(ctx, &konfidencev1.VectorDeploymentList{}); err != nil {
		t.Errorf("listing VectorDeployments: %v", err)
	}
	if err := env.Client.List(ctx, &konfidencev1.ArtifactDeploymentList{}); err != nil {
		t.Errorf("listing ArtifactDeployments: %v", err)
	}
}

func TestVectorDeploymentSpecIsImmutable(t *testing.T) {
	ctx := context.Background()
	vd := newVectorDeployment("immutable")
	if err := env.Client.Create(ctx, vd); err != nil {
		t.Fatal(err)
	}
	vd.Spec.Vector = "http://registry:5000//acme.org/vectors/shop:2.0.0"
	err := env.Client.Update(ctx, vd)
	assertInvalid(t, err, "VectorDeployment spec is immutable")
}

func TestVectorDeploymentRequiresVector(t *testing.T) {
	vd := newVectorDeployment("no-vector")
	vd.Spec.Vector = ""
	assertInvalid(t, env.Client.Create(context.Background(), vd), "spec.vector")
}

func TestArtifactDeploymentSpecIsImmutableAndKeepsRawJSON(t *testing.T) {
	ctx := context.Background()
	ad := newArtifactDeployment("frontend-1-2-3-build-5-abcdefghij")
	if err := env.Client.Create(ctx, ad); err != nil {
		t.Fatal(err)
	}
	got := &konfidencev1.ArtifactDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ad), got); err != nil {
		t.Fatal(err)
	}
	if raw := string(got.Spec.Component.Resources[0].Content.Raw); !strings.Contains(raw, `"imageReference":"registry:5000/charts/frontend:1.2.3"`) {
		t.Errorf("resource access JSON not preserved: %s", raw)
	}
	if raw := string(got.Spec.TaskManifests[0].Spec.Raw); !strings.Contains(raw, `"args":["--all"]`) {
		t.Errorf("task spec JSON not preserved: %s", raw)
	}
	for name, mutate := range map[string]func(*konfidencev1.ArtifactDeployment){
		"manifest": func(a *konfidencev1.ArtifactDeployment) { a.Spec.Manifest.AllowReuse = false },
		"version":  func(a *konfidencev1.ArtifactDeployment) { a.Spec.Component.Version = "1.2.4" },
		"resource JSON": func(a *konfidencev1.ArtifactDeployment) {
			a.Spec.Component.Resources[0].Content.Raw = []byte(`{"type":"other"}`)
		},
		"task manifests": func(a *konfidencev1.ArtifactDeployment) { a.Spec.TaskManifests = nil },
	} {
		t.Run(name, func(t *testing.T) {
			changed := got.DeepCopy()
			mutate(changed)
			assertInvalid(t, env.Client.Update(ctx, changed), "ArtifactDeployment spec is immutable")
		})
	}
}

func TestDeploymentResultIsAMapKeyedByNameAndType(t *testing.T) {
	ctx := context.Background()
	ad := newArtifactDeployment("results-abcdefghij")
	if err := env.Client.Create(ctx, ad); err != nil {
		t.Fatal(err)
	}
	ad.Status.DeploymentResult = []konfidencev1.DeploymentResult{
		{Name: "frontend", Type: "service"}, {Name: "frontend", Type: "ingress"},
	}
	if err := env.Client.Status().Update(ctx, ad); err != nil {
		t.Fatalf("distinct name+type keys rejected: %v", err)
	}
	ad.Status.DeploymentResult = append(ad.Status.DeploymentResult, konfidencev1.DeploymentResult{Name: "frontend", Type: "service"})
	assertInvalid(t, env.Client.Status().Update(ctx, ad), "Duplicate value")
	ad.Status.DeploymentResult = []konfidencev1.DeploymentResult{{Name: "frontend", Type: strings.Repeat("t", 64)}}
	assertInvalid(t, env.Client.Status().Update(ctx, ad), "Too long")
}

// TestStatusIsASubresource: writes through the main endpoint ignore status, and status writes ignore the rest,
// which lets the two reconcilers and users write without clobbering each other.
func TestStatusIsASubresource(t *testing.T) {
	ctx := context.Background()
	vd := newVectorDeployment("subresource")
	if err := env.Client.Create(ctx, vd); err != nil {
		t.Fatal(err)
	}
	generation := vd.Generation

	// A status write: lands in status, leaves metadata and spec alone and does not bump the generation.
	vd.Status.ObservedGeneration = generation
	meta.SetStatusCondition(&vd.Status.Conditions, metav1.Condition{Type: konfidencev1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Test", Message: "ok"})
	vd.Labels = map[string]string{"through": "status"}
	if err := env.Client.Status().Update(ctx, vd); err != nil {
		t.Fatal(err)
	}
	got := &konfidencev1.VectorDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), got); err != nil {
		t.Fatal(err)
	}
	// What each write may change: the main endpoint's label and generation, the status subresource's Ready and
	// observed generation.
	type written struct {
		Label              string
		Generation         int64
		Ready              bool
		Conditions         int
		ObservedGeneration int64
	}
	writtenOf := func(vd *konfidencev1.VectorDeployment) written {
		return written{vd.Labels["through"], vd.Generation, meta.IsStatusConditionTrue(vd.Status.Conditions, konfidencev1.ReadyCondition),
			len(vd.Status.Conditions), vd.Status.ObservedGeneration}
	}
	if diff := cmp.Diff(written{"", generation, true, 1, generation}, writtenOf(got)); diff != "" {
		t.Errorf("status update (-want +got):\n%s", diff)
	}

	// A main-endpoint write: lands in metadata, ignores status.
	got.Labels = map[string]string{"through": "main"}
	got.Status.Conditions = nil
	got.Status.ObservedGeneration = 42
	if err := env.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	after := &konfidencev1.VectorDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), after); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(written{"main", generation, true, 1, generation}, writtenOf(after)); diff != "" {
		t.Errorf("main update (-want +got):\n%s", diff)
	}
}

func assertInvalid(t *testing.T, err error, message string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error mentioning %q, got %v", message, err)
	}
	if !strings.Contains(err.Error(), message) {
		t.Errorf("error %q does not mention %q", err, message)
	}
}

// suspend is the one field of either spec that may change: it stops the reconcilers, it does not change what is
// deployed.
func TestSuspendFlipsWhileTheRestOfTheSpecStaysImmutable(t *testing.T) {
	ctx := context.Background()
	vd := newVectorDeployment("suspend-flips")
	if err := env.Client.Create(ctx, vd); err != nil {
		t.Fatal(err)
	}
	for _, suspend := range []bool{true, false} {
		vd.Spec.Suspend = suspend
		if err := env.Client.Update(ctx, vd); err != nil {
			t.Fatalf("VectorDeployment suspend=%v: %v", suspend, err)
		}
	}
	vd.Spec.Suspend = true
	vd.Spec.Vector = "http://registry:5000//acme.org/vectors/shop:2.0.0"
	assertInvalid(t, env.Client.Update(ctx, vd), "VectorDeployment spec is immutable")

	withTasks := newArtifactDeployment("suspend-flips-tasks")
	withoutTasks := newArtifactDeployment("suspend-flips-no-tasks")
	withoutTasks.Spec.TaskManifests = nil
	for _, ad := range []*konfidencev1.ArtifactDeployment{withTasks, withoutTasks} {
		if err := env.Client.Create(ctx, ad); err != nil {
			t.Fatal(err)
		}
		for _, suspend := range []bool{true, false} {
			ad.Spec.Suspend = suspend
			if err := env.Client.Update(ctx, ad); err != nil {
				t.Fatalf("%s suspend=%v: %v", ad.Name, suspend, err)
			}
		}
		changed := ad.DeepCopy()
		changed.Spec.Suspend = true
		changed.Spec.TaskManifests = append(changed.Spec.TaskManifests, konfidencev1.TaskManifest{Name: "extra", Type: "job"})
		assertInvalid(t, env.Client.Update(ctx, changed), "ArtifactDeployment spec is immutable")
	}
}

// kubectl get vd answers "is my landscape up?": counts, the Ready message and suspension, without -o wide.
func TestPrinterColumnsShowProgressAndSuspension(t *testing.T) {
	ctx := context.Background()
	for name, want := range map[string]map[string]string{
		"vectordeployments.konfidence.cloud": {
			"Artifacts": ".status.readySummary",
			"Status":    `.status.conditions[?(@.type=="Ready")].message`,
			"Suspended": ".spec.suspend",
		},
		"artifactdeployments.konfidence.cloud": {
			"Type":      ".spec.manifest.type",
			"Flux":      ".status.fluxKind",
			"Release":   ".status.releaseName",
			"Suffix":    ".status.nameSuffix",
			"Status":    `.status.conditions[?(@.type=="Ready")].message`,
			"Suspended": ".spec.suspend",
		},
	} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatalf("CRD %s: %v", name, err)
		}
		got := map[string]string{}
		for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
			got[c.Name] = c.JSONPath
		}
		for column, path := range want {
			if got[column] != path {
				t.Errorf("%s: printer column %s = %q, want %q", name, column, got[column], path)
			}
		}
	}
}

// TestKubectlGetShowsProgress asks the API server for the table kubectl get prints: a suspended VectorDeployment
// two of whose three artifacts are ready reads as such, without -o wide.
func TestKubectlGetShowsProgress(t *testing.T) {
	ctx := context.Background()
	vd := newVectorDeployment("table")
	vd.Spec.Suspend = true
	if err := env.Client.Create(ctx, vd); err != nil {
		t.Fatal(err)
	}
	vd.Status.ReadySummary = "2/3"
	meta.SetStatusCondition(&vd.Status.Conditions, metav1.Condition{Type: konfidencev1.ReadyCondition, Status: metav1.ConditionFalse,
		Reason: "InstallFailed", Message: "2/3 artifacts ready; waiting for database-16-4-0-4739810ml3: InstallFailed: boom"})
	if err := env.Client.Status().Update(ctx, vd); err != nil {
		t.Fatal(err)
	}
	httpClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	url, err := neturl.JoinPath(env.Config.Host, env.Config.APIPath, "/apis/konfidence.cloud/v1alpha1/namespaces/default/vectordeployments/table")
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	table := &metav1.Table{}
	if err == nil {
		err = json.Unmarshal(body, table)
	}
	if err != nil || len(table.Rows) != 1 {
		t.Fatalf("table from %s: %v, %s", url, err, body)
	}
	var got []string
	for i, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			got = append(got, fmt.Sprintf("%s=%v", c.Name, table.Rows[0].Cells[i]))
		}
	}
	want := "Name=table Artifacts=2/3 Ready=False Status=2/3 artifacts ready; waiting for database-16-4-0-4739810ml3: InstallFailed: boom Suspended=true"
	if line := strings.Join(got, " "); !strings.HasPrefix(line, want) {
		t.Errorf("kubectl get vd prints\n%s\nwant it to start with\n%s", line, want)
	}
}
