package e2e

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"path"
	"slices"
	"strconv"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// konfidenceFieldManager stands for kubernetes-landscape-orchestrator's Flux deployer, which applied the Flux
// objects of a Konfidence install.
const konfidenceFieldManager = "kubernetes-landscape-orchestrator"

// TestTakeOverKonfidenceInstall: a namespace as Konfidence and kubernetes-landscape-orchestrator left it — a
// VectorDeployment, ArtifactDeployments under Konfidence's names with its konfidence.cloud/* annotations and no
// identity label, and their HelmRepository and HelmRelease applied by another field manager and installed by the
// real helm-controller; one name is 56 characters, longer than a Helm release name, so its HelmRelease has no
// releaseName. fluxdeployer starts and takes it over: it adopts the ArtifactDeployments under their names
// (backfilling the label), the VectorDeployment's status keeps those names, the Flux objects are server-side
// applied by fluxdeployer; Helm keeps one release per artifact with its revision history (no install, no
// upgrade), and the workloads are the same objects (same UIDs).
func TestTakeOverKonfidenceInstall(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	frontend := helmArtifact(t, reg, "acme.org/artifacts/frontend", "1.0.0", true, ocmtest.WebChart("frontend", "1.0.0"))
	crm := helmArtifact(t, reg, "acme.org/artifacts/customer-relationship-management-portal", "2.14.0", false, ocmtest.WebChart("crm", "2.14.0"))
	reg.Push(t, "", frontend, crm, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", frontend, crm))
	ref := reg.Ref("", "acme.org/vectors/shop", "1.0.0")

	ns := newNamespace(t, "takeover")
	vd := createVectorDeployment(t, ns, "shop", ref)
	konfidence := installLikeKonfidence(t, vd, reg.Host)
	if n := len(konfidence["acme.org/artifacts/customer-relationship-management-portal"]); n <= 53 || n > 63 {
		t.Fatalf("the long Konfidence name has %d characters", n)
	}
	before := releases(t, ns)
	t.Logf("Helm releases installed by helm-controller before the takeover: %v", before)
	if len(before) != 2 {
		t.Fatalf("Helm releases installed by helm-controller before the takeover: %v", before)
	}
	workloads := workloadUIDs(t, ns)
	if len(workloads) != 4 {
		t.Fatalf("workloads before the takeover: %v, want a ConfigMap and a Service per release", workloads)
	}

	startFluxdeployer(t, nil)
	waitReady(t, 3*time.Minute, vd)
	for component, name := range konfidence {
		if got := vd.Status.ResultingArtifactDeployments[component].Name; got != name {
			t.Errorf("VectorDeployment status names %q for %s, want the adopted %q", got, component, name)
		}
	}
	ads := &konfidencev1.ArtifactDeploymentList{}
	if err := env.Client.List(ctx, ads, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ad := range ads.Items {
		names = append(names, ad.Name)
		if ad.Labels[konfidencev1.ArtifactIdentityLabel] == "" {
			t.Errorf("ArtifactDeployment %s: identity label not backfilled: %v", ad.Name, ad.Labels)
		}
	}
	if want := slices.Sorted(maps.Values(konfidence)); !slices.Equal(slices.Sorted(slices.Values(names)), want) {
		t.Fatalf("ArtifactDeployments after the takeover: %v, want only Konfidence's %v", names, want)
	}

	// Every Flux object is fluxdeployer's now, and helm-controller has reconciled what it applied.
	for _, name := range konfidence {
		hr := &helmv2.HelmRelease{}
		testenv.Eventually(t, 2*time.Minute, func() error {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hr); err != nil {
				return err
			}
			if !appliedBy(hr, "fluxdeployer") || hr.Spec.Interval.Duration != 10*time.Minute {
				return fmt.Errorf("HelmRelease %s not applied by fluxdeployer yet: interval %s, managers %v", name, hr.Spec.Interval.Duration, managers(hr))
			}
			if hr.Status.ObservedGeneration != hr.Generation || !conditions.IsReady(hr) {
				return fmt.Errorf("HelmRelease %s: generation %d observed %d, Ready %+v", name, hr.Generation, hr.Status.ObservedGeneration, conditions.Get(hr, "Ready"))
			}
			return nil
		})
		if len(name) > 53 && hr.Spec.ReleaseName != "" {
			t.Errorf("HelmRelease %s: releaseName %q, want it left unset as Konfidence's was", name, hr.Spec.ReleaseName)
		}
		repo := &sourcev1.HelmRepository{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, repo); err != nil || !appliedBy(repo, "fluxdeployer") {
			t.Errorf("HelmRepository %s: %v, managers %v", name, err, managers(repo))
		}
	}
	if after := releases(t, ns); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("Helm releases after the takeover: %v, before %v (a reinstall or upgrade happened)", after, before)
	}
	if after := workloadUIDs(t, ns); !maps.Equal(after, workloads) {
		t.Errorf("workloads after the takeover: %v, before %v (recreated)", after, workloads)
	}
}

