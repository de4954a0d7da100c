package fluxdeployer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestResourceDigestPinsTheSource: a resource's recorded digest becomes the OCIRepository's ref.digest, in place
// of the tag; an access pinning another digest is refused with DigestMismatch.
func TestResourceDigestPinsTheSource(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	access := func(ref string) *apiextensionsv1.JSON {
		return &apiextensionsv1.JSON{Raw: []byte(`{"type":"ociArtifact","imageReference":"` + ref + `"}`)}
	}
	a, err := resolveAccess(&konfidencev1.Resource{Name: "chart", Type: "helmChart", Content: access("registry.example/charts/web:1.0.0"), Digest: digest})
	if err != nil {
		t.Fatal(err)
	}
	repo := ociRepository(&konfidencev1.ArtifactDeployment{}, a, references{}, config{})
	if diff := cmp.Diff(&sourcev1.OCIRepositoryRef{Digest: digest}, repo.Spec.Reference); diff != "" {
		t.Errorf("OCIRepository ref, want the digest only (-want +got):\n%s", diff)
	}
	_, err = resolveAccess(&konfidencev1.Resource{Name: "chart", Type: "helmChart",
		Content: access("registry.example/charts/web:1.0.0@sha256:" + strings.Repeat("b", 64)), Digest: digest})
	assertFailure(t, err, konfidencev1.DigestMismatchReason, true) // conflicting digests
}

// TestDigestIsPinnedInEveryMode: an artifact with a digest (the resource's, the one a vector's signature covers, or
// the access's own) is deployed by that digest whatever the configuration: against the real API server, its
// OCIRepository holds ref.digest and no tag, and an OCI chart's HelmRelease refers to it by chartRef even in the
// default helmSource, helmRepository, where a HelmRepository would select the chart by its tag, which anyone who
// can push to the repository moves. There is no HelmRepository.
func TestDigestIsPinnedInEveryMode(t *testing.T) {
	h := testHarness(t)
	const chart, bundle = "registry.example.com/charts/web:1.0.0", "registry.example.com/bundles/web:1.0.0"
	withDigest := func(r konfidencev1.Resource) konfidencev1.Resource { r.Digest = testDigest; return r }
	for _, tc := range []struct {
		name, manifestType string
		resource           konfidencev1.Resource
	}{
		{"chart-resource-digest", HelmManifestType, withDigest(resource("chart", "helmChart", ociAccess("ociArtifact", chart)))},
		{"chart-access-digest", HelmManifestType, resource("chart", "helmChart", ociAccess("ociArtifact", chart+"@"+testDigest))},
		{"chart-digest-only", HelmManifestType, resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/web@"+testDigest))},
		{"bundle-resource-digest", KustomizeManifestType, withDigest(resource("bundle", "kustomize", ociAccess("ociArtifact", bundle)))},
	} {
		for _, mode := range []string{"default", HelmSourceHelmRepository, HelmSourceChartRef} {
			t.Run(fmt.Sprintf("%s/helmSource=%s", tc.name, mode), func(t *testing.T) {
				ns := strings.ToLower(fmt.Sprintf("pin-%s-%s", tc.name, mode))
				h.namespace(t, ns)
				var cfg map[string]string // no helmSource: the default
				if mode != "default" {
					cfg = map[string]string{helmSourceKey: mode}
				}
				h.configMap(t, ns, cfg)
				r, _ := h.direct(ns)
				ad := artifactDeployment(ns, "web-1-0-0-e1mvwibzp5", tc.manifestType, tc.resource)
				h.create(t, ad)
				if _, err := h.reconcile(t, r, ad); err != nil {
					t.Fatalf("reconcile: %v", err)
				}
				repo := &sourcev1.OCIRepository{}
				h.get(t, ns, ad.Name, repo)
				if diff := cmp.Diff(&sourcev1.OCIRepositoryRef{Digest: testDigest}, repo.Spec.Reference); diff != "" {
					t.Errorf("OCIRepository ref, want the digest and no tag (-want +got):\n%s", diff)
				}
				if tc.manifestType == HelmManifestType {
					hr := &helmv2.HelmRelease{}
					h.get(t, ns, ad.Name, hr)
					want := &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: ad.Name}
					if diff := cmp.Diff(want, hr.Spec.ChartRef); diff != "" || hr.Spec.Chart != nil {
						t.Errorf("HelmRelease chart %+v, chartRef (-want +got):\n%s", hr.Spec.Chart, diff)
					}
				}
				if err := h.env.Client.Get(context.Background(), client.ObjectKeyFromObject(ad), &sourcev1.HelmRepository{}); !apierrors.IsNotFound(err) {
					t.Errorf("HelmRepository %s: %v, want none", ad.Name, err)
				}
			})
		}
	}
}

