package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// floorWorkers is the number of client workers of the floor: 8, as docs/performance.md reports it.
const floorWorkers = 8

// endState is what the operator converged a landscape to: the objects the floor writes again.
type endState struct {
	vectorDeployments   []konfidencev1.VectorDeployment
	artifactDeployments []konfidencev1.ArtifactDeployment
	// fluxObjects are the Flux objects of each ArtifactDeployment, by its UID.
	fluxObjects map[types.UID][]client.Object
}

// readEndState reads what the operator converged namespace to.
func readEndState(t testing.TB, env *testenv.Env, namespace string) endState {
	t.Helper()
	ctx := context.Background()
	vds := &konfidencev1.VectorDeploymentList{}
	ads := &konfidencev1.ArtifactDeploymentList{}
	repos := &sourcev1.HelmRepositoryList{}
	releases := &helmv2.HelmReleaseList{}
	for _, l := range []client.ObjectList{vds, ads, repos, releases} {
		if err := env.Client.List(ctx, l, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
	}
	s := endState{vectorDeployments: vds.Items, artifactDeployments: ads.Items, fluxObjects: map[types.UID][]client.Object{}}
	add := func(obj client.Object) {
		if owner := metav1.GetControllerOf(obj); owner != nil {
			s.fluxObjects[owner.UID] = append(s.fluxObjects[owner.UID], obj)
		}
	}
	for i := range repos.Items {
		add(&repos.Items[i])
	}
	for i := range releases.Items {
		add(&releases.Items[i])
	}
	return s
}

// floor writes, with floorWorkers client workers, the end state the operator converged a landscape to into
// namespace, with the fewest writes that state takes: per VectorDeployment its creation (the user's, timed for the
// operator too), its finalizer and one status write; per artifact its ArtifactDeployment created with its
// finalizer, its HelmRepository and HelmRelease created, and one status write of the ArtifactDeployment. The
// objects are the operator's, with their names, labels, annotations, specs and statuses, owned as the operator
// owns them. Nothing is read from a registry and nothing is decided: timed by the watcher with the operator's
// convergence check, this is the API server's floor for the landscape.
func floor(ctx context.Context, c client.Client, namespace string, s endState) error {
	uids := make([]types.UID, len(s.vectorDeployments)) // of the new VectorDeployments, by index
	err := inParallel(len(s.vectorDeployments), func(i int) error {
		vd := recreated(&s.vectorDeployments[i], namespace, nil).(*konfidencev1.VectorDeployment)
		vd.Finalizers, vd.Status = nil, konfidencev1.VectorDeploymentStatus{}
		if err := c.Create(ctx, vd); err != nil {
			return fmt.Errorf("creating VectorDeployment %s: %w", vd.Name, err)
		}
		uids[i] = vd.UID
		return operating.AddFinalizer(ctx, c, vd, konfidencev1.TeardownFinalizer)
	})
	if err != nil {
		return err
	}
	owners := map[types.UID]types.UID{}
	for i := range s.vectorDeployments {
		owners[s.vectorDeployments[i].UID] = uids[i]
	}
	err = inParallel(len(s.artifactDeployments), func(i int) error {
		converged := &s.artifactDeployments[i]
		ad := recreated(converged, namespace, owners).(*konfidencev1.ArtifactDeployment)
		ad.Status = konfidencev1.ArtifactDeploymentStatus{}
		if err := c.Create(ctx, ad); err != nil {
			return fmt.Errorf("creating ArtifactDeployment %s: %w", ad.Name, err)
		}
		for _, obj := range s.fluxObjects[converged.UID] {
			obj = recreated(obj, namespace, map[types.UID]types.UID{converged.UID: ad.UID})
			if err := c.Create(ctx, obj); err != nil {
				return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
			}
		}
		original := ad.DeepCopy()
		ad.Status = converged.Status
		return c.Status().Patch(ctx, ad, client.MergeFrom(original))
	})
	if err != nil {
		return err
	}
	return inParallel(len(s.vectorDeployments), func(i int) error {
		vd := &konfidencev1.VectorDeployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: s.vectorDeployments[i].Name}, vd); err != nil {
			return err
		}
		original := vd.DeepCopy()
		vd.Status = s.vectorDeployments[i].Status
		return c.Status().Patch(ctx, vd, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{}))
	})
}