// installLikeKonfidence leaves in vd's namespace what Konfidence and kubernetes-landscape-orchestrator deploy for
// vd's vector and waits until helm-controller has installed the releases; it returns the ArtifactDeployment names
// by component.
func installLikeKonfidence(t *testing.T, vd *konfidencev1.VectorDeployment, registryHost string) map[string]string {
	t.Helper()
	ctx := context.Background()
	v, err := ocm.NewClient(ocm.Options{}).ResolveVector(ctx, vd.Spec.Vector, ocm.Read{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, ra := range vectordeployment.ArtifactsOf(v) {
		if ra.Err != nil {
			t.Fatal(ra.Err)
		}
		a := ra.Artifact
		// The spec and owner are what either controller writes; the name and annotations are Konfidence's.
		ad, err := vectordeployment.DesiredArtifactDeployment(env.Scheme, vd, a, 0)
		if err != nil {
			t.Fatal(err)
		}
		uid := ""
		if !a.Manifest.AllowReuse {
			uid = string(vd.UID)
		}
		var hash string
		ad.Name, hash = konfidenceName(t, a.Component, a.Version, uid)
		ad.Labels = nil
		ad.Annotations[konfidencev1.ArtifactHashAnnotation] = hash
		if err := env.Client.Create(ctx, ad); err != nil {
			t.Fatal(err)
		}
		names[a.Component] = ad.Name
		chart := path.Base(a.Component)
		if chart == "customer-relationship-management-portal" {
			chart = "crm"
		}
		applyLikeKonfidence(t, konfidenceHelmObjects(ad, registryHost, chart, a.Version)...)
	}
	vd.Status.ResultingArtifactDeployments = map[string]konfidencev1.ResultingArtifactDeployment{}
	for component, name := range names {
		vd.Status.ResultingArtifactDeployments[component] = konfidencev1.ResultingArtifactDeployment{Name: name}
	}
	if err := env.Client.Status().Update(ctx, vd); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: vd.Namespace, Name: name}}
		waitReady(t, 3*time.Minute, hr)
	}
	return names
}

// konfidenceName is the name Konfidence gives an ArtifactDeployment: <basename>-<version>-<hash>, the hash FNV-1a over the plain concatenation of
// component, version and (reuse off) the VectorDeployment's UID, in base36 through rand.SafeEncodeString, 10
// characters; the whole a DNS-1123 label of at most 63 characters.
func konfidenceName(t *testing.T, component, version, uid string) (name, hash string) {
	t.Helper()
	h := fnv.New64a()
	_, _ = h.Write([]byte(component + version + uid))
	hash = rand.SafeEncodeString(strconv.FormatUint(h.Sum64(), 36))[:10]
	prefix, err := sanitize.DNSLabelName(path.Base(component)+"-"+version, 63-len(hash)-1)
	if err != nil {
		t.Fatal(err)
	}
	return prefix + "-" + hash, hash
}

// konfidenceHelmObjects are the HelmRepository and HelmRelease kubernetes-landscape-orchestrator writes:
// named like the ArtifactDeployment, labelled with it, releaseName the name where Helm allows it. Other settings
// differ from fluxdeployer's (interval, remediation, no drift detection), as an install of another tool would.
func konfidenceHelmObjects(ad *konfidencev1.ArtifactDeployment, registryHost, chart, version string) []client.Object {
	meta := metav1.ObjectMeta{
		Namespace: ad.Namespace, Name: ad.Name,
		Labels:          map[string]string{konfidencev1.ArtifactDeploymentLabel: ad.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ad, konfidencev1.GroupVersion.WithKind("ArtifactDeployment"))},
	}
	repo := &sourcev1.HelmRepository{
		TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.HelmRepositoryKind},
		ObjectMeta: meta,
		Spec: sourcev1.HelmRepositorySpec{URL: "oci://" + registryHost + "/charts", Type: sourcev1.HelmRepositoryTypeOCI, Insecure: true,
			Interval: metav1.Duration{Duration: time.Minute}},
	}
	hr := &helmv2.HelmRelease{
		TypeMeta:   metav1.TypeMeta{APIVersion: helmv2.GroupVersion.String(), Kind: helmv2.HelmReleaseKind},
		ObjectMeta: *meta.DeepCopy(),
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: time.Minute},
			Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: chart, Version: version,
				SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: ad.Name}}},
			TargetNamespace:  ad.Namespace,
			StorageNamespace: ad.Namespace,
			CommonMetadata:   &helmv2.CommonMetadata{Labels: map[string]string{konfidencev1.ArtifactDeploymentLabel: ad.Name}},
			Install:          &helmv2.Install{CreateNamespace: true, Remediation: &helmv2.InstallRemediation{Retries: 1}},
		},
	}
	if len(ad.Name) <= 53 {
		hr.Spec.ReleaseName = ad.Name
	}
	return []client.Object{repo, hr}
}

func applyLikeKonfidence(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		delete(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if err := env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner(konfidenceFieldManager), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// workloadUIDs are the UIDs of the objects the releases rendered, by kind and name.
func workloadUIDs(t *testing.T, namespace string) map[string]types.UID {
	t.Helper()
	uids := map[string]types.UID{}
	for _, list := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.ServiceList{}} {
		if err := env.Client.List(context.Background(), list, client.InNamespace(namespace), client.HasLabels{konfidencev1.ArtifactDeploymentLabel}); err != nil {
			t.Fatal(err)
		}
		switch l := list.(type) {
		case *corev1.ConfigMapList:
			for _, o := range l.Items {
				uids["ConfigMap/"+o.Name] = o.UID
			}
		case *corev1.ServiceList:
			for _, o := range l.Items {
				uids["Service/"+o.Name] = o.UID
			}
		}
	}
	return uids
}

func managers(obj client.Object) []string {
	var out []string
	for _, f := range obj.GetManagedFields() {
		out = append(out, f.Manager+"/"+string(f.Operation))
	}
	return out
}

// appliedBy tells whether manager server-side applied fields of obj.
func appliedBy(obj client.Object, manager string) bool {
	return slices.Contains(managers(obj), manager+"/"+string(metav1.ManagedFieldsOperationApply))
}