// TestSourceReplacedIsDeleted: when an ArtifactDeployment's source changes kind, the source it replaced is deleted,
// not left pointing source-controller at the chart's tag: a chart with a digest that an earlier release deployed
// through a HelmRepository (by tag) moves to a pinned OCIRepository, and a chart without one follows helmSource
// from chartRef back to helmRepository. The HelmRelease is the same object throughout (changed in place, so Helm
// upgrades the release rather than uninstalling it), and the deletion is reported as an event.
func TestSourceReplacedIsDeleted(t *testing.T) {
	h := testHarness(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		digest         string
		before, after  map[string]string // helmSource before and after
		stale, current client.Object
	}{
		{"pinned-chart-leaves-its-helmrepository", testDigest, nil, nil, &sourcev1.HelmRepository{}, &sourcev1.OCIRepository{}},
		{"helmsource-back-to-helmrepository", "", map[string]string{helmSourceKey: HelmSourceChartRef},
			map[string]string{helmSourceKey: HelmSourceHelmRepository}, &sourcev1.OCIRepository{}, &sourcev1.HelmRepository{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "replaced-" + tc.name
			h.namespace(t, ns)
			h.configMap(t, ns, tc.before)
			r, recorder := h.direct(ns)
			res := resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/web:1.0.0"))
			res.Digest = tc.digest
			ad := artifactDeployment(ns, "web-1-0-0-e1mvwibzp5", HelmManifestType, res)
			h.create(t, ad)
			// The Flux objects as deployed before: for the pinned chart, as a release that chose the source by
			// helmSource alone applied them, i.e. as this release does for the chart without its digest.
			if tc.digest == "" {
				if _, err := h.reconcile(t, r, ad); err != nil {
					t.Fatal(err)
				}
			} else {
				unpinned := ad.DeepCopy()
				unpinned.Spec.Component.Resources[0].Digest = ""
				objects, _, err := desiredObjects(unpinned, defaultConfig(), observed{
					secretExists: func(string) (bool, error) { return false, nil },
					helmRelease:  func() (*helmv2.HelmRelease, error) { return nil, nil },
				})
				if err != nil {
					t.Fatal(err)
				}
				for _, obj := range objects {
					if _, _, err := r.apply(ctx, obj, lastApply{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			h.get(t, ns, ad.Name, tc.stale)
			hr := &helmv2.HelmRelease{}
			h.get(t, ns, ad.Name, hr)
			drainEvents(recorder)

			if tc.after != nil {
				cm := &corev1.ConfigMap{}
				h.get(t, configNamespace, ns, cm)
				cm.Data = tc.after
				if err := h.env.Client.Update(ctx, cm); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := h.reconcile(t, r, ad); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			h.get(t, ns, ad.Name, tc.current)
			if err := h.env.Client.Get(ctx, client.ObjectKeyFromObject(ad), tc.stale); !apierrors.IsNotFound(err) {
				t.Errorf("%T %s after the move: %v, want it deleted", tc.stale, ad.Name, err)
			}
			after := &helmv2.HelmRelease{}
			h.get(t, ns, ad.Name, after)
			if after.UID != hr.UID {
				t.Errorf("HelmRelease recreated (UID %s, before %s): Helm would uninstall the release", after.UID, hr.UID)
			}
			if (after.Spec.ChartRef != nil) == (after.Spec.Chart != nil) {
				t.Errorf("HelmRelease chart %+v, chartRef %+v: want exactly one", after.Spec.Chart, after.Spec.ChartRef)
			}
			staleKind, err := kindOf(tc.stale)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("%s %s deleted %s %s/%s", corev1.EventTypeNormal, konfidencev1.FluxObjectUpdatedReason, staleKind.gvk.Kind, ns, ad.Name)
			if evs := drainEvents(recorder); !slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, want) }) {
				t.Errorf("events %q, want one starting %q", evs, want)
			}

			// Nothing left to delete: a reconcile of unchanged input writes nothing.
			h.assertReconcileOnlyReads(t, r, ad)
		})
	}
}