// recreated is a copy of obj to create in namespace: what the API server set is left out, and its owner
// references lead to the new owners (by old UID).
func recreated(obj client.Object, namespace string, owners map[types.UID]types.UID) client.Object {
	copied, _ := obj.DeepCopyObject().(client.Object) // every kind the benchmark reads is a client.Object
	copied.SetNamespace(namespace)
	copied.SetUID("")
	copied.SetResourceVersion("")
	copied.SetGeneration(0)
	copied.SetCreationTimestamp(metav1.Time{})
	copied.SetManagedFields(nil)
	refs := copied.GetOwnerReferences()
	for i := range refs {
		refs[i].UID = owners[refs[i].UID]
	}
	copied.SetOwnerReferences(refs)
	return copied
}

// createLandscape creates the ArtifactDeployments of the landscape with floorWorkers workers.
func createLandscape(ctx context.Context, c client.Client, namespace string, l landscape, vectors []vector) error {
	type job struct {
		vd int
		a  ocmtest.ComponentVersion
	}
	var jobs []job
	for i := range l.vectorDeployments {
		for _, a := range vectorOf(vectors, i).artifacts {
			jobs = append(jobs, job{vd: i, a: a})
		}
	}
	return inParallel(len(jobs), func(i int) error {
		uid := types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", jobs[i].vd))
		return createArtifact(ctx, c, namespace, uid, jobs[i].a)
	})
}

// createArtifact creates the ArtifactDeployment of artifact a for the VectorDeployment of uid.
func createArtifact(ctx context.Context, c client.Client, namespace string, uid types.UID, a ocmtest.ComponentVersion) error {
	name, hash, err := naming.ArtifactDeploymentName(a.Name, a.Version, string(uid), 0)
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]string{"type": "ociArtifact", "imageReference": chartRef})
	if err != nil {
		return err
	}
	ad := &konfidencev1.ArtifactDeployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{konfidencev1.ArtifactIdentityLabel: naming.IdentityHash(a.Name, a.Version, string(uid))},
			Annotations: map[string]string{
				konfidencev1.ArtifactComponentAnnotation:   a.Name,
				konfidencev1.ArtifactVersionAnnotation:     a.Version,
				konfidencev1.ArtifactHashAnnotation:        hash,
				konfidencev1.AllowReuseAnnotation:          strconv.FormatBool(false),
				konfidencev1.VectorDeploymentUIDAnnotation: string(uid),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: konfidencev1.GroupVersion.String(), Kind: "VectorDeployment", Name: "floor", UID: uid,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: konfidencev1.ArtifactDeploymentSpec{
			Manifest: konfidencev1.ArtifactManifest{Type: helmType},
			Component: konfidencev1.Component{Name: a.Name, Version: a.Version, Resources: []konfidencev1.Resource{
				{Name: "chart", Type: "helmChart", Content: &apiextensionsv1.JSON{Raw: manifest}},
			}},
		},
	}
	if err := c.Create(ctx, ad); err != nil {
		return fmt.Errorf("creating ArtifactDeployment %s: %w", name, err)
	}
	return nil
}

// fluxObjects are the HelmRepository and HelmRelease the Flux deployer builds for ad with its default
// configuration.
func fluxObjects(ad *konfidencev1.ArtifactDeployment) []client.Object {
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: ad.Name, Namespace: ad.Namespace,
			Labels:      map[string]string{konfidencev1.ArtifactDeploymentLabel: ad.Name},
			Annotations: map[string]string{"fluxdeployer.konfidence.cloud/applied-digest": "000000000000000000000000"}}
	}
	interval := metav1.Duration{Duration: 10 * time.Minute}
	timeout := &metav1.Duration{Duration: 5 * time.Minute}
	return []client.Object{
		&sourcev1.HelmRepository{ObjectMeta: meta(), Spec: sourcev1.HelmRepositorySpec{
			URL: "oci://ghcr.io/stefanprodan/charts", Type: sourcev1.HelmRepositoryTypeOCI, Interval: interval,
		}},
		&helmv2.HelmRelease{ObjectMeta: meta(), Spec: helmv2.HelmReleaseSpec{
			Interval: interval, ReleaseName: ad.Name, TargetNamespace: ad.Namespace, StorageNamespace: ad.Namespace,
			Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
				Chart: "podinfo", Version: "6.9.1",
				SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: ad.Name},
			}},
			CommonMetadata: &helmv2.CommonMetadata{Labels: map[string]string{konfidencev1.ArtifactDeploymentLabel: ad.Name}},
			DriftDetection: &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled},
			Install:        &helmv2.Install{Timeout: timeout, CreateNamespace: true, Remediation: &helmv2.InstallRemediation{Retries: 3}},
			Upgrade: &helmv2.Upgrade{Timeout: timeout, Remediation: &helmv2.UpgradeRemediation{
				Retries: 3, RemediateLastFailure: ptr.To(true), Strategy: ptr.To(helmv2.RollbackRemediationStrategy)}},
		}},
	}
}
